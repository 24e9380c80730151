"""A restarted squashd adopts the readers of the previous one (core/adopt.c)
without trusting them: a user could ptrace their own squash-reader before
it was made untraceable (reader/untraceable.h), and can a squashfuse_ll
still, so adoption never stats or opens a descriptor the reader holds (a stopped
reader holding a file of its own FUSE mount cannot hang squashd's start,
mount/fuse_keep_adopt.c), and a process is taken for a reader by uid,
executable and start time, never by its name (process/reader_process.c):
a user's process named squash-reader is neither adopted nor killed."""

import os
import platform
import re
import shutil
import signal
import subprocess
import time

import pytest

from conftest import BUILD, USER1, USER2, blocking_jobs, run, uid_of, wait_until
from test_reader_killed_under_a_running_job import KERNEL_RESENDS
from test_squash_shell import sessions, shell_cmd

pytestmark = pytest.mark.host_release_only("squashd's adoption of readers: the same on every release")

PTRACE_SYSCALL = BUILD / "tests" / "tools" / "ptrace_syscall"


def user_image(cluster, user, name, text):
    d = cluster.workdir(user, "img")
    return cluster.make_image(d / f"{name}.sqfs", {"f.txt": text}, owner=user)


def mount_of(cluster, img):
    ms = [m for m in cluster.list_mounts() if m["image"] == str(img)]
    assert len(ms) == 1, cluster.list_mounts()
    return ms[0]


def ptrace_call(pid, *args):
    """The user's ptrace of their own reader: pid makes one system call."""
    if not PTRACE_SYSCALL.exists():
        run(["make", "-C", BUILD / "tests", "tools/ptrace_syscall"], timeout=300)
    p = run([PTRACE_SYSCALL, str(pid), *map(str, args)])
    return int(p.stdout.strip())


def fuse_fds(pid):
    fds = []
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            if os.readlink(f"/proc/{pid}/fd/{fd}") == "/dev/fuse":
                fds.append(int(fd))
        except OSError:
            pass
    return fds


def restart_squashd(cluster, limit):
    """Stops squashd and starts it again; seconds until it answers (None
    when it did not within limit)."""
    old = cluster.squashd_pid()
    cluster.cluster_sh("squashd-stop")
    wait_until(lambda: not os.path.exists(f"/proc/{old}"), 10, what="squashd to exit")
    t0 = time.monotonic()
    cluster.cluster_sh("squashd-start", check=False)
    while time.monotonic() - t0 < limit:
        if cluster.squashctl("status", check=False).returncode == 0:
            return time.monotonic() - t0
        time.sleep(0.05)
    return None


@pytest.mark.skipif(platform.machine() != "x86_64", reason="tests/tools/ptrace_syscall is x86-64 only")
def test_restart_with_a_stopped_reader_holding_a_file_of_its_mount(cluster):
    """The attack: the user's ptraced reader opens the root of its own
    mount (through their job's namespace), makes the kernel forget the
    root's attributes (FUSE_NOTIFY_INVAL_INODE on its /dev/fuse: the next
    stat must ask the reader) and stops. squashd restarts: it must become
    ready at once and serve other users, and it still adopts the reader."""
    a = user_image(cluster, USER1, "stopped", "user 1 reads on\n")
    c = user_image(cluster, USER2, "other", "user 2 is served\n")
    with blocking_jobs(cluster, (USER1, f"{a}:/squash/stopped", "cat /squash/stopped/f.txt")) as (blk,):
        reader = mount_of(cluster, a)["server_pid"]
        stdin = os.readlink(f"/proc/{reader}/fd/0")
        fd = ptrace_call(reader, "open", f"/proc/{blk.pid}/root/squash/stopped")
        assert fd >= 0, fd
        # As descriptor 0, ahead of the reader's own in /proc/PID/fd.
        assert ptrace_call(reader, "dup2", fd, 0) == 0
        assert ptrace_call(reader, "close", fd) == 0
        stopped = False
        try:
            for f in fuse_fds(reader):
                ptrace_call(reader, "inval", f, 1)  # FUSE_ROOT_ID
            os.kill(reader, signal.SIGSTOP)
            stopped = True
            took = restart_squashd(cluster, 12)
            print(f"\nsquashd ready {took if took is None else round(took, 2)} s after its start "
                  f"with user 1's reader (pid {reader}) stopped holding its mount's root")
            assert took is not None and took < 5, \
                f"squashd not ready after {took} s:\n{cluster.squashd_log()[-3000:]}"
            # Another user's job runs meanwhile.
            job = cluster.run_job(USER2, "cat /squash/other/f.txt\n", [f"--squash-image={c}:/squash/other"])
            assert job.state == "COMPLETED", job.output()
            assert job.output() == "user 2 is served\n"
            # The stopped reader was adopted all the same, and (where the
            # kernel names connections in fdinfo) its connection kept.
            m = mount_of(cluster, a)
            assert m["server_pid"] == reader
            log = cluster.squashd_log().rsplit("stopping on signal", 1)[-1]
            assert "not adopting" not in log, log
            kept = f"kept the FUSE connection of {m['mount_point']}" in log
            assert kept or not KERNEL_RESENDS or "do not name a descriptor's connection" in log, log
        finally:
            if stopped:
                os.kill(reader, signal.SIGCONT)
        fd = ptrace_call(reader, "open", stdin)
        assert fd >= 0 and ptrace_call(reader, "dup2", fd, 0) == 0, fd
        ptrace_call(reader, "close", fd)
        blk.release()
    assert blk.job.state == "COMPLETED", blk.job.output()
    assert "user 1 reads on" in blk.job.output()


