"""A user's FUSE server is the user's: it runs in a cgroup of its own with
the admin's limits, without squashd's OOM protection, and writes to a pipe
squashd logs from, marked and rate-limited; one that is stopped delays only
its own user's mounts (daemon/process/server_spawn.c, reader_cgroup.c,
server_output.c; docs/security.md). The prefetches a user's kernel mounts
start are bounded per user and unprotected too (core/kernel_prefetches.c).

squashd runs here with a test reader (squash_reader = a root-owned script
that does what tests/ctl/<uid> says, then execs the real squash-reader)."""

import json
import os
import re
import subprocess
import time
from pathlib import Path

import pytest

from conftest import RAWCLIENT, USER1, USER2, pids_named, uid_of, wait_until

pytestmark = pytest.mark.host_release_only("squashd's cgroups and pipes for readers: the same on every release")

FILES = {"hello.txt": "hello from the image\n"}
FAKE_JOB = 990201
TASKS_MAX = 40
MEMORY_MAX = 64 << 20
CPU_WEIGHT = 50
REQUEST_TIMEOUT = 4

WRAPPER = """#!/bin/sh
# A test reader: what tests/ctl/<uid> says, then the real squash-reader.
ctl={ctl}
# A kernel mount's prefetch (as nobody) that takes its time, as over a slow file system.
if [ "$1" = --prefetch ] && [ -e "$ctl/prefetch-sleeps" ]; then
	exec sleep 117
fi
mode=$(cat "$ctl/$(id -u)" 2>/dev/null)
case "$mode" in
stop)
	echo "test reader stops itself" >&2
	kill -STOP $$ ;;
forks)
	# perl: a failed fork is an answer there, not the end of the shell.
	perl -e '$n = 0; for (1..{forks}) {{ $p = fork(); last unless defined $p;
		if (!$p) {{ sleep 300; exit 0 }} push @k, $p; $n++ }}
		print "$n\n"; kill "KILL", @k; 1 while wait() > 0;' > "$ctl/forked-$(id -u)" ;;
chatty)
	for i in $(seq 1 200); do echo "chatty line $i"; done ;;
hungry)
	# Once: the reader squashd starts again on the same connections serves.
	if [ ! -e "$ctl/hungry-$(id -u)" ]; then
		touch "$ctl/hungry-$(id -u)"
		# Children that together outgrow reader_memory_max once the test has
		# seen the reader serve (it makes hungry-go-<uid>), each well below it,
		# and the reader first in line for the OOM killer (a user may raise
		# their own score): the kernel picks the reader (score: the limit and
		# its size) over any one child.
		for i in 1 2 3; do perl -e 'for (1..600) {{ last if -e $ARGV[0]; select(undef, undef, undef, 0.1) }}
			$x = "x" x {hungry}; sleep 60' "$ctl/hungry-go-$(id -u)" & done
		echo 1000 > /proc/self/oom_score_adj
	fi ;;
esac
exec {reader} "$@"
"""


