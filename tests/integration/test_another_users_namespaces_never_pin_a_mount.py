"""A mount namespace made after squashd mounted an image holds a copy of
the mount: a user's own `unshare -Urm`, a squash-shell session, any
container. Mount propagation does not reach those copies (their namespace
is private, or the copies are locked in a user namespace), so unmounting
squashd's mount alone leaves the image mounted there for as long as that
namespace lives: the image's squash-reader is never told (no DESTROY) and
squashd killed it at request_timeout, on its user's time, and a trusted
image's loop device stayed bound. squashd removes the mount point right
after the unmount, which detaches the copies in every namespace
(daemon/mount/unmount.c), before it waits for the reader to exit. One
user's namespaces never keep another user's mounts."""

import os
import signal
import subprocess
import time

import pytest

from conftest import USER1, USER2, mountinfo, wait_until
from test_squash_shell import sessions, shell_cmd

pytestmark = pytest.mark.host_release_only("squashd's unmount: the same on every Slurm release")

FILES = {"hello.txt": "hello from the image\n"}


def test_another_users_namespaces_never_keep_a_mount_nor_its_reader(cluster):
    c = cluster
    d1, d2 = c.workdir(USER1, "pin"), c.workdir(USER2, "pin")
    mine = c.make_image(d1 / "mine.sqfs", FILES, owner=USER1)
    theirs = c.make_image(d2 / "theirs.sqfs", FILES, owner=USER2)
    os.chmod(c.trusted, 0o755)
    trusted = c.make_image(c.trusted / f"pin-{os.getpid()}.sqfs", FILES, owner="root")
    procs = []

    def session(user, d, spec, tag):
        pidfile = d / f"inner-{tag}"
        procs.append(subprocess.Popen(
            ["runuser", "-u", user, "--", *[str(x) for x in shell_cmd(
                c, spec, "--", "bash", "-c", f"echo $$ > {pidfile}; exec sleep 300")]],
            cwd=d, env=c.env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
        wait_until(lambda: pidfile.exists(), 30, 0.1, f"{user}'s session to start")
        return int(pidfile.read_text())

    try:
        # The other user's session: their image (their reader) and a
        # trusted one (a loop device).
        session(USER2, d2, f"{theirs}:/squash/theirs,{trusted}:/squash/trusted", "theirs")
        theirs_session = next(p for p, i in sessions(c).items() if i == str(theirs))
        points = [m["mount_point"] for m in c.list_mounts() if m["image"] in (str(theirs), str(trusted))]
        assert len(points) == 2 and c.instance_loops(), (points, c.instance_loops())
        # Then this user's namespaces: a session, and one of their own.
        in_session = session(USER1, d1, f"{mine}:/squash/mine", "mine")
        own = subprocess.Popen(["runuser", "-u", USER1, "--", "unshare", "-Urm", "sleep", "300"])
        procs.append(own)
        wait_until(lambda: any(p in [m["mount_point"] for m in mountinfo(own.pid)] for p in points),
                   10, 0.05, "the user's own namespace")

        def copies():
            return [p for pid in (in_session, own.pid) for p in points
                    if p in [m["mount_point"] for m in mountinfo(pid)]]
        assert len(copies()) == 4, copies()

        log_from = len(c.squashd_log())
        t = time.monotonic()
        os.kill(theirs_session, signal.SIGKILL)
        wait_until(lambda: not [m for m in c.list_mounts() if m["image"] in (str(theirs), str(trusted))],
                   30, 0.05, "the other user's images to go")
        took = time.monotonic() - t
        print(f"the other user's session released in {took:.1f} s")
        assert copies() == [], "a copy of the other user's mount stayed"
        log = c.squashd_log()[log_from:]
        assert "did not exit after unmount" not in log and "still serves copies" not in log, \
            "the other user's reader was not told and was killed"
        assert took < 4, f"the other user's release took {took:.1f} s"
        assert not c.instance_loops(), f"the trusted image's loop device stayed: {c.instance_loops()}"
    finally:
        for pid in sessions(c):
            os.kill(pid, signal.SIGKILL)
        for p in procs:
            p.kill()
            p.communicate(timeout=30)
        wait_until(lambda: not c.list_mounts() and not c.node_mounts(), 30, 0.1, "the mounts to go")


def test_gc_releases_a_lost_job_whatever_copies_users_namespaces_hold(cluster):
    """gc keeps a job Slurm says is gone while a process outside squashd's
    namespace uses its mount (a step's bind, test_health_checks.py). A copy
    at squashd's own path, which every namespace made after the mount
    holds, is no use: before, one user's `unshare -Urm` kept every lost
    job mounted for as long as it lived. Only root's and the job's user's
    namespaces are read (daemon/mount/mount_users.c, daemon/core/gc.c)."""
    c = cluster
    gone = 3996301  # a job Slurm does not know
    img = c.make_image(c.workdir(USER1, "pin-gc") / "lost.sqfs", FILES, owner=USER1)
    holders = []
    try:
        assert c.rawclient("mount", gone, os.stat(img).st_uid, f"{img}:/squash/lost").stdout.startswith("ok")
        point = next(m["mount_point"] for m in c.list_mounts() if m["image"] == str(img))
        for user in (USER1, USER2):
            holders.append(subprocess.Popen(["runuser", "-u", user, "--", "unshare", "-Urm", "sleep", "300"]))
        wait_until(lambda: all(point in [m["mount_point"] for m in mountinfo(h.pid)] for h in holders),
                   10, 0.05, "the users' namespaces to hold copies")
        out = c.squashctl("gc").stdout
        assert f"released job {gone}" in out, out + c.squashd_log()[-2000:]
        wait_until(lambda: not c.list_mounts(), 10, 0.1, "the lost job's mount to go")
        assert all(point not in [m["mount_point"] for m in mountinfo(h.pid)] for h in holders), \
            "a copy stayed in a user's namespace"
    finally:
        for h in holders:
            h.kill()
            h.wait()
        c.rawclient("release", gone)
        wait_until(lambda: not c.list_mounts(), 30, 0.1, "the mounts to go")
