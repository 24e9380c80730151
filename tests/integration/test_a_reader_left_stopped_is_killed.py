"""squashd kills a user's FUSE server left stopped (core/stopped_readers.c,
`stopped_reader_timeout`): its node-level mounts are allow_other mounts in
the host's mount namespace, where root's own requests (a df of every mount,
the node's health check) would otherwise wait on it for as long as the user
pleases, and the health check's timeout would drain the node. USER1 stops
the reader serving their running job's image; root's statfs of that mount,
asked meanwhile, is answered within seconds by the reader that takes the
connection over, the journal names the kill, and the job still reads its
file. A reader with only one thread stopped (a tracer stops one thread at
a time; the process runs on, while the requests that thread took wait) is
killed the same way."""

import os
import signal
import time

import pytest

from conftest import BlockingJob, USER1, proc_uids, resume, thread_state, threads_stopped, uid_of, wait_until
from test_writable_overlay import squashd_with

pytestmark = pytest.mark.host_release_only("squashd's watch of its readers: the same on every release")

FILES = {"hello.txt": "hello from the image\n"}
TIMEOUT = 3


def test_a_stopped_reader_is_killed_and_roots_statfs_answered(cluster):
    img = cluster.make_image(cluster.workdir(USER1, "stoppedreader") / "stopped.sqfs", FILES, owner=USER1)
    stopped = []
    with squashd_with(cluster, f"stopped_reader_timeout = {TIMEOUT}\n"):
        job = BlockingJob(cluster, USER1, img, after="cat /squash/stopped/hello.txt")
        try:
            job.wait_ready()
            (mount,) = [m for m in cluster.list_mounts() if m["image"] == str(img)]
            reader = mount["server_pid"]
            assert proc_uids(reader)[0] == uid_of(USER1)
            offset = len(cluster.squashd_log())
            os.kill(reader, signal.SIGSTOP)
            stopped.append(reader)
            t = time.monotonic()
            # As df asks every mount, from the node's mount namespace.
            p = cluster.nodes[0].run(["timeout", "-s", "KILL", "30", "stat", "-f", "-c", "%T",
                                      mount["mount_point"]], check=False, timeout=60)
            took = time.monotonic() - t
            print(f"root's statfs over a stopped reader answered after {took:.1f} s")
            assert p.returncode == 0 and "fuse" in p.stdout, p.stdout + p.stderr
            assert TIMEOUT - 1 < took < TIMEOUT + 8, took
            log = cluster.squashd_log()[offset:]
            assert f"FUSE server pid {reader} of uid {uid_of(USER1)} was stopped for {TIMEOUT} s" in log, log
            wait_until(lambda: not os.path.exists(f"/proc/{reader}"), 10, what="the stopped reader to go")
            (after,) = [m for m in cluster.list_mounts() if m["image"] == str(img)]
            assert after["server_pid"] not in (0, reader), after
        finally:
            resume(stopped)
            job.release()
        assert job.job.state == "COMPLETED", job.job.output()
        assert job.job.output() == FILES["hello.txt"], job.job.output()


def test_a_reader_with_one_thread_stopped_is_killed(cluster):
    img = cluster.make_image(cluster.workdir(USER1, "stoppedthread") / "thread.sqfs", FILES, owner=USER1)
    with squashd_with(cluster, f"stopped_reader_timeout = {TIMEOUT}\n"):
        job = BlockingJob(cluster, USER1, img, after="cat /squash/thread/hello.txt")
        try:
            job.wait_ready()
            (mount,) = [m for m in cluster.list_mounts() if m["image"] == str(img)]
            reader = mount["server_pid"]
            tids = sorted(int(t) for t in os.listdir(f"/proc/{reader}/task") if int(t) != reader)
            assert tids, f"squash-reader {reader} has no thread but its main one"
            offset = len(cluster.squashd_log())
            with threads_stopped(tids[:1]):
                assert thread_state(reader, tids[0]) == "t", thread_state(reader, tids[0])
                assert thread_state(reader, reader) != "t"
                wait_until(lambda: f"FUSE server pid {reader} of uid {uid_of(USER1)} was stopped for "
                           f"{TIMEOUT} s" in cluster.squashd_log()[offset:], TIMEOUT + 8,
                           what="squashd to kill the reader with a stopped thread")
            wait_until(lambda: not os.path.exists(f"/proc/{reader}"), 10, what="the reader to go")
            (after,) = [m for m in cluster.list_mounts() if m["image"] == str(img)]
            assert after["server_pid"] not in (0, reader), after
        finally:
            job.release()
        assert job.job.state == "COMPLETED", job.job.output()
        assert job.job.output() == FILES["hello.txt"], job.job.output()
