"""A job's FUSE reader (squash-reader) killed while the job reads: squashd
keeps a descriptor of the FUSE connection, starts a new reader on it, and
the kernel resends the requests in flight (FUSE_NOTIFY_RESEND, Linux 6.9):
the job sees a pause, not ENOTCONN. A reader that keeps dying is given up
after a few restarts, as before. After a squashd restart, the new squashd
takes a copy of the connection out of the running reader (pidfd_getfd)
and replaces a reader that dies the same way."""

import hashlib
import os
import platform
import re
import signal
import time

import pytest

from conftest import USER1, Job, run, wait_until

KERNEL_RESENDS = tuple(int(x) for x in re.findall(r"\d+", platform.release())[:2]) >= (6, 9)
pytestmark = pytest.mark.skipif(not KERNEL_RESENDS, reason="the kernel predates FUSE_NOTIFY_RESEND")

# Reads the file over and over, dropping its pages after each pass so that
# every pass goes to the FUSE server; stops when told. Any error ends it.
READER = r"""
import hashlib, os, sys, time
path, want, started, stop = sys.argv[1:5]
passes = 0
while not os.path.exists(stop) or passes < 3:
    h = hashlib.md5()
    with open(path, "rb") as f:
        while True:
            b = f.read(1 << 20)
            if not b:
                break
            h.update(b)
        os.posix_fadvise(f.fileno(), 0, 0, os.POSIX_FADV_DONTNEED)
    if h.hexdigest() != want:
        print("WRONG DATA", h.hexdigest(), flush=True)
        sys.exit(3)
    passes += 1
    if passes == 1:
        open(started, "w").close()
print("passes", passes, "all right", flush=True)
"""


def data_image(cluster, name):
    d = cluster.workdir(USER1, "img")
    src = d / f"{name}.src"
    src.mkdir()
    # Compressible but not trivial: many blocks to decompress.
    data = b"".join(b"%08d %s\n" % (i, hashlib.sha1(b"%d" % i).hexdigest().encode())
                    for i in range(400000))
    (src / "big").write_bytes(data)
    img = d / f"{name}.sqfs"
    run(["mksquashfs", src, img, "-noappend", "-quiet", "-no-progress", "-all-root"])
    run(["chown", f"{USER1}:", img])
    return img, hashlib.md5(data).hexdigest()


def start_reading_job(cluster, img, want):
    d = cluster.workdir(USER1, "rd")
    (d / "read.py").write_text(READER)
    started, stop = d / "started", d / "stop"
    script = cluster.write_script(d, f"python3 {d}/read.py /squash/data/big {want} {started} {stop}\n")
    job = cluster.sbatch(USER1, script, [f"--squash-image={img}:/squash/data"])
    assert isinstance(job, Job), job.stderr
    wait_until(started.exists, 60, what="the job's first full read")
    return job, stop


def server_of(cluster, img):
    m = [m for m in cluster.list_mounts() if m["image"] == str(img)]
    assert len(m) == 1, m
    return m[0]


def kill_reader_and_see_it_restarted(cluster, img):
    """SIGKILLs the reader of img; squashd starts a new one on the same
    connection, and the job reads through it for a second."""
    old = server_of(cluster, img)["server_pid"]
    offset = len(cluster.squashd_log())
    os.kill(old, signal.SIGKILL)
    wait_until(lambda: "restarted as pid" in cluster.squashd_log()[offset:], 10,
               what="squashd to restart the reader")
    new = server_of(cluster, img)
    assert new["server_pid"] != old and new["state"] == "ready", new
    time.sleep(1.0)  # the job reads through the new reader meanwhile


def assert_job_read_through(cluster, job):
    """The reading job ended well, its reads never failed, the node is healthy."""
    job.wait()
    out = job.output()
    assert job.state == "COMPLETED", out
    assert "all right" in out and "Transport endpoint" not in out, out
    assert cluster.squashctl("health", check=False).returncode == 0


def test_killed_reader_is_restarted_and_the_job_reads_on(cluster):
    img, want = data_image(cluster, "restart")
    job, stop = start_reading_job(cluster, img, want)
    try:
        m = server_of(cluster, img)
        assert m["reader"].startswith("squash-reader "), m
        for _ in range(2):
            kill_reader_and_see_it_restarted(cluster, img)
    finally:
        stop.touch()
    assert_job_read_through(cluster, job)


def connection_named_in_fdinfo(pid):
    """Whether the kernel names the FUSE connection of a /dev/fuse
    descriptor in its fdinfo (fuse_connection, Linux 6.16 or so), which
    squashd needs to adopt a reader's connection."""
    for fd in os.listdir(f"/proc/{pid}/fd"):
        if os.readlink(f"/proc/{pid}/fd/{fd}") == "/dev/fuse":
            with open(f"/proc/{pid}/fdinfo/{fd}") as f:
                return "fuse_connection:" in f.read()
    return False


@pytest.mark.host_release_only("squashd's own restart and adoption: the same on every release")
def test_reader_killed_after_a_squashd_restart_is_restarted_too(cluster):
    img, want = data_image(cluster, "adopted")
    job, stop = start_reading_job(cluster, img, want)
    try:
        before = server_of(cluster, img)
        if not connection_named_in_fdinfo(before["server_pid"]):
            pytest.skip("the kernel does not name a /dev/fuse descriptor's connection in fdinfo")
        old_squashd = cluster.squashd_pid()
        cluster.cluster_sh("squashd-stop")
        wait_until(lambda: not os.path.exists(f"/proc/{old_squashd}"), 10, what="squashd to exit")
        offset = len(cluster.squashd_log())
        cluster.cluster_sh("squashd-start")
        wait_until(lambda: "kept the FUSE connection" in cluster.squashd_log()[offset:], 10,
                   what="the new squashd to keep the adopted mount's connection")
        adopted = server_of(cluster, img)
        assert adopted["server_pid"] == before["server_pid"], adopted
        assert adopted["mount_point"] == before["mount_point"], adopted

        kill_reader_and_see_it_restarted(cluster, img)
    finally:
        stop.touch()
    assert_job_read_through(cluster, job)


@pytest.mark.host_release_only("squashd's own restart policy: the same on every release")
def test_reader_that_keeps_dying_is_given_up_as_before(cluster):
    img, want = data_image(cluster, "giveup")
    job, stop = start_reading_job(cluster, img, want)
    try:
        # Three restarts a minute at most; the fourth death is final.
        for i in range(4):
            old = server_of(cluster, img)["server_pid"]
            offset = len(cluster.squashd_log())
            os.kill(old, signal.SIGKILL)
            if i < 3:
                wait_until(lambda: "restarted as pid" in cluster.squashd_log()[offset:], 10,
                           what="squashd to restart the reader")
        wait_until(lambda: "not restarted again" in cluster.squashd_log(), 10,
                   what="squashd to give the reader up")
        # Dead, or already released: the job's reads fail at once, so the
        # job may end and its epilog drop the mount before this looks.
        wait_until(lambda: all(m["state"] == "dead" for m in cluster.list_mounts()
                               if m["image"] == str(img)), 10, what="the mount to be dead")
    finally:
        stop.touch()
    job.wait()
    out = job.output()
    # As before this change: the job's reads fail once the mount is dead.
    assert job.state == "FAILED", out
    assert re.search(r"Transport endpoint is not connected|Software caused connection abort|"
                     r"Input/output error", out), out
