"""A scan is answered on the scanner's CPU (daemon/reader/worker_cpu.c,
used by serve_pool.c): while one process alone sends request after
request, the worker that answers it moves to the CPU the process runs on
and sleeps there between requests, so no request wakes another CPU: a
scanner free to move is followed to the CPU it last ran on, one bound to
a CPU to that CPU, and its reads too (a small file's open, read and close
is one READ: issue 38); once the scan is over, no worker stays on the
scanner's CPU."""

import os
from pathlib import Path

import pytest

from conftest import USER1, blocking_jobs, wait_until

pytestmark = pytest.mark.host_release_only("the reader's worker placement: squash-reader's own, "
                                           "the same on every Slurm and libfuse release")

# Each phase of the job's scanner: statvfs of the mount over and over from
# one process (each a STATFS request: the kernel caches none), first free
# to run on CPUs 0 and 1, then bound to CPU 1, with a file saying which
# phase runs; then it holds the mount until the test has looked.
SCANNER = """
import os, sys, time
mnt, marks = sys.argv[1], sys.argv[2]
os.sched_setaffinity(0, {0, 1})
def scan(phase, seconds):
    open(f"{marks}/{phase}", "w").close()
    n, end = 0, time.monotonic() + seconds
    while time.monotonic() < end:
        os.statvfs(mnt)
        n += 1
    print(phase, n, flush=True)
scan("free", 3)
os.sched_setaffinity(0, {1})
scan("bound", 4)
open(f"{marks}/done", "w").close()
# Then, once the test has seen the workers home, reads alone, bound: the
# file read again and again, its pages dropped after each (a READ each).
end = time.monotonic() + 60
while not os.path.exists(f"{marks}/read") and time.monotonic() < end:
    time.sleep(0.1)
n, end = 0, time.monotonic() + 4
while time.monotonic() < end:
    fd = os.open(f"{mnt}/f.txt", os.O_RDONLY)
    os.read(fd, 4096)
    os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    os.close(fd)
    n += 1
print("reads", n, flush=True)
open(f"{marks}/read-done", "w").close()
end = time.monotonic() + 60
while not os.path.exists(f"{marks}/end") and time.monotonic() < end:
    time.sleep(0.1)
"""


def cpus_of_threads(pid):
    """{tid: Cpus_allowed_list} of a process's threads."""
    out = {}
    for t in Path(f"/proc/{pid}/task").iterdir():
        try:
            for line in (t / "status").read_text().splitlines():
                if line.startswith("Cpus_allowed_list:"):
                    out[t.name] = line.split()[1]
        except FileNotFoundError:
            pass  # a worker that ended meanwhile
    return out


def watch(pid, seconds):
    """Every Cpus_allowed_list the reader's threads had in seconds."""
    seen = set()
    end = os.times().elapsed + seconds
    while os.times().elapsed < end:
        seen |= set(cpus_of_threads(pid).values())
    return seen


@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2 or 1 not in os.sched_getaffinity(0),
                    reason="needs CPUs 0 and 1")
def test_a_scanner_is_answered_on_its_cpu_free_or_bound(cluster):
    d = cluster.workdir(USER1, "bound")
    img = cluster.make_image(d / "bound.sqfs", {"f.txt": "bound\n"}, owner=USER1)
    marks = cluster.workdir(USER1, "bound-marks")
    script = d / "scanner.py"
    script.write_text(SCANNER)
    with blocking_jobs(cluster, (USER1, f"{img}:/squash/s",
                                 f"python3 {script} /squash/s {marks}")) as jobs:
        (m,) = [m for m in cluster.list_mounts() if m["image"] == str(img)]
        reader = m["server_pid"]
        # Where the pool's workers run: the reader's own CPUs. Requests of
        # the job's start (its processes are bound to one CPU on this
        # cluster, cluster.sh's slurmd_launcher) may be followed a moment.
        full = cpus_of_threads(reader)[str(reader)]
        wait_until(lambda: set(cpus_of_threads(reader).values()) == {full}, 10,
                   what="the reader's workers to be where it runs")
        jobs[0].go.touch()
        wait_until(lambda: (marks / "free").exists(), 60, what="the free scan to start")
        free = watch(reader, 2.0)
        wait_until(lambda: (marks / "bound").exists(), 30, what="the bound scan to start")
        bound = watch(reader, 3.0)
        wait_until(lambda: (marks / "done").exists(), 30, what="the bound scan to end")
        # After the scan, every worker is back where the pool's workers run.
        wait_until(lambda: set(cpus_of_threads(reader).values()) == {full}, 10,
                   what="the reader's workers to leave CPU 1")
        (marks / "read").touch()
        reads = watch(reader, 3.0)
        wait_until(lambda: (marks / "read-done").exists(), 30, what="the bound reads to end")
        wait_until(lambda: set(cpus_of_threads(reader).values()) == {full}, 10,
                   what="the reader's workers to leave CPU 1 after the reads")
        (marks / "end").touch()
        jobs[0].job.wait()
    out = jobs[0].job.output()
    assert "free " in out and "bound " in out and "reads " in out, out
    # A scanner that may run anywhere is followed to one CPU of its two
    # (where the scheduler put it); bound to CPU 1, to CPU 1; and so is a
    # process that only reads.
    assert free & {"0", "1"}, free
    assert "1" in bound, bound
    assert "1" in reads, reads
