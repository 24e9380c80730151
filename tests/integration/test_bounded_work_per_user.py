"""No user makes squashd work without bound (issue 30, item 5): a reader's
stderr flooded, a request frame of absurd counts, more requests for one
user than max_requests_per_user. Each test measures squashd itself (CPU
time, memory, requests in progress) and checks another user is served."""

import os
import re
import subprocess
import time

import pytest

from conftest import USER1, USER2, blocking_jobs, run, wait_until

pytestmark = pytest.mark.host_release_only("squashd's own per-user bounds: the same on every release")

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


def vm_hwm_kib(pid):
    return int(re.search(r"^VmHWM:\s+(\d+) kB", open(f"/proc/{pid}/status").read(), re.M).group(1))


def test_a_frame_of_96000_empty_images_is_refused_before_it_is_unpacked(cluster):
    """One 192 KiB frame holds 96,000 empty image entries (2 bytes each):
    squashd counts them on the wire and refuses the request before
    protobuf-c allocates a structure per entry, so its peak memory does not
    grow by megabytes; a user's request with such a frame is answered at
    once and squashd goes on serving."""
    squashd = cluster.squashd_pid()
    cluster.rawclient("list", user=USER1)  # a worker's arena, as any request makes
    before = vm_hwm_kib(squashd)
    for _ in range(3):
        p = cluster.rawclient("emptyimages", "96000", user=USER1, timeout=30)
        assert p.stdout.strip() == "bad-request: too many images (more than 1024)", (p.stdout, p.stderr)
    grown = vm_hwm_kib(squashd) - before
    print(f"squashd peak RSS grew by {grown} KiB for 3 frames of 96,000 empty images")
    assert grown < 2048, grown
    assert cluster.squashd_pid() == squashd
    assert cluster.rawclient("list", user=USER2).stdout.startswith("ok")


def in_progress(cluster):
    """Requests in progress, the status request asking included."""
    m = re.search(r"(\d+) in progress", cluster.squashctl("status").stdout)
    return int(m.group(1))


def test_one_users_requests_hold_at_most_max_requests_per_user_workers(cluster):
    """Five jobs of one user whose images sit on a hung file system: with
    max_requests_per_user = 2 squashd works on two of their prologs at a
    time (the others wait for a slot, up to their deadline), never five,
    and another user's job runs meanwhile."""
    from test_faults import HungFilesystem
    node = cluster.nodes[0]
    conf = cluster.dir / "squashd.conf"
    saved = conf.read_text()
    conf.write_text(saved + "max_requests_per_user = 2\n")
    node.squashd_stop()
    node.squashd_start()
    idle = in_progress(cluster)
    hung = HungFilesystem(cluster, USER1, [f"c{i}.sqfs" for i in range(5)])
    jobs = []
    try:
        assert re.search(r"^  max_requests_per_user = 2$", cluster.squashctl("status").stdout, re.M)
        d = cluster.workdir(USER1, "capped")
        for i in range(5):
            j = cluster.sbatch(USER1, cluster.write_script(d, f"cat /squash/c{i}/hello.txt\n", f"c{i}.sh"),
                               ["-H", f"--squash-image={hung.path(f'c{i}.sqfs')}"], cwd=d)
            assert not isinstance(j, subprocess.CompletedProcess), j.stderr
            jobs.append(j)
        hung.hang()
        run(["scontrol", "release", ",".join(str(j.id) for j in jobs)], env=cluster.env)
        wait_until(lambda: in_progress(cluster) > idle, 20, 0.1, "squashd to be busy with the hung images")
        seen = []
        t = time.monotonic()
        while time.monotonic() - t < 4:
            seen.append(in_progress(cluster) - idle)
            time.sleep(0.2)
        assert max(seen) == 2, seen
        other = image_of(cluster, USER2, "fine.sqfs")
        t = time.monotonic()
        job = cluster.run_job(USER2, "cat /squash/fine/hello.txt\n", [f"--squash-image={other}"])
        assert job.state == "COMPLETED", job.output()
        assert job.output() == FILES["hello.txt"]
        print(f"in progress while 5 prologs of one user hang: {sorted(set(seen))}; "
              f"another user's job: {time.monotonic() - t:.1f} s")
    finally:
        hung.close()
        for j in jobs:
            j.wait()
        conf.write_text(saved)
        node.squashd_stop()
        node.squashd_start()
