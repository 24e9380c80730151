"""fusermount refuses a non-root user's FUSE mount once the mount table
lists fusermount's mount_max FUSE file systems (/etc/fuse.conf, 1000 by
default), all users' together. squashd's FUSE mounts of a user's images and
the binds of them that the user's squash-shell sessions make are in that
count, on the node and in every namespace copied from it: unbounded, one
user's images would stop every other user's own squashfuse, sshfs,
Apptainer or enroot on the node. Each user gets a share
(max_fuse_mounts_per_user, by default a quarter of mount_max, read from
/etc/fuse.conf; daemon/core/user_fuse_mounts.h): past it that user's new
FUSE mount or session bind is refused as their own error, naming the
setting, and another user's fusermount and squash-shell still mount."""

import contextlib
import json
import os
import socket
import subprocess
from pathlib import Path

import pytest

from conftest import USER1, USER2, BlockingJob, blocking_jobs, mountinfo, run, uid_of, wait_until
from test_health_checks import reload_conf
from test_squash_shell import FILES, refused_and_others_start, sessions

pytestmark = pytest.mark.host_release_only("squashd's own budget, the same on every Slurm release")

FUSE_CONF = Path("/etc/fuse.conf")


def fuse_entries():
    """What fusermount counts: FUSE file systems in this namespace's table."""
    return sum(1 for m in mountinfo() if m["fstype"] == "fuse" or m["fstype"].startswith("fuse."))


def fusermount_as(user, image, mnt):
    """image served at mnt by squashfuse_ll, run by user, mounted by user's
    fusermount3 as libfuse mounts (fusermount3 hands the connection back
    over _FUSE_COMMFD). /dev/fuse is 0666 on a Debian node and 0600 on
    this machine: it is a node's while fusermount3 runs. Returns the
    server, or fusermount3's refusal."""
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    mode = os.stat("/dev/fuse").st_mode & 0o7777
    try:
        os.chmod("/dev/fuse", 0o666)
        p = run(["runuser", "-u", user, "--", "fusermount3", "-o", "ro", "--", mnt], check=False,
                env=dict(os.environ, _FUSE_COMMFD=str(theirs.fileno())), pass_fds=(theirs.fileno(),))
        if p.returncode != 0:
            return p.stderr
        _, fds, _, _ = socket.recv_fds(ours, 1, 1)
    finally:
        os.chmod("/dev/fuse", mode)
        ours.close()
        theirs.close()
    try:
        return subprocess.Popen(["runuser", "-u", user, "--", "squashfuse_ll", "-f", str(image),
                                 f"/dev/fd/{fds[0]}"], pass_fds=fds)
    finally:
        os.close(fds[0])


@contextlib.contextmanager
def fusermount_mount_max(c, mount_max):
    """/etc/fuse.conf saying mount_max (a bind over it, in this namespace,
    which squashd and the users' fusermount3 share), read by squashd at a
    reload; the file, and squashd's reading of it, as before afterwards."""
    fake = c.dir / "fuse.conf"
    fake.write_text(f"mount_max = {mount_max}\n")
    made = not FUSE_CONF.exists()
    if made:
        FUSE_CONF.write_text("")
    conf = c.dir / "squashd.conf"
    original = conf.read_text()
    run(["mount", "--bind", fake, FUSE_CONF])
    try:
        reload_conf(c, original + "max_fuse_mounts_per_user = 0\n",
                    "reload: max_fuse_mounts_per_user is now '0'")
        yield
    finally:
        run(["umount", FUSE_CONF], check=False)
        if made:
            FUSE_CONF.unlink()
        reload_conf(c, original, "reload: max_fuse_mounts_per_user is now")


def fuse_mounts_budget(cluster, user):
    rows = json.loads(cluster.squashctl("status", "--json").stdout)["user_budgets"]
    mine = [r for r in rows if r["uid"] == uid_of(user)]
    return mine[0]["budgets"].get("FUSE mounts") if mine else None


