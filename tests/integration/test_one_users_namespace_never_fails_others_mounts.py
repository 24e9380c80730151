"""squashd's mount directories are private mounts of their own
(daemon/mount/private_roots.h). Under a shared /run (every systemd node)
each mount squashd made below STATE_DIR propagated into every namespace
receiving /run's mounts, a user's `unshare -Urm --propagation unchanged`
among them, and the kernel charges each copy to the receiving namespace:
a user who filled such a namespace to fs.mount-max made every mount
squashd made for anyone fail with ENOSPC (a node error for every other
user's job), for as long as that namespace lived."""

import os
import signal
import subprocess

import pytest

from conftest import USER1, USER2, mountinfo, run, wait_until
from test_squash_shell import FILES, shell_cmd

pytestmark = pytest.mark.host_release_only("squashd's own mounts: the same on every release")

MOUNT_MAX = "/proc/sys/fs/mount-max"

# Stacks tmpfs mounts on a directory until the kernel refuses one, says
# how many it made, and keeps the namespace until killed.
FILLER = r"""
import ctypes, os, sys, time
libc = ctypes.CDLL(None, use_errno=True)
where, done = sys.argv[1], sys.argv[2]
n = 0
while libc.mount(b"none", where.encode(), b"tmpfs", 0, b"size=4k") == 0:
    n += 1
with open(done, "w") as f:
    f.write(f"{n} {os.strerror(ctypes.get_errno())}\n")
time.sleep(600)
"""


def test_a_users_full_namespace_never_fails_another_users_mounts(cluster):
    c = cluster
    d = c.workdir(USER1, "filler")
    (d / "fill.py").write_text(FILLER)
    where = d / "stack"
    where.mkdir()
    os.chown(where, int(run(["id", "-u", USER1]).stdout), -1)
    done = d / "done"
    theirs = c.workdir(USER2, "full-ns")
    img = c.make_image(theirs / "theirs.sqfs", FILES, owner=USER2)
    os.chmod(c.trusted, 0o755)
    trusted = c.make_image(c.trusted / f"full-ns-{os.getpid()}.sqfs", FILES, owner="root")
    state = str(c.state_dir)
    old_max = open(MOUNT_MAX).read().strip()
    filler = None
    c.cluster_sh("squashd-stop")
    try:
        # STATE_DIR under a shared mount, as /run is on a systemd node.
        run(["mount", "--bind", state, state])
        run(["mount", "--make-shared", state])
        c.cluster_sh("squashd-start")
        roots = [m for m in mountinfo() if m["mount_point"] in (f"{state}/mnt", f"{state}/sessions")]
        assert len(roots) == 2, roots
        with open(MOUNT_MAX, "w") as f:
            f.write("2000\n")
        filler = subprocess.Popen(["runuser", "-u", USER1, "--", "unshare", "-Urm", "--propagation",
                                   "unchanged", "python3", d / "fill.py", where, done])
        wait_until(done.exists, 60, 0.1, "the user's namespace to fill")
        assert "No space left on device" in done.read_text(), done.read_text()

        job = c.run_job(USER2, "cat /squash/theirs/hello.txt /squash/trusted/hello.txt\n",
                        [f"--squash-image={img},{trusted}:/squash/trusted"])
        assert job.state == "COMPLETED", job.output()
        assert job.output() == FILES["hello.txt"] * 2
        p = c.as_user(USER2, shell_cmd(c, img, "--", "cat", "/squash/theirs/hello.txt"), cwd=theirs)
        assert p.returncode == 0 and p.stdout == FILES["hello.txt"], (p.stdout, p.stderr)
        assert c.squashctl("health", check=False).returncode == 0
    finally:
        with open(MOUNT_MAX, "w") as f:
            f.write(old_max + "\n")
        if filler:
            filler.kill()
            filler.wait()
            run(["pkill", "-KILL", "-u", USER1, "-f", "fill.py"], check=False)
        wait_until(lambda: not c.list_mounts(), 30, 0.1, "the mounts to go")
        c.cluster_sh("squashd-stop")
        run(["umount", "-R", state], check=False)
        c.cluster_sh("squashd-start")