def test_a_users_process_named_squash_reader_is_neither_adopted_nor_killed(cluster):
    """squashd's state names the pid of a mount's reader; after a restart
    that pid may be any process. Here it is the user's own, named
    squash-reader, running as the user, started before squashd: under the
    old rule (its name) it was adopted and killed with the mount."""
    img = user_image(cluster, USER1, "impostor", "x\n")
    d = cluster.workdir(USER1, "fake")
    fake = d / "squash-reader"
    shutil.copy2("/bin/sleep", fake)
    fake.chmod(0o755)
    pw_uid = uid_of(USER1)
    proc = subprocess.Popen(["setpriv", f"--reuid={pw_uid}", f"--regid={pw_uid}", "--clear-groups",
                             fake, "120"])
    reader = None
    try:
        wait_until(lambda: open(f"/proc/{proc.pid}/comm").read().strip() == "squash-reader", 5,
                   what="the user's process to run")
        with blocking_jobs(cluster, (USER1, f"{img}:/squash/impostor", "")) as (blk,):
            m = mount_of(cluster, img)
            reader = m["server_pid"]
            old = cluster.squashd_pid()
            cluster.cluster_sh("squashd-stop")
            wait_until(lambda: not os.path.exists(f"/proc/{old}"), 10, what="squashd to exit")
            state = cluster.state_dir / "state"
            # mount ID MODE DEV INO SIZE MTIME NSEC OWNER SERVER_PID ...
            text, n = re.subn(rf"^(mount (?:-?\d+ ){{8}}){reader}\b",
                              rf"\g<1>{proc.pid}", state.read_text(), flags=re.M)
            assert n == 1, text
            state.write_text(text)
            cluster.cluster_sh("squashd-start")
            log = cluster.squashd_log()
            assert re.search(rf"not adopting pid {proc.pid} .*does not run squash-reader", log), log[-2000:]
            assert mount_of(cluster, img)["state"] == "dead"
            blk.release()
        wait_until(lambda: str(img) not in {m["image"] for m in cluster.list_mounts()}, 20,
                   what="the mount to go")
        assert proc.poll() is None, "squashd killed the user's process"
    finally:
        proc.kill()
        proc.wait()
        if reader:  # serving a mount squashd gave up (detached)
            run(["kill", "-KILL", str(reader)], check=False)