def test_a_user_past_their_share_of_fuse_mounts_leaves_others_fusermount_working(cluster):
    c = cluster
    base = fuse_entries()
    if base >= 40:
        pytest.skip(f"this machine already has {base} FUSE mounts")
    mount_max = base + 16
    share = mount_max // 4
    d = c.workdir(USER1, "fm")
    # Enough images to fill fusermount's mount_max on their own.
    imgs = [c.make_image(d / f"fm{i:02d}.sqfs", FILES, owner=USER1) for i in range(mount_max - base + 1)]
    theirs = c.workdir(USER2, "fm")
    other = c.make_image(theirs / "theirs.sqfs", FILES, owner=USER2)
    mnt = theirs / "own-mount"
    mnt.mkdir()
    os.chown(mnt, uid_of(USER2), -1)
    holder = None
    with fusermount_mount_max(c, mount_max):
        try:
            uid = uid_of(USER1)
            reason = (f"the images of uid {uid} already put {share} FUSE file systems in this node's "
                      f"mount table (mounts, and binds of them by squash-shell sessions), that user's "
                      f"share (max_fuse_mounts_per_user = {share}, of fusermount's mount_max = {mount_max}")
            job = c.run_job(USER1, "true\n", ["--squash-image=" + ",".join(str(i) for i in imgs)], cwd=d)
            assert job.state == "FAILED", job.output()
            assert reason in job.output(), job.output()
            assert "drain" not in c.node_state(), "a user's budget drained the node"
            wait_until(lambda: not c.list_mounts() and fuse_entries() == base, 15, 0.1,
                       "the failed job's mounts to go")

            # The whole share held by a running job.
            holder = BlockingJob(c, USER1, ",".join(str(i) for i in imgs[:share]))
            holder.wait_ready()
            assert fuse_entries() == base + share
            assert fuse_mounts_budget(c, USER1) == {"used": share, "limit": share}
            # A session's bind of one of them is one more entry: refused; another
            # user's session still starts and reads.
            refused_and_others_start(c, d, imgs[0], reason, 0, other)
            # Another user's own fusermount still mounts, and reads.
            server = fusermount_as(USER2, other, mnt)
            assert not isinstance(server, str), f"fusermount3 refused {USER2}: {server}"
            try:
                p = c.as_user(USER2, ["cat", str(mnt / "hello.txt")])
                assert p.returncode == 0 and p.stdout == FILES["hello.txt"], (p.stdout, p.stderr)
            finally:
                run(["umount", "-l", mnt], check=False)
                server.wait(timeout=30)
            holder.release()
            assert holder.job.state == "COMPLETED", holder.job.output()
            holder = None
            wait_until(lambda: not c.list_mounts() and fuse_entries() == base, 15, 0.1,
                       "the job's mounts to go")
            assert not sessions(c)
        finally:
            if holder:
                holder.go.touch()
                holder.job.wait()
            if any(m["mount_point"] == str(mnt) for m in mountinfo()):
                run(["umount", "-l", mnt], check=False)


def test_health_says_when_the_nodes_fuse_mounts_near_mount_max(cluster):
    """Each user's share is a quarter of mount_max: several users at once,
    or FUSE mounts outside squashd, can still fill it. squashctl health
    names the count against mount_max from nine tenths of it on, and not
    below, as a note (exit 0): one user's own fusermount mounts can fill
    the table alone, and a user's doing never gets the node drained."""
    c = cluster
    base = fuse_entries()
    d = c.workdir(USER1, "fm-health")
    imgs = [c.make_image(d / f"fh{i}.sqfs", FILES, owner=USER1) for i in range(2)]
    with fusermount_mount_max(c, base + 2):
        p = c.squashctl("health", check=False)
        assert p.returncode == 0 and "FUSE file systems" not in p.stdout, p.stdout
        with blocking_jobs(c, (USER1, f"{imgs[0]}", ""), (USER2, f"{imgs[1]}", "")):
            assert fuse_entries() == base + 2
            p = c.squashctl("health", check=False)
            assert p.returncode == 0, p.stdout
            assert (f"note: this node's mount table lists {base + 2} FUSE file systems, against "
                    f"fusermount's mount_max = {base + 2} (/etc/fuse.conf)") in p.stdout, p.stdout
        wait_until(lambda: not c.list_mounts(), 15, 0.1, "the jobs' mounts to go")
