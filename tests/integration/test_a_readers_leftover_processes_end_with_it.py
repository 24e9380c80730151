"""Whatever a user's FUSE server forked ends with it: each server runs in
a cgroup of its own below its user's (uid-<uid>/reader-<pid>; a systemd
scope per reader under systemd), and when the server is gone squashd kills
every process left in that cgroup and removes it
(daemon/process/reader_cgroup.c, cgroup_kill.c, reader_scope.c).

The reader does not fork by itself: the test puts a process of the user
into the reader's cgroup, which is what a forked child looks like to the
kernel. Issue 37, mechanism 8."""

import pwd
import re
import subprocess
from pathlib import Path

import pytest

from conftest import USER1, proc_uids, uid_of, wait_until

pytestmark = pytest.mark.host_release_only("squashd's cgroups for readers: the same on every release")

FILES = {"hello.txt": "hello from the image\n"}
FAKE_JOB = 990501


def v1_pids_root():
    """Where the v1 pids hierarchy is mounted, or None (a v2 host)."""
    for line in Path("/proc/self/mountinfo").read_text().splitlines():
        fields = line.split()
        sep = fields.index("-")
        if fields[sep + 1] == "cgroup" and "pids" in fields[sep + 3].split(","):
            return fields[4]
    return None


def exited(pid):
    """Whether pid is gone or a zombie (it may go between the two looks)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(") ", 1)[1][0] == "Z"
    except FileNotFoundError:
        return True


def reader_cgroup(pid):
    """The directory of the reader's cgroup (pids hierarchy on v1)."""
    text = Path(f"/proc/{pid}/cgroup").read_text()
    root = v1_pids_root()
    if root:
        path = re.search(r"^\d+:(?:[^:\n]*,)?pids(?:,[^:\n]*)?:(.*)$", text, re.M).group(1)
    else:
        root = "/sys/fs/cgroup"
        path = re.search(r"^0::(.*)$", text, re.M).group(1)
    return Path(root + path)


def test_a_process_in_a_readers_cgroup_is_killed_when_the_reader_ends(cluster):
    c = cluster
    uid = uid_of(USER1)
    gid = pwd.getpwnam(USER1).pw_gid
    img = c.make_image(c.workdir(USER1, "leftover") / "leftover.sqfs", FILES, owner=USER1)
    sleeper = None
    try:
        p = c.rawclient("mount", FAKE_JOB, uid, f"{img}:/squash/leftover")
        assert p.returncode == 0, p.stdout + p.stderr
        readers = [r for r in c.instance_fuse_servers() if proc_uids(r)[0] == uid]
        assert len(readers) == 1, readers
        (reader,) = readers
        cgroup = reader_cgroup(reader)
        assert (cgroup / "cgroup.procs").exists(), cgroup
        # A process of the user's in the reader's cgroup: a child it forked.
        sleeper = subprocess.Popen(["sleep", "300"], user=uid, group=gid, extra_groups=[])
        (cgroup / "cgroup.procs").write_text(f"{sleeper.pid}\n")
        assert str(sleeper.pid) in (cgroup / "cgroup.procs").read_text().split()

        # The job ends: the reader served its last mount and exits.
        p = c.rawclient("release", FAKE_JOB)
        assert p.returncode == 0, p.stdout + p.stderr
        wait_until(lambda: exited(reader), 15, what="the reader to exit")
        # What it left behind goes with it, and so does its cgroup.
        wait_until(lambda: sleeper.poll() is not None, 10, 0.05,
                   "the process left in the reader's cgroup to be killed")
        assert sleeper.returncode == -9, sleeper.returncode
        wait_until(lambda: not cgroup.exists(), 10, 0.05, "the reader's cgroup to be removed")
        assert re.search(rf"FUSE server {reader} of uid {uid} left 1 process\(es\) behind; "
                         "killed them", c.squashd_log())
    finally:
        if sleeper and sleeper.poll() is None:
            sleeper.kill()
            sleeper.wait()
        c.rawclient("release", FAKE_JOB)
        wait_until(lambda: not c.list_mounts(), 30, what="the mounts to go")
