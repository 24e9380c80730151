"""One squash-reader per user and node (daemon/mount/reader_pool.c): all
FUSE mounts of one user's images are served by one reader process running
as that user, another user's by another; the reader goes when the last of
its mounts goes; killed, it is replaced by one reader for all its mounts,
and the job reading them sees a pause; an image the reader cannot read
fails its job and leaves no reader behind; the reader's threads do not
grow with its mounts (daemon/reader/serve_pool.c); squashd.conf's
reader_poll_us reaches the readers it starts."""

import hashlib
import os
import re
import signal
import struct
import subprocess
import time

import pytest

from conftest import (USER1, USER2, BlockingJob, blocking_jobs, proc_uids, run, send_hup_and_wait,
                      uid_of, wait_until)
from test_reader_killed_under_a_running_job import (KERNEL_RESENDS, assert_job_read_through,
                                                   data_image, start_reading_job)


def user_image(cluster, user, name, text):
    d = cluster.workdir(user, "img")
    return cluster.make_image(d / f"{name}.sqfs", {"f.txt": text}, owner=user)


def mounts_of(cluster, *images):
    by_image = {m["image"]: m for m in cluster.list_mounts()}
    return [by_image[str(i)] for i in images]


def readers_on_node(cluster):
    return cluster.nodes[0].fuse_servers()


def test_one_reader_serves_all_of_a_users_mounts(cluster):
    a = user_image(cluster, USER1, "pool_a", "first of user 1\n")
    b = user_image(cluster, USER1, "pool_b", "second of user 1\n")
    c = user_image(cluster, USER2, "pool_c", "only one of user 2\n")
    read = "cat /squash/a/f.txt /squash/b/f.txt 2>&1"
    with blocking_jobs(cluster, (USER1, f"{a}:/squash/a,{b}:/squash/b", read),
                       (USER2, f"{c}:/squash/c", "cat /squash/c/f.txt 2>&1")) as jobs:
        ma, mb, mc = mounts_of(cluster, a, b, c)
        assert ma["server_pid"] == mb["server_pid"], (ma, mb)
        assert mc["server_pid"] != ma["server_pid"], (ma, mc)
        assert sorted(readers_on_node(cluster)) == sorted({ma["server_pid"], mc["server_pid"]})
        # Each reader runs as its user, never as root.
        assert set(proc_uids(ma["server_pid"])) == {uid_of(USER1)}
        assert set(proc_uids(mc["server_pid"])) == {uid_of(USER2)}
        assert ma["reader"].startswith("squash-reader "), ma
        status = cluster.squashctl("status").stdout
        assert re.search(r"^fuse servers: 2$", status, re.M), status
    for j in jobs:
        j.job.wait()
    out1, out2 = jobs[0].job.output(), jobs[1].job.output()
    assert "first of user 1" in out1 and "second of user 1" in out1, out1
    assert "only one of user 2" in out2, out2
    # The readers go with the last of their mounts.
    wait_until(lambda: not readers_on_node(cluster), 20, what="the readers to exit")


def test_a_users_second_job_joins_the_running_reader_and_it_outlives_the_first(cluster):
    a = user_image(cluster, USER1, "join_a", "job one\n")
    b = user_image(cluster, USER1, "join_b", "job two\n")
    with blocking_jobs(cluster, (USER1, f"{a}:/squash/a", "")) as first:
        pid = mounts_of(cluster, a)[0]["server_pid"]
        with blocking_jobs(cluster, (USER1, f"{b}:/squash/b", "cat /squash/b/f.txt")) as second:
            assert mounts_of(cluster, b)[0]["server_pid"] == pid
            first[0].release()
            wait_until(lambda: str(a) not in {m["image"] for m in cluster.list_mounts()}, 20,
                       what="the first job's mount to go")
            # Still serving the second job's mount, in the same process.
            assert readers_on_node(cluster) == [pid]
            assert mounts_of(cluster, b)[0]["server_pid"] == pid
        second[0].job.wait()
        assert "job two" in second[0].job.output(), second[0].job.output()
    wait_until(lambda: not readers_on_node(cluster), 20, what="the reader to exit")


def damaged_id_table_image(cluster):
    """A squashfs image whose superblock passes squashd's check but whose id
    table points outside the image: only the reader finds out."""
    img = user_image(cluster, USER1, "bad_ids", "never read\n")
    data = bytearray(img.read_bytes())
    id_table_start = struct.unpack_from("<Q", data, 48)[0]
    struct.pack_into("<Q", data, id_table_start, len(data) * 4)
    img.write_bytes(bytes(data))
    return img


