"""squashd logs while it holds locks every request takes, so a log that
stops taking lines must cost lines, never requests (daemon/util/log.c,
util/journal_send.c). journald reads its one socket for every process of
the node: anyone can keep it busy, and a blocking write there (what
sd_journal_sendv does) held squashd's threads, and the registry lock with
them, for as long. Here squashd's stderr is a pipe that nobody reads (the
same for a stream to journald, or a terminal that stopped): requests are
still answered and jobs still mount, the lines that did not fit are
dropped, and the first line that fits again says how many."""

import os
import re
import subprocess
import time

import pytest

from conftest import SQUASHD, USER1, wait_until

pytestmark = pytest.mark.host_release_only("squashd's own logging, the same on every Slurm release")


def drain(fd):
    """What the pipe holds now."""
    out = b""
    while True:
        try:
            chunk = os.read(fd, 65536)
        except BlockingIOError:
            return out.decode(errors="replace")
        if not chunk:
            return out.decode(errors="replace")
        out += chunk


def test_requests_are_answered_while_squashds_log_is_not_read(cluster):
    c = cluster
    if c.multinode:
        pytest.skip("starts squashd itself: one-node layout only")
    old = c.squashd_pid()
    c.cluster_sh("squashd-stop")
    wait_until(lambda: not os.path.exists(f"/proc/{old}"), 10, what="squashd to exit")
    img = c.make_image(c.workdir(USER1, "quietlog") / "quiet.sqfs", {"f.txt": "still mounted\n"},
                       owner=USER1)
    r, w = os.pipe()
    proc = subprocess.Popen([SQUASHD, "--config", c.dir / "squashd.conf", "--debug"],
                            stdin=subprocess.DEVNULL, stdout=w, stderr=w, start_new_session=True,
                            env=dict(c.env, SQUASH_TEST_CLUSTER=str(c.dir)))
    os.close(w)
    os.set_blocking(r, False)
    try:
        wait_until(lambda: c.squashctl("status", check=False).returncode == 0, 20, 0.1,
                   "squashd to answer")
        # Root's malformed requests each log a line (root has no log
        # budget): far more than the pipe holds.
        p = c.rawclient("garbage", "3000", timeout=120)
        assert p.stdout.count("bad-request") == 3000, (p.returncode, p.stdout[-300:], p.stderr[-300:])
        t0 = time.monotonic()
        status = c.squashctl("status", check=False)
        took = time.monotonic() - t0
        assert status.returncode == 0 and took < 5, (took, status.stdout, status.stderr)
        job = c.run_job(USER1, "cat /squash/quiet/f.txt\n", [f"--squash-image={img}"])
        assert job.state == "COMPLETED" and job.output() == "still mounted\n", job.output()

        # Read again: lines flow, and the first says how many were lost.
        kept = [drain(r)]
        assert len(kept[0]) > 32768, len(kept[0])
        c.squashctl("status")

        said = r"warning: (\d+) log lines were dropped: the log \(squashd's stderr\) did not take them at once"

        def dropped():
            kept.append(drain(r))
            return sum(int(n) for n in re.findall(said, "".join(kept)))
        # Counts are said as lines fit again, the rest with the first line
        # after the drain. (That every dropped line is counted, exactly, is
        # unit test_log_drops.)
        deadline = time.monotonic() + 10
        while not dropped() and time.monotonic() < deadline:
            time.sleep(0.1)
        text = "".join(kept)
        assert dropped() > 0, (len(text), text[-2000:])
        print(f"\n{len(text)} bytes of log came through; {dropped()} lines were counted as dropped")
    finally:
        proc.terminate()
        try:
            deadline = time.monotonic() + 30
            while proc.poll() is None and time.monotonic() < deadline:
                drain(r)
                time.sleep(0.05)
        finally:
            if proc.poll() is None:
                proc.kill()
            proc.wait()
            os.close(r)
            c.cluster_sh("squashd-start")