@pytest.fixture(scope="module")
def contained(cluster):
    """The cluster's squashd with the test reader, a low tasks limit, a
    short request timeout and no periodic gc; the original settings again
    afterwards."""
    node = cluster.nodes[0]
    conf = cluster.dir / "squashd.conf"
    saved = conf.read_text()
    real = re.search(r"^squash_reader = (.*)$", saved, re.M).group(1)
    ctl = cluster.dir / "ctl"
    ctl.mkdir(mode=0o777, exist_ok=True)
    ctl.chmod(0o777)
    wrapper = cluster.dir / "bin" / "test-reader"
    wrapper.parent.mkdir(mode=0o755, exist_ok=True)
    wrapper.write_text(WRAPPER.format(ctl=ctl, forks=3 * TASKS_MAX, hungry=MEMORY_MAX * 2 // 5, reader=real))
    wrapper.chmod(0o755)
    # The tests' jobs are unknown to slurmctld: a gc pass would release
    # them under the test.
    quiet = re.sub(r"^gc_interval = .*$", "gc_interval = 0", saved, flags=re.M)
    conf.write_text(re.sub(r"^squash_reader = .*$", f"squash_reader = {wrapper}", quiet,
                           flags=re.M)
                    .replace("request_timeout = 10\n", f"request_timeout = {REQUEST_TIMEOUT}\n")
                    + f"reader_tasks_max = {TASKS_MAX}\nreader_cpu_weight = {CPU_WEIGHT}\n"
                    + f"reader_memory_max = {MEMORY_MAX >> 20}M\n")
    node.squashd_stop()
    node.squashd_start()
    try:
        yield cluster, ctl
    finally:
        conf.write_text(saved)
        node.squashd_stop()
        node.squashd_start()


def reader_pids(uid):
    res = []
    for p in pids_named("squash-reader") + pids_named("test-reader"):
        try:
            if os.stat(f"/proc/{p}").st_uid == uid:
                res.append(p)
        except OSError:
            pass
    return res


def test_a_users_reader_runs_in_its_own_cgroup_without_squashds_protection(contained):
    cluster, ctl = contained
    img = cluster.make_image(cluster.workdir(USER1, "img") / "contained.sqfs", FILES, owner=USER1)
    uid = uid_of(USER1)
    (ctl / str(uid)).write_text("chatty\n")
    offset = len(cluster.squashd_log())
    try:
        p = cluster.rawclient("mount", FAKE_JOB, uid, f"{img}:/squash/contained")
        assert p.returncode == 0, p.stdout + p.stderr
        (pid,) = reader_pids(uid)
        cgroups = Path(f"/proc/{pid}/cgroup").read_text()
        assert re.search(rf"/squashd-readers\.[^/\n]+/uid-{uid}/reader-{pid}$", cgroups, re.M), cgroups
        # The user's readers weigh reader_cpu_weight against others for the CPU.
        cpu = re.search(r"^\d+:(?:[^:\n]*,)?cpu(?:,[^:\n]*)?:(.*)/reader-\d+$", cgroups, re.M)
        if cpu:  # cgroup v1: cpu.shares, 1024 for weight 100
            root = next(line.split()[4] for line in open("/proc/self/mountinfo")
                        if " - cgroup " in line and "cpu" in line.split()[-1].split(","))
            weight = Path(f"{root}{cpu.group(1)}/cpu.shares")
            assert weight.read_text() == f"{CPU_WEIGHT * 1024 // 100}\n"
        else:  # cgroup v2: cpu.weight of the user's cgroup
            user = Path("/sys/fs/cgroup" + re.search(r"^0::(.*)/reader-\d+$", cgroups, re.M).group(1))
            assert (user / "cpu.weight").read_text() == f"{CPU_WEIGHT}\n"
        assert Path(f"/proc/{pid}/oom_score_adj").read_text().strip() == "0"
        squashd = cluster.squashd_pid()
        # Its stdout and stderr: a pipe of its own, not squashd's log.
        for fd in (1, 2):
            mine = os.readlink(f"/proc/{pid}/fd/{fd}")
            assert mine.startswith("pipe:"), mine
            assert mine != os.readlink(f"/proc/{squashd}/fd/{fd}")
    finally:
        (ctl / str(uid)).unlink()
        cluster.rawclient("release", FAKE_JOB)
    # Its lines reach the log marked, no more than the burst; what was
    # held back is counted when the pipe closes (the reader exits).
    wait_until(lambda: "lines not logged" in cluster.squashd_log()[offset:], 15,
               what="squashd to log the reader's lines")
    log = cluster.squashd_log()[offset:]
    marked = re.findall(rf"test-reader pid \d+ \(uid {uid}\): chatty line \d+", log)
    assert 0 < len(marked) <= 21, log
    assert re.search(rf"test-reader pid \d+ \(uid {uid}\): 1\d\d lines not logged", log), log


def test_a_reader_that_forks_without_end_is_held_by_its_cgroup(contained):
    cluster, ctl = contained
    uid = uid_of(USER1)
    img = cluster.make_image(cluster.workdir(USER1, "img") / "forky.sqfs", FILES, owner=USER1)
    other = cluster.make_image(cluster.workdir(USER2, "img") / "other.sqfs", FILES, owner=USER2)
    (ctl / str(uid)).write_text("forks\n")
    try:
        cluster.rawclient("mount", FAKE_JOB + 1, uid, f"{img}:/squash/forky")
        forked = int((ctl / f"forked-{uid}").read_text())
        print(f"the reader of uid {uid} made {forked} of {3 * TASKS_MAX} processes "
              f"(reader_tasks_max {TASKS_MAX})")
        assert forked < TASKS_MAX, forked
        # squashd keeps serving everyone.
        job = cluster.run_job(USER2, "cat /squash/other/hello.txt\n",
                              [f"--squash-image={other}"])
        assert job.state == "COMPLETED", job.output()
        assert job.output() == FILES["hello.txt"]
    finally:
        (ctl / str(uid)).unlink()
        cluster.rawclient("release", FAKE_JOB + 1)


def user_budgets(cluster, uid):
    """uid's rows of `squashctl status --json`: {budget: (used, limit)}."""
    for r in json.loads(cluster.squashctl("status", "--json").stdout)["user_budgets"]:
        if r["uid"] == uid:
            return {k: (v["used"], v["limit"]) for k, v in r["budgets"].items()}
    return {}


def memory_limit_file(pid):
    """The memory limit file of the user's cgroup a reader runs below."""
    cgroups = Path(f"/proc/{pid}/cgroup").read_text()
    v1 = re.search(r"^\d+:(?:[^:\n]*,)?memory(?:,[^:\n]*)?:(.*)/reader-\d+$", cgroups, re.M)
    if v1:
        root = next(line.split()[4] for line in open("/proc/self/mountinfo")
                    if " - cgroup " in line and "memory" in line.split()[-1].split(","))
        return Path(f"{root}{v1.group(1)}/memory.limit_in_bytes")
    return Path("/sys/fs/cgroup" + re.search(r"^0::(.*)/reader-\d+$", cgroups, re.M).group(1)) / "memory.max"


def test_a_reader_past_reader_memory_max_is_killed_in_its_cgroup_named_and_replaced(contained):
    """USER1's reader (first in line for the OOM killer) and children of it
    that outgrow reader_memory_max together: the kernel kills in USER1's cgroup;
    squashd logs the death with that cause, counts it in status and starts
    a new reader on the same connection, so USER1's job reads the image."""
    cluster, ctl = contained
    uid = uid_of(USER1)
    img = cluster.make_image(cluster.workdir(USER1, "img") / "hungry.sqfs", FILES, owner=USER1)
    (ctl / str(uid)).write_text("hungry\n")
    # A release returns before its reader has exited.
    wait_until(lambda: not reader_pids(uid), 10, what="USER1's earlier readers to end")
    offset = len(cluster.squashd_log())
    try:
        p = cluster.rawclient("mount", FAKE_JOB + 3, uid, f"{img}:/squash/hungry")
        assert p.returncode == 0, p.stdout + p.stderr
        (first,) = reader_pids(uid)
        assert memory_limit_file(first).read_text() == f"{MEMORY_MAX}\n"
        # Only now the children grow: on a slow machine a timer could end the
        # reader before the mount's answer reached the test.
        (ctl / f"hungry-go-{uid}").write_text("")
        wait_until(lambda: "restarted as pid" in cluster.squashd_log()[offset:], 30,
                   what="the killed reader to be replaced")
        log = cluster.squashd_log()[offset:]
        assert re.search(rf"FUSE server pid {first} of uid {uid} was killed by signal 9 "
                         rf"\(the kernel's OOM killer has ended \d+ process\(es\) of uid {uid}'s FUSE servers "
                         rf"at reader_memory_max, {MEMORY_MAX} bytes\); its 1 mount\(s\) restarted as pid \d+",
                         log), log
        assert first not in reader_pids(uid)
        budgets = user_budgets(cluster, uid)
        assert budgets["reader OOM kills"][0] >= 1, budgets
        used, limit = budgets["reader memory"]
        assert limit == MEMORY_MAX and 0 < used < MEMORY_MAX, budgets
        # The mount lives on: the job shares it and reads through the new reader.
        job = cluster.run_job(USER1, "cat /squash/hungry/hello.txt\n", [f"--squash-image={img}"])
        assert job.state == "COMPLETED", job.output()
        assert job.output() == FILES["hello.txt"]
    finally:
        (ctl / str(uid)).unlink()
        (ctl / f"hungry-{uid}").unlink(missing_ok=True)
        (ctl / f"hungry-go-{uid}").unlink(missing_ok=True)
        cluster.rawclient("release", FAKE_JOB + 3)


def test_a_stopped_reader_delays_only_its_own_users_mounts(contained):
    """USER1's reader stops itself as it starts; USER1's mount waits for it
    (until request_timeout). Meanwhile USER2's job mounts and runs."""
    cluster, ctl = contained
    uid = uid_of(USER1)
    img = cluster.make_image(cluster.workdir(USER1, "img") / "stopped.sqfs", FILES, owner=USER1)
    other = cluster.make_image(cluster.workdir(USER2, "img") / "meanwhile.sqfs", FILES,
                               owner=USER2)
    (ctl / str(uid)).write_text("stop\n")
    stuck = subprocess.Popen([RAWCLIENT, "--socket", cluster.socket, "--munge-socket",
                              cluster.munge_socket, "mount", str(FAKE_JOB + 2), str(uid),
                              f"{img}:/squash/stopped"],
                             stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        wait_until(lambda: any(Path(f"/proc/{p}/stat").read_text().split(") ")[1][0] == "T"
                               for p in reader_pids(uid)), 10, what="USER1's reader to stop")
        t0 = time.monotonic()
        job = cluster.run_job(USER2, "cat /squash/meanwhile/hello.txt\n",
                              [f"--squash-image={other}"])
        took = time.monotonic() - t0
        still_waiting = stuck.poll() is None
        print(f"USER2's job took {took:.1f} s while USER1's reader was stopped")
        assert job.state == "COMPLETED", job.output()
        assert job.output() == FILES["hello.txt"]
        assert still_waiting, "USER1's mount did not wait for its stopped reader"
        out, _ = stuck.communicate(timeout=REQUEST_TIMEOUT + 30)
        assert "did not answer in time" in out, out
        # The stopped reader is killed, not left behind.
        wait_until(lambda: not reader_pids(uid), 10, what="the stopped reader to go")
    finally:
        if stuck.poll() is None:
            stuck.kill()
            stuck.wait()
        (ctl / str(uid)).unlink()
        cluster.rawclient("release", FAKE_JOB + 2)


def prefetch_sleepers():
    """The test reader's prefetches that sleep: pids of `sleep 117` as nobody."""
    res = []
    for p in pids_named("sleep"):
        try:
            if Path(f"/proc/{p}/cmdline").read_bytes() == b"sleep\x00117\x00":
                res.append(p)
        except OSError:
            pass
    return res


def test_a_users_kernel_mounts_start_at_most_their_share_of_prefetches(contained):
    """Each kernel mount of a trusted image starts squash-reader --prefetch,
    here a test reader that sleeps as a prefetch over a slow file system
    would. USER1's three kernel mounts start two (KERNEL_PREFETCHES_PER_USER),
    as nobody and without squashd's OOM protection, and status counts them;
    USER2's mount still starts one; once they end, USER1 gets a place again."""
    cluster, ctl = contained
    u1, u2 = uid_of(USER1), uid_of(USER2)
    imgs = [cluster.make_image(cluster.trusted / f"prefetch{i}.sqfs", {"n.txt": f"{i}\n"})
            for i in range(5)]
    (ctl / "prefetch-sleeps").write_text("")
    try:
        for i in range(3):
            # A job each: a prefetch ends with its mount (kernel_prefetches_stop).
            p = cluster.rawclient("mount", FAKE_JOB + 40 + i, u1, f"{imgs[i]}:/squash/prefetch{i}")
            assert p.returncode == 0, p.stdout + p.stderr
        assert {m["mode"] for m in cluster.list_mounts()} == {"kernel"}, cluster.list_mounts()
        wait_until(lambda: len(prefetch_sleepers()) == 2, 10, what="USER1's two prefetches")
        time.sleep(1)
        assert len(prefetch_sleepers()) == 2, "a third prefetch started for USER1"
        for pid in prefetch_sleepers():
            assert os.stat(f"/proc/{pid}").st_uid == 65534
            assert Path(f"/proc/{pid}/oom_score_adj").read_text().strip() == "0"
        assert user_budgets(cluster, u1)["kernel prefetches"] == (2, 2)

        p = cluster.rawclient("mount", FAKE_JOB + 5, u2, f"{imgs[3]}:/squash/prefetch3")
        assert p.returncode == 0, p.stdout + p.stderr
        wait_until(lambda: len(prefetch_sleepers()) == 3, 10, what="USER2's prefetch")
        assert user_budgets(cluster, u2)["kernel prefetches"] == (1, 2)

        for pid in prefetch_sleepers():
            os.kill(pid, 9)
        wait_until(lambda: "kernel prefetches" not in user_budgets(cluster, u1), 10,
                   what="the ended prefetches' places to be free")
        p = cluster.rawclient("mount", FAKE_JOB + 44, u1, f"{imgs[4]}:/squash/prefetch4")
        assert p.returncode == 0, p.stdout + p.stderr
        wait_until(lambda: len(prefetch_sleepers()) == 1, 10, what="USER1's new prefetch")
    finally:
        (ctl / "prefetch-sleeps").unlink(missing_ok=True)
        for pid in prefetch_sleepers():
            os.kill(pid, 9)
        for job in range(FAKE_JOB + 40, FAKE_JOB + 45):
            cluster.rawclient("release", job)
        cluster.rawclient("release", FAKE_JOB + 5)
        wait_until(lambda: not cluster.list_mounts(), 20, what="the mounts to go")
        for img in imgs:
            img.unlink()


def test_a_kernel_mounts_prefetch_still_walking_it_is_stopped_at_release(contained):
    """A kernel mount's prefetch walks the mount (squash-reader --prefetch
    --walk, the mount's root on its fd 5): here the test reader's prefetch
    sleeps holding that root, as a walk over a slow file system would. The
    release kills it before it unmounts (core/kernel_prefetches.c,
    kernel_prefetches_stop): the mount goes outright, without waiting for
    it and being detached lazily, and the prefetch is gone."""
    cluster, ctl = contained
    img = cluster.make_image(cluster.trusted / "walked.sqfs", FILES)
    (ctl / "prefetch-sleeps").write_text("")
    try:
        p = cluster.rawclient("mount", FAKE_JOB + 6, uid_of(USER1), f"{img}:/squash/walked")
        assert p.returncode == 0, p.stdout + p.stderr
        (sleeper,) = wait_until(prefetch_sleepers, 10, what="the prefetch")
        (mount,) = [m for m in cluster.list_mounts() if m["image"] == str(img)]
        assert mount["mode"] == "kernel", mount
        held = [os.readlink(f"/proc/{sleeper}/fd/{fd}") for fd in os.listdir(f"/proc/{sleeper}/fd")]
        assert mount["mount_point"] in held, held  # what kept the mount busy
        offset = len(cluster.squashd_log())
        p = cluster.rawclient("release", FAKE_JOB + 6)
        assert p.returncode == 0, p.stdout + p.stderr
        wait_until(lambda: not cluster.list_mounts(), 10, what="the mount to go")
        wait_until(lambda: not os.path.exists(f"/proc/{sleeper}"), 5, what="the prefetch to end")
        log = cluster.squashd_log()[offset:]
        assert "detaching it lazily" not in log, log
        assert f"unmounted image {img}" in log, log
    finally:
        (ctl / "prefetch-sleeps").unlink(missing_ok=True)
        for pid in prefetch_sleepers():
            os.kill(pid, 9)
        cluster.rawclient("release", FAKE_JOB + 6)
        wait_until(lambda: not cluster.list_mounts(), 20, what="the mounts to go")
        img.unlink()