@pytest.mark.host_release_only("squashd's own reader bookkeeping: the same on every release")
def test_an_image_the_reader_cannot_read_fails_its_job_and_leaves_no_reader(cluster):
    img = damaged_id_table_image(cluster)
    job = cluster.run_job(USER1, "echo should not run\n", [f"--squash-image={img}:/squash/d"])
    out = job.output()
    assert job.state != "COMPLETED" and "should not run" not in out, out
    assert "cannot read the id table" in out, out
    assert "drain" not in cluster.node_state(), cluster.node_state()
    wait_until(lambda: not readers_on_node(cluster), 10, what="the unused reader to go")


@pytest.mark.host_release_only("squashd's own reader bookkeeping: the same on every release")
@pytest.mark.skipif(not KERNEL_RESENDS, reason="the kernel predates FUSE_NOTIFY_RESEND")
def test_killed_shared_reader_is_replaced_by_one_for_all_its_mounts(cluster):
    img, want = data_image(cluster, "shared_kill")
    other = user_image(cluster, USER1, "shared_kill_other", "the other mount\n")
    with blocking_jobs(cluster, (USER1, f"{other}:/squash/o", "cat /squash/o/f.txt")) as held:
        job, stop = start_reading_job(cluster, img, want)
        try:
            m_img, m_other = mounts_of(cluster, img, other)
            old = m_img["server_pid"]
            assert m_other["server_pid"] == old
            offset = len(cluster.squashd_log())
            os.kill(old, signal.SIGKILL)
            # One line for both: a reader's death is one line, not one per mount.
            wait_until(lambda: "its 2 mount(s) restarted as pid" in cluster.squashd_log()[offset:], 10,
                       what="squashd to restart both mounts' reader")
            m_img, m_other = mounts_of(cluster, img, other)
            assert m_img["server_pid"] == m_other["server_pid"] != old, (m_img, m_other)
            assert m_img["state"] == m_other["state"] == "ready"
            assert readers_on_node(cluster) == [m_img["server_pid"]]
            time.sleep(1.0)  # the job reads through the new reader meanwhile
        finally:
            stop.touch()
        assert_job_read_through(cluster, job)
    held[0].job.wait()
    assert "the other mount" in held[0].job.output(), held[0].job.output()


@pytest.mark.host_release_only("squashd's own restart and adoption: the same on every release")
def test_after_a_squashd_restart_the_old_reader_serves_its_mounts_until_they_go(cluster):
    a = user_image(cluster, USER1, "restart_a", "mounted before the restart\n")
    b = user_image(cluster, USER1, "restart_b", "mounted after the restart\n")
    with blocking_jobs(cluster, (USER1, f"{a}:/squash/a", "cat /squash/a/f.txt")) as first:
        old = mounts_of(cluster, a)[0]["server_pid"]
        old_squashd = cluster.squashd_pid()
        cluster.cluster_sh("squashd-stop")
        wait_until(lambda: not os.path.exists(f"/proc/{old_squashd}"), 10, what="squashd to exit")
        cluster.cluster_sh("squashd-start")
        wait_until(lambda: str(a) in {m["image"] for m in cluster.list_mounts()}, 10,
                   what="the mount to be adopted")
        assert mounts_of(cluster, a)[0]["server_pid"] == old
        # The old reader's socket went with the old squashd: a new mount
        # gets a new reader, and the old one keeps serving its own.
        with blocking_jobs(cluster, (USER1, f"{b}:/squash/b", "cat /squash/b/f.txt")) as second:
            new = mounts_of(cluster, b)[0]["server_pid"]
            assert new != old
            assert sorted(readers_on_node(cluster)) == sorted([old, new])
            first[0].release()
            wait_until(lambda: not os.path.exists(f"/proc/{old}"), 20,
                       what="the adopted reader to exit with its last mount")
            assert readers_on_node(cluster) == [new]
        second[0].job.wait()
        assert "mounted after the restart" in second[0].job.output()
    assert "mounted before the restart" in first[0].job.output(), first[0].job.output()
    wait_until(lambda: not readers_on_node(cluster), 20, what="the new reader to exit")


def threads_of(pid):
    return len(os.listdir(f"/proc/{pid}/task"))


def pool_bound(pid):
    """The most threads a --serve reader has (daemon/reader/serve.c): its
    main thread, the idle sweep's (idle_trim.h) and at most twice its
    CPUs' workers, within 8..64."""
    return 2 + min(64, max(8, 2 * len(os.sched_getaffinity(pid))))


