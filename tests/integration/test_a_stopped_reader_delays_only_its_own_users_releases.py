"""What follows a process's exit (a session's or step's release, a reader's
restart) runs on the exiting user's own thread, never on the process
watcher every user shares (daemon/process/process_watch.c,
user_executor.c): a user whose reader is stopped (SIGSTOP, as anyone may)
makes their own session's teardown wait up to request_timeout for it, and
another user's session that ends meanwhile is released at once. Issue 37,
mechanism 3."""

import os
import signal
import subprocess
import time

import pytest

from conftest import RAWCLIENT, SQUASHCTL, USER1, USER2, mountinfo, proc_uids, resume, uid_of, wait_until
from test_bounded_work_per_user import budgets_of
from test_squash_shell import sessions, shell_cmd
from test_writable_overlay import squashd_with

pytestmark = pytest.mark.host_release_only("squashd's threads for users' callbacks: the same on every release")

FILES = {"hello.txt": "hello from the image\n"}
REQUEST_TIMEOUT = 10  # tests/cluster/cluster.sh's squashd.conf: the stopped reader's wait


def session_of(c, image):
    """The pid of the squash-shell session squashd lists for image, or None."""
    for m in c.list_mounts():
        if m["image"] == str(image) and m.get("sessions"):
            return m["sessions"][0]
    return None