def test_a_session_released_at_start_waits_on_its_stopped_reader_on_its_users_thread(cluster):
    """A squash-shell session that ended while squashd was down is released
    when squashd starts, and its mount unmounted; its user stopped the
    mount's reader meanwhile, so that unmount waits request_timeout for the
    reader to exit. It waits on that user's thread (core/adopt.c,
    core/owner_teardown.h): squashd answers at once and serves another user,
    and the mount and the reader still go."""
    img = user_image(cluster, USER1, "ended", "x\n")
    c = user_image(cluster, USER2, "served", "user 2 is served\n")
    d = img.parent
    pidfile = d / "inner"
    proc = subprocess.Popen(
        ["runuser", "-u", USER1, "--", *[str(x) for x in shell_cmd(
            cluster, img, "--", "bash", "-c", f"echo $$ > {pidfile}; exec sleep 300")]],
        cwd=d, env=cluster.env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    reader = None
    try:
        wait_until(lambda: pidfile.exists() and sessions(cluster), 30, 0.1, "the session to start")
        (session, _), = sessions(cluster).items()
        reader = mount_of(cluster, img)["server_pid"]
        old = cluster.squashd_pid()
        cluster.cluster_sh("squashd-stop")
        wait_until(lambda: not os.path.exists(f"/proc/{old}"), 10, what="squashd to exit")
        for pid in (int(pidfile.read_text()), session):
            os.kill(pid, signal.SIGKILL)
        proc.communicate(timeout=30)
        os.kill(reader, signal.SIGSTOP)
        t0 = time.monotonic()
        cluster.cluster_sh("squashd-start", check=False)
        while time.monotonic() - t0 < 15 and cluster.squashctl("status", check=False).returncode:
            time.sleep(0.05)
        took = time.monotonic() - t0
        print(f"\nsquashd ready {took:.2f} s after its start, user 1's stopped reader "
              f"(pid {reader}) to be stopped (request_timeout 10 s)")
        assert took < 5, f"squashd not ready after {took:.1f} s:\n{cluster.squashd_log()[-3000:]}"
        job = cluster.run_job(USER2, "cat /squash/served/f.txt\n", [f"--squash-image={c}:/squash/served"])
        assert job.state == "COMPLETED", job.output()
        assert job.output() == "user 2 is served\n"
        # The session's mount goes, and with it the stopped reader (killed
        # once request_timeout has passed).
        wait_until(lambda: not os.path.exists(f"/proc/{reader}"), 20, 0.1, "the stopped reader to go")
        wait_until(lambda: not cluster.list_mounts() and not cluster.node_mounts(), 10, 0.1,
                   "the session's mount to go")
        assert os.listdir(cluster.state_dir / "sessions") == []
        log = cluster.squashd_log().rsplit("stopping on signal", 1)[-1]
        assert f"the session of pid {session} ended while squashd was down" in log, log[-3000:]
        assert f"FUSE server {reader} did not exit after unmount; killing it" in log, log[-3000:]
    finally:
        proc.kill()
        proc.communicate(timeout=30)
        if reader and os.path.exists(f"/proc/{reader}"):
            os.kill(reader, signal.SIGCONT)


@pytest.mark.skipif(platform.machine() != "x86_64", reason="tests/tools/ptrace_syscall is x86-64 only")
def test_a_reader_with_descriptors_by_the_thousand_never_holds_squashds_restart(cluster):
    """The user's ptraced reader holds 12,000 descriptors of a file it holds
    1,000 locks of, each of which its fdinfo lists: a minute of fdinfo to
    read. A restart looks at readers' descriptors before it serves anyone
    (mount/fuse_keep_adopt.c); this user's share ends that look within a
    second: squashd answers, another user's job runs, and the user's own
    mount is still adopted and served."""
    a = user_image(cluster, USER1, "manyfds", "user 1 reads on\n")
    c = user_image(cluster, USER2, "other2", "user 2 is served\n")
    with blocking_jobs(cluster, (USER1, f"{a}:/squash/manyfds", "cat /squash/manyfds/f.txt")) as (blk,):
        reader = mount_of(cluster, a)["server_pid"]
        fd = ptrace_call(reader, "open", "/dev/null")
        assert fd >= 0, fd
        assert ptrace_call(reader, "locks", fd, 1000) == 0
        copies = 12000
        assert ptrace_call(reader, "dups", fd, copies) > 0
        held = len(os.listdir(f"/proc/{reader}/fd"))
        assert held > copies, held
        took = restart_squashd(cluster, 90)
        print(f"\nsquashd ready {took if took is None else round(took, 2)} s after its start "
              f"with user 1's reader (pid {reader}) holding {held} descriptors")
        assert took is not None and took < 6, \
            f"squashd not ready after {took} s:\n{cluster.squashd_log()[-3000:]}"
        log = cluster.squashd_log().rsplit("stopping on signal", 1)[-1]
        assert re.search(rf"uid {uid_of(USER1)}'s readers hold more descriptors than \d+ or took more "
                         r"than \d+ ms to look at", log), log
        job = cluster.run_job(USER2, "cat /squash/other2/f.txt\n", [f"--squash-image={c}:/squash/other2"])
        assert (job.state, job.output()) == ("COMPLETED", "user 2 is served\n"), job.output()
        assert mount_of(cluster, a)["server_pid"] == reader
        assert "not adopting" not in log, log
        blk.release()
    assert blk.job.state == "COMPLETED", blk.job.output()
    assert "user 1 reads on" in blk.job.output()
