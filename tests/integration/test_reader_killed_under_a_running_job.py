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
import shutil
import signal
import subprocess
import time

import pytest

from conftest import USER1, Job, run, uid_of, wait_until
from test_health_checks import reload_conf
from test_squash_shell import shell_cmd, sessions

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
    os.kill(old, signal.SIGKILL)
    # squashd's list, not its warning: that is a line about the user's
    # reader, which the per-user log budget may hold back after a test
    # that made the same user log much.
    wait_until(lambda: server_of(cluster, img)["server_pid"] not in (old, 0), 10, 0.05,
               "squashd to restart the reader")
    new = server_of(cluster, img)
    assert new["state"] == "ready", new
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
            if i < 3:  # squashd's list: its warnings about the reader have a budget
                wait_until(lambda: server_of(cluster, img)["server_pid"] not in (old, 0), 10, 0.05,
                           "squashd to restart the reader")
        wait_until(lambda: "not restarted again" in cluster.squashd_log(), 10,
                   what="squashd to give the reader up")
        # ... and no reader is started for a restart that will not be made.
        started = re.findall(r"started \S+ pid \d+ for the FUSE mounts of user .*", cluster.squashd_log()[offset:])
        assert not started, started
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


@pytest.mark.host_release_only("squashd's own restart: the same on every release")
def test_a_reader_serving_300_mounts_is_restarted_with_all_of_them(cluster):
    """A restart hands the new reader every mount the dead one served at
    once, without waiting (under the registry lock): here 300, a user's
    session of 300 images. All come back ready and read. squashd's socket
    to a reader had the default buffer, which took 278 such requests: the
    rest failed and their mounts were given up as dead. When the user
    kills the reader until squashd gives it up, squashd says so in a line
    per death, on the user's log budget, not in an error line per mount
    (300 lines no budget held back); and the dead mounts are a note in
    squashctl health, not a problem that would get the node drained."""
    c = cluster
    d = c.workdir(USER1, "many")
    first = c.make_image(d / "m000.sqfs", {"hello.txt": "hello\n"}, owner=USER1)
    imgs = [first]
    for i in range(1, 300):
        copy = d / f"m{i:03d}.sqfs"  # a file of its own: a mount of its own
        shutil.copyfile(first, copy)
        os.chown(copy, uid_of(USER1), -1)
        imgs.append(copy)
    pidfile = d / "held"
    conf = c.dir / "squashd.conf"
    original = conf.read_text()
    # 300 mounts and 300 binds: past the default share of the FUSE table.
    reload_conf(c, original + "max_fuse_mounts_per_user = 700\n",
                "reload: max_fuse_mounts_per_user is now '700'")
    held = subprocess.Popen(
        ["runuser", "-u", USER1, "--", *[str(x) for x in shell_cmd(
            c, ",".join(str(i) for i in imgs), "--", "bash", "-c", f"echo $$ > {pidfile}; exec sleep 300")]],
        cwd=d, env=c.env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        wait_until(lambda: pidfile.exists(), 120, 0.2, "the session of 300 images to start")
        mounts = c.list_mounts()
        assert len(mounts) == 300, len(mounts)
        session = int(pidfile.read_text())
        offset = len(c.squashd_log())
        # Three restarts a minute (mount/fuse_keep.h), each of all 300.
        for _ in range(3):
            (old,) = {m["server_pid"] for m in c.list_mounts()}
            os.kill(old, signal.SIGKILL)
            wait_until(lambda: all(m.get("server_pid") != old for m in c.list_mounts()), 20, 0.2,
                       "squashd to hand every mount to a new reader")
            states = {m["state"] for m in c.list_mounts()}
            assert states == {"ready"}, (states, c.squashd_log()[offset:][-3000:])
            for i in (0, 150, 299):
                assert open(f"/proc/{session}/root/squash/m{i:03d}/hello.txt").read() == "hello\n"
        # The fourth death is final for all of them.
        (old,) = {m["server_pid"] for m in c.list_mounts()}
        os.kill(old, signal.SIGKILL)
        wait_until(lambda: {m["state"] for m in c.list_mounts()} == {"dead"}, 20, 0.2,
                   "squashd to give the mounts up")
        said = [line for line in c.squashd_log()[offset:].splitlines()
                if "FUSE server" in line and ": debug: " not in line]
        assert len(said) <= 4, f"{len(said)} lines, as: {said[:3]}"
        p = c.squashctl("health", check=False)
        assert p.returncode == 0, p.stdout
        assert "note: 300 FUSE mount(s) whose reader died" in p.stdout, p.stdout
    finally:
        for pid in sessions(c):
            os.kill(pid, signal.SIGKILL)
        held.kill()
        held.communicate(timeout=60)
        wait_until(lambda: not c.list_mounts(), 60, 0.2, "the session's mounts to go")
        reload_conf(c, original, "reload: max_fuse_mounts_per_user is now")
