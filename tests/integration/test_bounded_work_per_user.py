"""No user makes squashd work without bound (issue 30, item 5): a reader's
stderr flooded, a request frame of absurd counts, more requests for one
user than max_requests_per_user. Each test measures squashd itself (CPU
time, memory, requests in progress) and checks another user is served."""

import os
import re
import time

from conftest import USER1, USER2, blocking_jobs, run, wait_until

FILES = {"hello.txt": "hello from the image\n"}


def image_of(cluster, user, name):
    return cluster.make_image(cluster.workdir(user, "img") / name, FILES, owner=user)


def cpu_seconds(pid):
    """utime + stime of pid (all its threads) in seconds."""
    stat = open(f"/proc/{pid}/stat").read()
    fields = stat[stat.rindex(")") + 2:].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def test_a_reader_flooding_its_stderr_costs_squashd_under_a_second_of_cpu(cluster):
    """/dev/zero written into a reader's stderr (a pipe squashd reads) for
    10 s, as its user can make it do by ptracing it (written here by the
    test as root, through /proc/PID/fd/2): squashd reads it at a bounded rate, so its CPU
    time grows by less than a second, and the reader still serves."""
    img = image_of(cluster, USER1, "flood.sqfs")
    with blocking_jobs(cluster, (USER1, img, "cat /squash/flood/hello.txt\n")) as (blk,):
        server = cluster.shared_mount(img, [blk])["server_pid"]
        squashd = cluster.squashd_pid()
        before = cpu_seconds(squashd)
        t = time.monotonic()
        p = run(["timeout", "10", "sh", "-c", f"cat /dev/zero > /proc/{server}/fd/2"], check=False,
                timeout=30)
        assert time.monotonic() - t >= 9.5, (p.returncode, p.stderr)
        assert p.returncode == 124, (p.returncode, p.stderr)  # killed by timeout, not refused
        used = cpu_seconds(squashd) - before
        print(f"squashd CPU time during 10 s of /dev/zero into the reader's stderr: {used:.2f} s")
        assert used < 1.0, used
        assert os.path.exists(f"/proc/{server}")
        blk.release()
        assert blk.job.state == "COMPLETED", blk.job.output()
        assert blk.job.output() == FILES["hello.txt"]
