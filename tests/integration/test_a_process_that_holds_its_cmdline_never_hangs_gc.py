"""A user's process whose command line cannot be read never hangs squashd.

gc, squashctl health's dry run and the job-end watch look for slurmstepd
among the node's processes. Reading a process's /proc/PID/cmdline takes
its memory map's lock, and a user's process can keep that lock from every
reader for ever: a read of its own memory (/proc/self/mem) that faults in
a page of a FUSE server that never answers holds the lock, and an mmap
queued behind it makes every later reader wait too. squashd read every
process's cmdline and only then checked that it ran as root; the gc pass
and the health check hung with the first such process (found by a
review, 2026-11-30). It now reads a process's uids first (its status
needs none of its memory) and a command line only for root's processes
(daemon/slurm/local_steps.c, daemon/core/job_end_watch.c).

A root process may become a user's between that check and the read (a
task of slurmstepd's between its fork and its exec, or any root process
that drops to a user and execs), so a command line is read only of a
process that runs slurmstepd and whose parent does not (found by a review,
2026-12-02). The root holder below stands for such a process caught after
the check: its program is not slurmstepd, so it is never read.
"""

import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

from conftest import BUILD, SQUASHCTL, USER1, run, uid_of, wait_until

pytestmark = pytest.mark.host_release_only("squashd's own /proc scan, the same on every Slurm release")

HANG_FUSE = BUILD / "tests" / "tools" / "hang_fuse"
FAKE_JOB = 990601
FILES = {"hello.txt": "hello from the image\n"}

# As the user: maps the hanging file; one thread reads that mapping through
# /proc/self/mem, which faults the page in with its memory map's lock held
# and waits for the FUSE READ for ever; a second thread's mmap then queues
# for the lock as a writer, and from then on every reader of the lock (a
# read of /proc/PID/cmdline among them) waits behind it. Says so, then
# sleeps until told to end.
HOLDER = r"""
import ctypes, mmap, os, sys, threading, time
path, marks = sys.argv[1], sys.argv[2]
fd = os.open(path, os.O_RDONLY)
m = mmap.mmap(fd, mmap.PAGESIZE, mmap.MAP_SHARED, mmap.PROT_READ)
addr = ctypes.addressof(ctypes.c_char.from_buffer_copy(b"x"))  # warm ctypes first
view = (ctypes.c_char * 1).from_buffer(bytearray(1))
libc = ctypes.CDLL(None, use_errno=True)
libc.mmap.restype = ctypes.c_void_p
libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int,
                      ctypes.c_long]
# Where the mapping lies (its start), from /proc/self/maps.
start = None
for line in open("/proc/self/maps"):
    if line.rstrip().endswith(path):
        start = int(line.split("-")[0], 16)
mem = os.open("/proc/self/mem", os.O_RDONLY)
threading.Thread(target=os.pread, args=(mem, 1, start), daemon=True).start()
time.sleep(0.5)
with open(marks + "/mapped.tmp", "w") as f:
    f.write(str(os.getpid()))
os.rename(marks + "/mapped.tmp", marks + "/mapped")
threading.Thread(target=libc.mmap, args=(None, 4096, 3, 0x22, -1, 0), daemon=True).start()
end = time.monotonic() + 120
while not os.path.exists(marks + "/end") and time.monotonic() < end:
    time.sleep(0.1)
os._exit(0)
"""


@pytest.mark.parametrize("owner", ["user", "root"])
def test_gc_and_health_pass_a_process_whose_cmdline_hangs(cluster, owner):
    if cluster.multinode:
        pytest.skip("one-node layout: the holder runs in the host's namespaces")
    src = cluster.workdir(USER1, "cmdline-src")
    src.chmod(0o755)
    (src / "pages").write_bytes(b"\0" * 65536)
    (src / "pages").chmod(0o644)
    mnt = cluster.workdir(USER1, "cmdline-hang")
    marks = cluster.workdir(USER1, "cmdline-marks")
    script = marks / "holder.py"
    script.write_text(HOLDER)
    img = cluster.make_image(cluster.workdir(USER1, "cmdline-img") / "a.sqfs", FILES, owner=USER1)
    server = subprocess.Popen([HANG_FUSE, src, mnt, "--hang", "read", "--uid", "any"],
                              stdout=subprocess.PIPE, text=True)
    holder = probe = None
    try:
        assert server.stdout.readline().strip() == "ready"
        as_owner = ["runuser", "-u", USER1, "--"] if owner == "user" else []
        holder = subprocess.Popen([*as_owner, "python3", str(script), str(mnt / "pages"), str(marks)],
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        wait_until(lambda: (marks / "mapped").exists() or holder.poll() is not None, 30,
                   what="the holder to map the hanging file over its arguments")
        assert holder.poll() is None, holder.communicate()
        pid = int((marks / "mapped").read_text())  # python's, below runuser
        # A reader of its cmdline now waits for ever (a child of ours, so
        # that the test itself never does).
        probe = subprocess.Popen(["cat", f"/proc/{pid}/cmdline"], stdout=subprocess.DEVNULL)
        time.sleep(1)
        assert probe.poll() is None, "the holder's cmdline was read: the hang is not set up"

        # A job in the registry that Slurm does not know: gc asks about it
        # after leaving out the jobs with a slurmstepd here (the /proc scan).
        p = cluster.rawclient("mount", FAKE_JOB, uid_of(USER1), f"{img}:/squash/cmdline")
        assert p.stdout.startswith("ok"), p.stdout
        t = time.monotonic()
        gc = run([SQUASHCTL, "--socket", cluster.socket, "--munge-socket", cluster.munge_socket, "gc"],
                 check=False, timeout=30)
        took = time.monotonic() - t
        assert gc.returncode == 0 and took < 10, (took, gc.stdout, gc.stderr)
        assert not any(m["image"] == str(img) for m in cluster.list_mounts()), \
            "gc did not release the job Slurm does not know"
        t = time.monotonic()
        health = run([SQUASHCTL, "--socket", cluster.socket, "--munge-socket", cluster.munge_socket,
                      "health"], check=False, timeout=30)
        took = time.monotonic() - t
        assert took < 10 and "not answering" not in health.stdout + health.stderr, \
            (took, health.stdout, health.stderr)
    finally:
        # The server first: aborting its connection ends every wait on it.
        for line in open("/proc/self/mountinfo"):
            f = line.split()
            if f[4] == str(mnt):
                try:
                    Path(f"/sys/fs/fuse/connections/{f[2].split(':')[1]}/abort").write_text("1")
                except OSError:
                    pass
        server.terminate()  # it unmounts
        (marks / "end").touch()
        for proc in (server, probe, holder):
            if proc:
                try:
                    proc.wait(10)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait(10)
        if any(line.split()[4] == str(mnt) for line in open("/proc/self/mountinfo")):
            run(["umount", "-l", mnt], check=False)
        cluster.rawclient("release", FAKE_JOB)