def start_session(c, user, image, target, tag):
    d = c.workdir(user, "stopped-reader")
    pidfile = d / f"inner-{tag}"
    proc = subprocess.Popen(
        ["runuser", "-u", user, "--", *[str(x) for x in shell_cmd(
            c, f"{image}:{target}", "--", "bash", "-c", f"echo $$ > {pidfile}; exec sleep 300")]],
        cwd=d, env=c.env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    wait_until(lambda: pidfile.exists() and session_of(c, image), 30, 0.1,
               f"{user}'s session to start")
    return proc, session_of(c, image)


def mounted(c, image):
    """Whether squashd still lists image, or the node still has its mount."""
    listed = [m for m in c.list_mounts() if m["image"] == str(image)]
    points = {m["mount_point"] for m in listed}
    return bool(listed) or any(m["mount_point"] in points for m in mountinfo("self"))


def stop_readers(c, user, stopped):
    """SIGSTOPs user's FUSE servers on the node (as anyone may stop their
    own), adding them to stopped for the test to resume."""
    def readers_of_user():
        return [p for p in c.instance_fuse_servers() if proc_uids(p)[0] == uid_of(user)]
    # A mount is listed from its start: its server may still be starting
    # (forked, not yet the FUSE server's own program).
    readers = wait_until(readers_of_user, 10, 0.05, f"a FUSE server serving {user}'s mount")
    for pid in readers:
        os.kill(pid, signal.SIGSTOP)
        stopped.append(pid)


def end_gone_jobs(c, stopped, waiting, jobs):
    """A test's end: the stopped readers resumed, the request still waiting
    on them let end, the jobs released, nothing left mounted."""
    resume(stopped)
    if waiting and waiting.poll() is None:
        waiting.wait(timeout=REQUEST_TIMEOUT + 10)
    for j in jobs:
        c.rawclient("release", j)
    wait_until(lambda: not c.list_mounts(), 30, 0.1, "the mounts to go")


def spawn_with_pid(pid, cmd, **kwargs):
    """cmd started as process pid, which must be free (the kernel hands out
    ns_last_pid + 1 next; another fork may come first, so try again)."""
    for _ in range(50):
        with open("/proc/sys/kernel/ns_last_pid", "w") as f:
            f.write(str(pid - 1))
        p = subprocess.Popen(cmd, **kwargs)
        if p.pid == pid:
            return p
        p.kill()
        p.communicate(timeout=30)
    raise AssertionError(f"could not start a process as pid {pid}")


def test_a_stopped_readers_teardown_does_not_delay_another_users_session_end_or_start(cluster):
    """...nor another user's session whose process gets the pid of one of
    the first user's ended sessions still waiting for that user's thread
    (daemon/requests/session_mount.c drops it)."""
    c = cluster
    slow = c.make_image(c.workdir(USER1, "stopped-reader") / "slow.sqfs", FILES, owner=USER1)
    # A trusted image: a kernel mount, no reader to wait on.
    os.chmod(c.trusted, 0o755)
    slow2 = c.make_image(c.trusted / f"stopped-reader-{os.getpid()}.sqfs", FILES, owner="root")
    fast = c.make_image(c.workdir(USER2, "stopped-reader") / "fast.sqfs", FILES, owner=USER2)
    fast2 = c.make_image(c.workdir(USER2, "stopped-reader") / "fast2.sqfs", FILES, owner=USER2)
    procs, stopped = [], []
    try:
        p1, s1 = start_session(c, USER1, slow, "/squash/slow", "slow")
        procs.append(p1)
        p3, s3 = start_session(c, USER1, slow2, "/squash/slow2", "slow2")
        procs.append(p3)
        p2, s2 = start_session(c, USER2, fast, "/squash/fast", "fast")
        procs.append(p2)
        fast_point = next(m["mount_point"] for m in c.list_mounts() if m["image"] == str(fast))
        uid = uid_of(USER1)
        stop_readers(c, USER1, stopped)

        # The first user's session ends: its teardown waits on the stopped
        # reader (up to request_timeout, then kills it).
        os.kill(s1, signal.SIGKILL)
        wait_until(lambda: "session of pid %d" % s1 in c.squashd_log(), 10, 0.05,
                   "the first session's end to be noticed")
        time.sleep(0.5)  # its teardown is under way, waiting on the reader
        # squashctl status shows it: the user's one thread, busy with it.
        rows = budgets_of(c, USER1)
        assert rows["watcher threads"] == (1, 1), rows
        assert rows["watcher work queued"][0] >= 1 and rows["watcher work queued"][1] is None, rows
        assert "watcher busy ms" in rows, rows
        # The second user's session ends meanwhile.
        t = time.monotonic()
        os.kill(s2, signal.SIGKILL)
        wait_until(lambda: not mounted(c, fast), REQUEST_TIMEOUT + 10, 0.05,
                   "the second user's mount to be released")
        took = time.monotonic() - t
        print(f"another user's session end while a stopped reader's teardown waits: "
              f"released after {took:.1f} s")
        assert took < 4, f"the second user's release waited {took:.1f} s behind the first's teardown"
        assert fast_point not in [m["mount_point"] for m in mountinfo("self")]

        # The first user's other session (a trusted image's) ends too; its
        # release waits in that user's queue. Another user's process that
        # gets its pid starts a session of its own at once.
        os.kill(s3, signal.SIGKILL)
        p3.communicate(timeout=30)
        d2 = c.workdir(USER2, "stopped-reader")
        pidfile = d2 / "inner-reused"
        t = time.monotonic()
        p4 = spawn_with_pid(s3, [str(x) for x in shell_cmd(
            c, f"{fast2}:/squash/fast2", "--", "bash", "-c", f"echo $$ > {pidfile}; exec sleep 300")],
            user=USER2, group=USER2, extra_groups=[], cwd=d2, env=c.env, stdout=subprocess.PIPE,
            stderr=subprocess.PIPE, text=True)
        procs.append(p4)
        wait_until(lambda: pidfile.exists() or p4.poll() is not None, REQUEST_TIMEOUT, 0.05,
                   "the session with the reused pid to start")
        assert p4.poll() is None, p4.communicate()
        assert session_of(c, fast2) == s3
        took = time.monotonic() - t
        assert took < 4, f"the session with the reused pid took {took:.1f} s"
        assert f"session of pid {s3} (uid {uid}) ended; releasing its 1 image(s) for a new process" \
            in c.squashd_log()
        assert mounted(c, slow2), "the ended session's mount went on another thread than its user's"
        # The first user's teardown ends by its deadline: the silent reader
        # is killed and the mount goes.
        wait_until(lambda: not mounted(c, slow), REQUEST_TIMEOUT + 10, 0.1,
                   "the stopped reader's mount to go")
        assert "did not exit after unmount; killing it" in c.squashd_log()
    finally:
        resume(stopped)
        for pid in sessions(c):  # the squash-shell processes runuser leaves behind
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        for p in procs:
            p.kill()
            p.communicate(timeout=30)
        wait_until(lambda: not c.list_mounts(), 30, what="the mounts to go")


def test_squashctl_gc_waiting_on_a_stopped_reader_holds_no_other_gc(cluster):
    """gc's teardown of a gone job whose reader is stopped waits up to
    request_timeout; squashctl gc waits for it, but after its pass, so the
    next pass (the periodic one, or another squashctl gc) releases another
    user's gone job at once (daemon/core/gc.c)."""
    c = cluster
    gone1, gone2 = 3997101, 3997102  # jobs Slurm does not know: gone
    with squashd_with(c, "gc_interval = 3600\n"):
        slow = c.make_image(c.workdir(USER1, "gc-stopped") / "slow.sqfs", FILES, owner=USER1)
        fast = c.make_image(c.workdir(USER2, "gc-stopped") / "fast.sqfs", FILES, owner=USER2)
        stopped, first = [], None
        try:
            assert c.rawclient("mount", gone1, uid_of(USER1), f"{slow}:/squash/slow").stdout.startswith("ok")
            stop_readers(c, USER1, stopped)
            first = subprocess.Popen([SQUASHCTL, "--socket", c.socket, "--munge-socket", c.munge_socket, "gc"],
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            # The first gc released the job and now waits on the reader.
            wait_until(lambda: not any(gone1 in m.get("jobs", []) for m in c.list_mounts()) and mounted(c, slow),
                       REQUEST_TIMEOUT / 2, 0.05, "the first gc to wait on the stopped reader")
            assert first.poll() is None

            assert c.rawclient("mount", gone2, uid_of(USER2), f"{fast}:/squash/fast").stdout.startswith("ok")
            t = time.monotonic()
            c.squashctl("gc")
            took = time.monotonic() - t
            assert not mounted(c, fast), "the second gc did not release the other user's gone job"
            assert took < REQUEST_TIMEOUT / 2, f"the second gc took {took:.1f} s"
            assert first.poll() is None, "the first gc ended before the second: nothing was shown"
            out, err = first.communicate(timeout=REQUEST_TIMEOUT + 10)
            assert first.returncode == 0, (out, err)
            wait_until(lambda: not mounted(c, slow), 10, 0.1, "the stopped reader's mount to go")
        finally:
            end_gone_jobs(c, stopped, first, (gone1, gone2))


def test_gcs_periodic_teardown_over_a_stopped_reader_holds_no_other_release(cluster):
    """The periodic pass hands a released job's unmounting to the job's
    user's thread (core/owner_teardown.c): over that user's stopped reader
    it waits there, and the next pass releases another user's gone job at
    once."""
    c = cluster
    gone1, gone2 = 3997201, 3997202  # jobs Slurm does not know: gone
    with squashd_with(c, "gc_interval = 1\n"):
        slow = c.make_image(c.workdir(USER1, "gc-periodic") / "slow.sqfs", FILES, owner=USER1)
        fast = c.make_image(c.workdir(USER2, "gc-periodic") / "fast.sqfs", FILES, owner=USER2)
        bound = c.workdir("root", "gc-periodic-bind")
        stopped, holder = [], None
        try:
            assert c.rawclient("mount", gone1, uid_of(USER1), f"{slow}:/squash/slow").stdout.startswith("ok")
            point = next(m["mount_point"] for m in c.list_mounts() if m["image"] == str(slow))
            # A process that uses the mount (bound elsewhere, as a step
            # binds it) keeps gc from releasing it while the reader stops.
            holder = subprocess.Popen(["unshare", "--mount", "--propagation", "private", "sh", "-c",
                                       f"mount --bind {point} {bound} && exec sleep 300"])
            wait_until(lambda: f" {bound} " in open(f"/proc/{holder.pid}/mountinfo").read(), 10, 0.05,
                       "the holder's bind")
            stop_readers(c, USER1, stopped)
            holder.kill()
            holder.wait()
            # The next pass released the job; its unmount waits on the reader.
            wait_until(lambda: not any(gone1 in m.get("jobs", []) for m in c.list_mounts()), 5, 0.05,
                       "the periodic gc to release the first job")
            assert mounted(c, slow)

            assert c.rawclient("mount", gone2, uid_of(USER2), f"{fast}:/squash/fast").stdout.startswith("ok")
            t = time.monotonic()
            wait_until(lambda: not mounted(c, fast), REQUEST_TIMEOUT, 0.05,
                       "the periodic gc to release the other user's job")
            took = time.monotonic() - t
            assert took < 4, f"the other user's gone job waited {took:.1f} s"
            assert mounted(c, slow), "nothing was shown: the stopped reader's teardown was over"
            wait_until(lambda: not mounted(c, slow), REQUEST_TIMEOUT + 10, 0.1, "the stopped reader's mount to go")
        finally:
            resume(stopped)
            if holder and holder.poll() is None:
                holder.kill()
                holder.wait()
            for j in (gone1, gone2):
                c.rawclient("release", j)
            wait_until(lambda: not c.list_mounts(), 30, 0.1, "the mounts to go")


def test_a_steps_release_in_a_job_without_images_waits_in_its_users_queue(cluster):
    """A job that asked for no images has no record in squashd; its steps'
    own images do. Their release (root's request, from slurmstepd) is
    answered at once, and the unmount after it, which waits on the user's
    stopped reader (up to request_timeout per server), runs on that user's
    own thread (core/owner_teardown.h), not on a request's worker: with a
    reader per mount (squashfuse_ll) one user's ending steps could
    otherwise hold every worker of the node, and before, the user's own
    places in max_requests_per_user, which the user's epilog release
    needs (a refused epilog release makes a lost job, a health problem)."""
    c = cluster
    # One server per mount: a mount's unmount waits for its server to
    # exit, up to request_timeout (mount/unmount.c).
    with squashd_with(c, "fuse_reader = squashfuse_ll\n"):
        job = 3997301  # a job Slurm does not know: only the step's record exists
        img = c.make_image(c.workdir(USER1, "step-release") / "steprel.sqfs", FILES, owner=USER1)
        stopped, release = [], None
        hold = c.workdir(USER1, "step-release") / "done"
        # The step's asker (slurmstepd) stays: squashd releases a step whose asker ends.
        asker = subprocess.Popen([RAWCLIENT, "--socket", c.socket, "--munge-socket", c.munge_socket,
                                  "--hold", hold, "mount", f"{job}.0", str(uid_of(USER1)),
                                  f"{img}:/squash/steprel"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                 text=True)
        try:
            wait_until(lambda: any(m["image"] == str(img) for m in c.list_mounts()), 30, 0.05,
                       "the step's image to be mounted")
            stop_readers(c, USER1, stopped)
            def running():
                return budgets_of(c, USER1).get("requests running", (0, None))[0]
            assert running() == 0, budgets_of(c, USER1)
            # Answered at once; USER1's own thread then unmounts, waiting
            # on the stopped server, while no request of USER1's runs.
            release = subprocess.Popen([RAWCLIENT, "--socket", c.socket, "--munge-socket", c.munge_socket,
                                        "release", f"{job}.0"],
                                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            out, err = release.communicate(timeout=REQUEST_TIMEOUT / 2)
            assert release.returncode == 0, out + err
            wait_until(lambda: budgets_of(c, USER1).get("watcher work queued", (0, None))[0] >= 1,
                       REQUEST_TIMEOUT / 2, 0.05, "the unmount to be USER1's own thread's work")
            time.sleep(1)
            assert running() == 0, budgets_of(c, USER1)
            assert mounted(c, img), c.squashd_log()[-3000:]
            assert budgets_of(c, USER1).get("watcher work queued", (0, None))[0] >= 1, budgets_of(c, USER1)
        finally:
            resume(stopped)
            if release and release.poll() is None:
                release.communicate(timeout=REQUEST_TIMEOUT + 10)
            hold.touch()
            asker.communicate(timeout=30)
            c.rawclient("release", f"{job}.0")
            wait_until(lambda: not c.list_mounts(), 30, 0.1, "the mounts to go")


def test_a_teardown_waiting_on_a_stopped_reader_frees_its_kernel_mounts_first(cluster):
    """A job's release that waits on its user's stopped reader unmounts the
    job's kernel mounts first and drops them from the registry before that
    wait: an unmounting loop device counts for the node (max_loop_devices)
    but no longer for the user, so a user who ends job after job this way
    could hold every loop device of the node (daemon/core/sharing.c)."""
    c = cluster
    gone = 3997103
    own = c.make_image(c.workdir(USER1, "stopped-first") / "own.sqfs", FILES, owner=USER1)
    os.chmod(c.trusted, 0o755)
    trusted = c.make_image(c.trusted / f"stopped-first-{os.getpid()}.sqfs", FILES, owner="root")
    stopped, release = [], None
    try:
        # The trusted image last: the teardown meets it first without the fix.
        assert c.rawclient("mount", gone, uid_of(USER1), f"{own}:/squash/own",
                           f"{trusted}:/squash/trusted").stdout.startswith("ok")
        stop_readers(c, USER1, stopped)
        release = subprocess.Popen([RAWCLIENT, "--socket", c.socket, "--munge-socket", c.munge_socket,
                                    "release", str(gone)],
                                   stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        t = time.monotonic()
        wait_until(lambda: not mounted(c, trusted), REQUEST_TIMEOUT + 10, 0.05,
                   "the job's kernel mount to go")
        took = time.monotonic() - t
        assert took < REQUEST_TIMEOUT / 2, f"the kernel mount went after {took:.1f} s"
        assert mounted(c, own), "the stopped reader's mount went before its wait"
        # The kernel detaches the loop device just after the unmount.
        def loop_gone():
            return str(trusted) not in subprocess.run(["losetup", "-a"], capture_output=True, text=True).stdout
        wait_until(loop_gone, REQUEST_TIMEOUT / 2, 0.05, "the kernel mount's loop device to go")
        out, err = release.communicate(timeout=REQUEST_TIMEOUT + 10)
        assert release.returncode == 0, (out, err)
        wait_until(lambda: not mounted(c, own), 10, 0.1, "the stopped reader's mount to go")
    finally:
        end_gone_jobs(c, stopped, release, (gone,))
