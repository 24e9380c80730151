"""An image path is the user's to plant anything at: a FIFO whose open
waits for a writer that never comes, a socket, a device, a directory, a
symbolic link, a loop of links on the way. squashd's opener walks the path
a component at a time without following links and opens nothing that is
not a regular file (daemon/mount/image_open.c), so each of these ends at
once as the user's error naming what it is, whatever the others wait on:
a column of the hang matrix (test_one_users_hang_never_delays_another.py)
for what sits at the path rather than for how its file system answers."""

import os
import socket
import subprocess
import time

import pytest

from conftest import RAWCLIENT, USER1, uid_of

pytestmark = pytest.mark.host_release_only("squashd's opener: the same on every Slurm release")

FAKE_JOB = 3995100
BOUND = 5  # seconds; each answer is immediate, the bound only ends a hang


def test_an_image_that_is_not_a_regular_file_is_refused_at_once(cluster):
    d = cluster.workdir(USER1, "not-files")
    os.mkfifo(d / "fifo.sqfs")
    sock = socket.socket(socket.AF_UNIX)
    sock.bind(str(d / "socket.sqfs"))
    (d / "dir.sqfs").mkdir()
    (d / "link.sqfs").symlink_to("/dev/zero")
    (d / "loop").symlink_to(d / "loop")
    for p in d.iterdir():
        os.lchown(p, uid_of(USER1), -1)
    cases = {
        "fifo.sqfs": "is a FIFO, not a regular file",
        "socket.sqfs": "is a socket, not a regular file",
        "dir.sqfs": "is a directory, not a regular file",
        "link.sqfs": "is a symbolic link, not a regular file",
        "loop/x.sqfs": "",  # ELOOP or "a symbolic link": any user error
        "/dev/zero": "is a device, not a regular file",
    }
    try:
        t = time.monotonic()
        procs = {}
        for i, name in enumerate(cases):
            path = name if name.startswith("/") else f"{d}/{name}"
            procs[name] = subprocess.Popen(
                [RAWCLIENT, "--socket", cluster.socket, "--munge-socket", cluster.munge_socket, "mount",
                 str(FAKE_JOB + i), str(uid_of(USER1)), f"{path}:/squash/x{i}"],
                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for name, p in procs.items():
            out, err = p.communicate(timeout=BOUND + 30)
            assert out.startswith("user-error") and cases[name] in out, (name, out, err)
        took = time.monotonic() - t
        assert took < BOUND, f"the refusals took {took:.1f} s"
        assert not cluster.list_mounts()
    finally:
        sock.close()
        for i in range(len(cases)):
            cluster.rawclient("release", FAKE_JOB + i)