def numbered_images(d, n, owner):
    """n images i0.sqfs .. i{n-1}.sqfs in d, each with f.txt = 'image I',
    packed two at a time (mksquashfs takes about 20 ms for one)."""
    procs = []
    for i in range(n):
        src = d / f"src{i}"
        src.mkdir(mode=0o755)
        (src / "f.txt").write_text(f"image {i}\n")
        (src / "f.txt").chmod(0o644)
        procs.append(subprocess.Popen(["mksquashfs", src, d / f"i{i}.sqfs", "-noappend", "-quiet",
                                       "-no-progress", "-all-root"], stdout=subprocess.DEVNULL))
        if len(procs) >= 2:
            assert procs.pop(0).wait() == 0
    assert all(p.wait() == 0 for p in procs)
    run(["chown", "-R", owner, d])


@pytest.mark.host_release_only("the reader's own threads: the same on every release")
def test_a_readers_threads_do_not_grow_with_its_mounts(cluster):
    """200 mounts of one user are served by one reader with 3 threads at
    rest (its main thread and two idle workers), not 3 per mount as when
    each mount had threads of its own (601); while a job reads all 200 at
    once its threads stay within the reader's own bound."""
    n = 200
    d = cluster.workdir(USER1, "threads")
    numbered_images(d, n, USER1)
    spec = ",".join(f"{d}/i{i}.sqfs:/squash/i{i}" for i in range(n))
    read_all = (f"seq 0 {n - 1} | xargs -P 32 -I@ cat /squash/i@/f.txt > {d}/read.out 2>&1\n"
                f"sort -V {d}/read.out | md5sum\ntouch {d}/read.done")
    blk = BlockingJob(cluster, USER1, spec, after=read_all)
    try:
        blk.wait_ready()
        pids = {m["server_pid"] for m in cluster.list_mounts()}
        assert len(pids) == 1 and len(cluster.list_mounts()) == n, pids
        pid = pids.pop()
        # The workers the mounts' start took end after 2 s without work,
        # all but the idle ones (with the main thread and the sweep's).
        wait_until(lambda: threads_of(pid) <= 4, 10, what="the reader to be at rest")
        time.sleep(0.5)
        assert threads_of(pid) in (3, 4), threads_of(pid)
        bound, seen = pool_bound(pid), []
        blk.go.touch()
        # Sampled until the job has read everything (the reader goes
        # with the job's end).
        deadline = time.monotonic() + 60
        while not (d / "read.done").exists() and time.monotonic() < deadline:
            seen.append(threads_of(pid))
            time.sleep(0.01)
        assert max(seen) <= bound, (seen, bound)
    finally:
        blk.go.touch()
    blk.job.wait()
    got = (d / "read.out").read_text()
    assert sorted(got.splitlines()) == sorted(f"image {i}" for i in range(n)), got[:2000]
    want = hashlib.md5("".join(f"image {i}\n" for i in range(n)).encode()).hexdigest()
    assert want in blk.job.output(), blk.job.output()
    wait_until(lambda: not readers_on_node(cluster), 20, what="the reader to exit")


def reader_argv(pid):
    with open(f"/proc/{pid}/cmdline", "rb") as f:
        return f.read().decode().split("\0")[:-1]


def job_reader_polls(cluster, user, image, text, poll_us):
    """A job of user reads image; its reader got --poll-us poll_us."""
    with blocking_jobs(cluster, (user, f"{image}:/squash/p", "cat /squash/p/f.txt")) as jobs:
        (m,) = mounts_of(cluster, image)
        argv = reader_argv(m["server_pid"])
        assert argv[argv.index("--poll-us") + 1] == poll_us, argv
    jobs[0].job.wait()
    assert text in jobs[0].job.output(), jobs[0].job.output()


@pytest.mark.host_release_only("squashd's own settings: the same on every release")
def test_reader_poll_us_reaches_the_readers_started_after_it(cluster):
    """squashd hands reader_poll_us (default 200) to every reader it starts
    as --poll-us; after a reload, readers started from then on get the new
    value, and a job served by one that never polls reads as before."""
    a = user_image(cluster, USER1, "poll_a", "polled by user 1\n")
    b = user_image(cluster, USER2, "poll_b", "not polled for user 2\n")
    job_reader_polls(cluster, USER1, a, "polled by user 1", "200")
    conf = cluster.dir / "squashd.conf"
    original = conf.read_text()
    try:
        conf.write_text(original + "reader_poll_us = 0\n")
        send_hup_and_wait(cluster, "reload: reader_poll_us is now '0'")
        job_reader_polls(cluster, USER2, b, "not polled for user 2", "0")
    finally:
        conf.write_text(original)
        send_hup_and_wait(cluster, "setting(s) applied")
