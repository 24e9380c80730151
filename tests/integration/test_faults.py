"""squashd and the plugin under faults: a hung file system, a lost epilog,
a dead FUSE server after a restart, a full state directory, and a release
while other jobs' steps run. Each test checks what the jobs saw, what is
mounted and which processes run."""

import os
import re
import signal
import subprocess
import time
from pathlib import Path

import pytest

from conftest import (SQUASHCTL, USER1, USER2, BlockingJob, Job, blocking_jobs, mountinfo,
                      run, wait_until)

# squashd's handling of its own faults, left out of the matrix's roots.
OWN_FAULT_HANDLING = pytest.mark.host_release_only("squashd's own fault handling: the same on every release")

FILES = {"hello.txt": "hello from the image\n"}


def image_of(cluster, user, name):
    d = cluster.workdir(user, "img")
    return cluster.make_image(d / name, FILES, owner=user)


def log_since(cluster, offset):
    return cluster.squashd_log()[offset:]


class HungFilesystem:
    """A read-only FUSE file system (squashfuse_ll serving an image that
    holds images) whose server can be stopped: every open below it then
    hangs, as on an NFS or Lustre server that went away."""

    def __init__(self, cluster, user, names):
        d = cluster.workdir(user, "hungsrc")
        for n in names:
            cluster.make_image(d / n, FILES, owner=user)
        outer = cluster.make_image(cluster.work / f"hung-{os.getpid()}-{len(names)}.sqfs",
                                   {}, owner="root")
        run(["mksquashfs", d, outer, "-noappend", "-quiet", "-no-progress"])
        self.mnt = cluster.workdir("root", "hungfs")
        self.proc = subprocess.Popen(["squashfuse_ll", "-f", "-o", "allow_other", outer, self.mnt])
        wait_until(lambda: any(m["mount_point"] == str(self.mnt) for m in mountinfo()), 10,
                   what="the hung-to-be file system to mount")

    def path(self, name):
        return self.mnt / name

    def hang(self):
        os.kill(self.proc.pid, signal.SIGSTOP)

    def close(self):
        os.kill(self.proc.pid, signal.SIGCONT)
        run(["umount", "-l", self.mnt], check=False)
        self.proc.kill()
        self.proc.wait(10)


@OWN_FAULT_HANDLING
def test_hung_image_of_one_user_does_not_delay_another_user(cluster):
    hung = HungFilesystem(cluster, USER1, [f"h{i}.sqfs" for i in range(4)])
    try:
        d = cluster.workdir(USER1, "hung")
        hung_jobs = []
        for i in range(4):
            j = cluster.sbatch(USER1, cluster.write_script(d, "cat /squash/h%d/hello.txt\n" % i, f"h{i}.sh"),
                               ["-H", f"--squash-image={hung.path(f'h{i}.sqfs')}"], cwd=d)
            assert isinstance(j, Job), j.stderr
            hung_jobs.append(j)
        hung.hang()
        run(["scontrol", "release", ",".join(str(j.id) for j in hung_jobs)], env=cluster.env)
        # squashd is now waiting on four opens that do not return.
        wait_until(lambda: "requests: " in cluster.squashctl("status").stdout and
                   re.search(r"[1-9]\d* in progress", cluster.squashctl("status").stdout), 20, 0.1,
                   "squashd to be busy with the hung images")

        other = image_of(cluster, USER2, "fine.sqfs")
        job = cluster.run_job(USER2, "cat /squash/fine/hello.txt\n", [f"--squash-image={other}"])
        assert job.state == "COMPLETED", job.output()
        assert job.output() == FILES["hello.txt"]
        # The other user's job ran to its end while the hung ones still wait.
        states = [j.info().get("JobState") for j in hung_jobs]
        assert all(s not in ("COMPLETED", "FAILED") for s in states), states

        for j in hung_jobs:
            j.wait(timeout=120)
            out = j.output()
            assert j.state == "FAILED", (j.state, out)
            assert re.search(r"^squash: job \d+: .*timed out after .* \(is its file system hung\?\)",
                             out, re.M), out
        assert cluster.node_state() == "idle"
    finally:
        hung.close()


@OWN_FAULT_HANDLING
def test_sigterm_while_an_image_hangs_stops_squashd_at_once(cluster):
    """squashd is stopped while a request waits on an image whose file
    system hangs: it exits without waiting for that open (request_timeout
    is 10 s in the test cluster), kills the stuck opener, and the job fails
    with the hung file system's message (its prolog asks the restarted
    squashd again) instead of hanging the node."""
    hung = HungFilesystem(cluster, USER1, ["stuck.sqfs"])
    try:
        d = cluster.workdir(USER1, "stuck")
        job = cluster.sbatch(USER1, cluster.write_script(d, "cat /squash/stuck/hello.txt\n"),
                             ["-H", f"--squash-image={hung.path('stuck.sqfs')}"], cwd=d)
        assert isinstance(job, Job), job.stderr
        hung.hang()
        run(["scontrol", "release", str(job.id)], env=cluster.env)
        pid = cluster.squashd_pid()
        # The only child squashd has here is the opener stuck in the hung FS.
        wait_until(lambda: children_of(pid), 30, 0.1, "squashd to start opening the hung image")
        openers = children_of(pid)
        t0 = time.monotonic()
        os.kill(pid, signal.SIGTERM)
        wait_until(lambda: not os.path.exists(f"/proc/{pid}"), 15, 0.05, "squashd to exit")
        took = time.monotonic() - t0
        # Not a speed goal: it must not have waited for the hung open to time out.
        assert took < 9, f"squashd took {took:.1f} s to stop behind a hung open"
        assert "stopping" in cluster.squashd_log(), cluster.squashd_log()[-2000:]
        # The opener child, stuck in the hung file system, was killed (it
        # stays a zombie in D state only while the FS is stopped).
        for c in openers:
            wait_until(lambda: proc_state(c) in (None, "Z", "D"), 10, what=f"opener {c} to be killed")
        cluster.cluster_sh("squashd-start")
        job.wait(timeout=120)
        # The prolog asked the restarted squashd again: the user is told the
        # true cause, not that squashd was stopping.
        out = job.output()
        assert job.state == "FAILED", (job.state, out)
        assert "timed out after" in out and "is its file system hung?" in out, out
        assert "stopping" not in out, out
        assert cluster.node_state() == "idle"
    finally:
        hung.close()


def children_of(pid):
    """pids of the direct children of pid."""
    out = []
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                fields = open(f"/proc/{d}/stat").read().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[1]) == pid:
                out.append(int(d))
    return out


def proc_state(pid):
    try:
        return open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()[0]
    except OSError:
        return None


def test_lost_epilog_is_reconciled_with_slurm(cluster):
    """squashd is down while the job's epilog runs: the epilog gives up
    (after retry=), the job still ends, and the restarted squashd releases
    the job's mount on its own, asking Slurm."""
    img = image_of(cluster, USER1, "lost.sqfs")
    with blocking_jobs(cluster, (USER1, img, "")) as (blk,):
        server = cluster.shared_mount(img, [blk])["server_pid"]
        cluster.cluster_sh("squashd-stop")
        blk.release()
        assert blk.job.state == "COMPLETED", blk.job.output()
        # Nothing released it: the mount and its server are still there.
        assert cluster.node_mounts(), "the mount went without squashd"
        assert os.path.exists(f"/proc/{server}")
        offset = len(cluster.squashd_log())
        cluster.cluster_sh("squashd-start")
        wait_until(lambda: not cluster.list_mounts(), 30, 0.2, "gc to release the job")
        assert f"gc: released job {blk.job.id} (Slurm: gone COMPLETED" in log_since(cluster, offset)
    wait_until(lambda: not cluster.node_mounts(), 10, what="the mount to go")
    wait_until(lambda: not os.path.exists(f"/proc/{server}"), 10, what="the FUSE server to exit")


@OWN_FAULT_HANDLING
def test_gc_ignores_copies_that_mount_propagation_removes(cluster):
    """On a systemd node /run is a shared mount, so squashd's node-level
    mounts also appear in every namespace that is a slave of it (services
    with PrivateTmp= and the like). Those copies go with squashd's unmount:
    gc must not take them for a process still using a lost job's mount."""
    mnt = cluster.dir / "squashd" / "mnt"
    run(["mount", "--bind", mnt, mnt])
    holder = None
    try:
        run(["mount", "--make-shared", mnt])
        holder = subprocess.Popen(["unshare", "--mount", "--propagation", "slave", "sleep", "600"])
        wait_until(lambda: ns_of(holder.pid) != ns_of(os.getpid()), 10, 0.05,
                   "the slave namespace to exist")
        img = image_of(cluster, USER1, "slave.sqfs")
        with blocking_jobs(cluster, (USER1, img, "")) as (blk,):
            point = cluster.shared_mount(img, [blk])["mount_point"]
            wait_until(lambda: point in open(f"/proc/{holder.pid}/mountinfo").read(), 10, 0.1,
                       "the mount to propagate into the slave namespace")
            cluster.cluster_sh("squashd-stop")
            blk.release()
            assert blk.job.state == "COMPLETED", blk.job.output()
            offset = len(cluster.squashd_log())
            cluster.cluster_sh("squashd-start")
            wait_until(lambda: not cluster.list_mounts(), 30, 0.2, "gc to release the job")
            log = log_since(cluster, offset)
            assert f"gc: released job {blk.job.id} (Slurm: gone COMPLETED" in log, log
            assert "still uses its mount" not in log, log
        # The copy went with the unmount.
        wait_until(lambda: point not in open(f"/proc/{holder.pid}/mountinfo").read(), 10, 0.1,
                   "the slave's copy to go")
    finally:
        if holder:
            holder.kill()
            holder.wait(10)
        run(["umount", "-l", mnt], check=False)


def ns_of(pid):
    return os.readlink(f"/proc/{pid}/ns/mnt")


def test_gc_on_demand_releases_only_jobs_slurm_no_longer_runs(cluster):
    img = image_of(cluster, USER1, "gc.sqfs")
    uid = str(os.stat(img).st_uid)
    with blocking_jobs(cluster, (USER1, img, "")) as (blk,):
        # A record of a job Slurm never ran here (as a lost epilog leaves).
        p = cluster.rawclient("mount", "3999999", uid, f"{img}:/squash/gc")
        assert p.returncode == 0, p.stdout + p.stderr
        mounts = cluster.list_mounts()
        assert len(mounts) == 1 and sorted(mounts[0]["jobs"]) == sorted([blk.job.id, 3999999]), mounts
        p = cluster.squashctl("gc")
        assert p.returncode == 0, p.stderr
        wait_until(lambda: "gc: released job 3999999 (Slurm: gone unknown-to-slurmctld"
                   in cluster.squashd_log(), 20, what="gc to release the unknown job")
        # The running job keeps its mount.
        m = cluster.shared_mount(img, [blk])
        assert m["jobs"] == [blk.job.id]
        blk.release()
        assert blk.job.state == "COMPLETED", blk.job.output()
    # And non-root users may not run it.
    p = cluster.as_user(USER1, [SQUASHCTL, "--socket", cluster.socket,
                                "--munge-socket", cluster.munge_socket, "gc"])
    assert p.returncode == 1 and "only root may run gc" in p.stderr, p.stderr


def mount_of(cluster, img):
    m = [m for m in cluster.list_mounts() if m["image"] == str(img)]
    assert len(m) == 1, m
    return m[0]


def kill_until_dead(cluster, img):
    """SIGKILLs the image's FUSE server until squashd gives its mount up:
    at once when squashd holds no descriptor of the connection, after its
    restarts (mount/fuse_keep.h) when it took one from the adopted reader
    (mount/fuse_keep_adopt.h: squash-reader, a kernel that resends and
    names connections in fdinfo)."""
    for _ in range(8):
        m = mount_of(cluster, img)
        if m["state"] == "dead":
            return
        pid = m["server_pid"]
        os.kill(pid, signal.SIGKILL)
        # (A dead mount has no server_pid.)
        wait_until(lambda: mount_of(cluster, img).get("server_pid") != pid, 10,
                   what="squashd to restart or give up the dead server")
    raise AssertionError(f"the mount of {img} outlived 8 of its servers")


@OWN_FAULT_HANDLING
def test_dead_adopted_fuse_server_is_replaced(cluster):
    img = image_of(cluster, USER1, "dead.sqfs")
    after = "srun cat /squash/dead/hello.txt\n"
    with blocking_jobs(cluster, (USER1, img, after)) as (blk,):
        server = cluster.shared_mount(img, [blk])["server_pid"]
        # Restart squashd: the server is adopted, no longer its child.
        old = cluster.squashd_pid()
        cluster.cluster_sh("squashd-stop")
        wait_until(lambda: not os.path.exists(f"/proc/{old}"), 10, what="squashd to exit")
        cluster.cluster_sh("squashd-start")
        assert cluster.shared_mount(img, [blk])["server_pid"] == server
        kill_until_dead(cluster, img)
        # The reader was the user's own process: its death is noted, and
        # is no node problem (NHC would drain the node for any user who
        # kills their reader four times).
        p = cluster.squashctl("health", check=False)
        assert p.returncode == 0, p.stdout
        assert p.stdout == ("note: 1 FUSE mount(s) whose reader died (its user's own process) still "
                            "held by their jobs; new jobs get fresh mounts (the journal says why each "
                            "died)\n"), p.stdout

        # The next job with that image gets a fresh mount and reads it.
        job = cluster.run_job(USER1, "cat /squash/dead/hello.txt\n", [f"--squash-image={img}"])
        assert job.state == "COMPLETED", job.output()
        assert job.output() == FILES["hello.txt"]

        # The first job's next step is told what happened.
        blk.release()
        out = blk.job.output()
        assert blk.job.state == "FAILED", out
        assert re.search(r"^squash: job \d+: node \S+ cannot provide this job's images: "
                         r"the FUSE server of image \S+ on this node (exited|was killed)", out, re.M), out
        assert "This is not a mistake in your job: ask your administrator" in out, out
        assert "node-error" not in out, out
    assert cluster.squashctl("health", check=False).returncode == 0


@OWN_FAULT_HANDLING
def test_full_state_directory_is_a_node_error_and_fails_health(cluster):
    state = cluster.state_dir
    run(["mount", "-t", "tmpfs", "-o", "size=64k,mode=0755", "tmpfs", state])
    try:
        (state / "mnt").mkdir(mode=0o700)
        # Fill it to the last block.
        subprocess.run(["dd", "if=/dev/zero", f"of={state}/fill", "bs=4k"],
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        img = image_of(cluster, USER1, "full.sqfs")
        job = cluster.run_job(USER1, "cat /squash/full/hello.txt\necho reached the end\n",
                              [f"--squash-image={img}"])
        out = job.output()
        assert job.state == "FAILED", (job.state, out)
        assert re.search(r"^squash: job \d+: node \S+ cannot provide this job's images: squashd on "
                         r"this node cannot save its registry \(.*No space left on device\).*"
                         r"ask your administrator to look at squashd on \S+", out, re.M), out
        assert "reached the end" not in out
        assert cluster.node_state() == "idle"
        p = cluster.squashctl("health", check=False)
        assert p.returncode == 1, p.stdout
        assert re.search(r"^registry not saved: .*No space left on device", p.stdout, re.M), p.stdout
        assert not cluster.node_mounts(), "a mount that could not be recorded was kept"

        (state / "fill").unlink()
        p = cluster.squashctl("health", check=False)
        assert p.returncode == 0, p.stdout
        job = cluster.run_job(USER1, "cat /squash/full/hello.txt\n", [f"--squash-image={img}"])
        assert job.state == "COMPLETED", job.output()
    finally:
        wait_until(lambda: not cluster.list_mounts(), 15, what="mounts to go")
        run(["umount", "-l", state], check=False)


def test_release_while_other_jobs_steps_run_leaves_no_copy(cluster):
    x = image_of(cluster, USER1, "xrel.sqfs")
    y = image_of(cluster, USER2, "yrel.sqfs")
    a = BlockingJob(cluster, USER1, x)
    try:
        a.wait_ready()
        server_x = cluster.shared_mount(x, [a])["server_pid"]
        b = BlockingJob(cluster, USER2, y)
        try:
            b.wait_ready()
            # B's step namespace holds its own bind and no node-level mount.
            ns = mountinfo(b.pid)
            prefix = str(cluster.state_dir) + "/"
            copied = [m["mount_point"] for m in ns if m["mount_point"].startswith(prefix)]
            assert not copied, copied
            assert any(m["mount_point"] == "/squash/yrel" for m in ns)
            assert not any(m["mount_point"] == "/squash/xrel" for m in ns)

            offset = len(cluster.squashd_log())
            a.release()
            assert a.job.state == "COMPLETED", a.job.output()
            # X's server exits as soon as its mount goes: no copy pins it.
            wait_until(lambda: not os.path.exists(f"/proc/{server_x}"), 10,
                       what="X's FUSE server to exit")
            assert "did not exit after unmount" not in log_since(cluster, offset)
            assert [m["image"] for m in cluster.list_mounts()] == [str(y)]
            b.release()
            assert b.job.state == "COMPLETED", b.job.output()
        finally:
            b.go.touch()
    finally:
        a.go.touch()


def test_step_mounts_the_images_its_prolog_did_not(cluster):
    """squashd has no record of a running job on the node (Slurm skipped the
    prolog of a requeued job, the prolog could not reach squashd, or an
    admin released it): the job's next step asks for the images itself,
    as the prolog would have, and its tasks see them."""
    img = image_of(cluster, USER1, "late.sqfs")
    after = "srun cat /squash/late/hello.txt\n"
    with blocking_jobs(cluster, (USER1, img, after)) as (blk,):
        cluster.shared_mount(img, [blk])
        p = cluster.squashctl("release", str(blk.job.id))
        assert p.returncode == 0, p.stderr
        wait_until(lambda: not cluster.list_mounts(), 20, 0.1, "the job's mount to go")
        offset = len(cluster.squashd_log())
        blk.release()
        out = blk.job.output()
        assert blk.job.state == "COMPLETED", out
        assert out.endswith(FILES["hello.txt"]), out
        assert f"job {blk.job.id}: 1 image(s) ready" in log_since(cluster, offset)
        slurmd_log = (cluster.dir / "log" / "slurmd.log").read_text()
        assert f"job {blk.job.id}: its prolog did not mount its images on this node" in slurmd_log
    # Released by the epilog like any other job's mounts.
    wait_until(lambda: not cluster.list_mounts(), 20, 0.1, "the epilog to release the job")


def test_a_prolog_note_goes_with_its_job_whatever_the_epilog_sees(cluster):
    """The note a prolog or a step leaves when it could not reach squashd
    (or a step's late mount failed before asking it: DIR/prolog-unreached/
    JOBID beside the socket, root's, in /run) is removed by the job's
    epilog, also when the epilog sees no images in the job's environment: a
    step may ask for images that the job's own environment does not show,
    and a note left there stayed until a reboot, one per such job (found by
    a review, 2026-12-02)."""
    if cluster.multinode:
        pytest.skip("one-node layout: the note is planted beside that node's socket")
    d = cluster.workdir(USER1, "note")
    job = cluster.sbatch(USER1, cluster.write_script(d, "echo ran\n"), ["--hold"], cwd=d)
    assert isinstance(job, Job), job.stderr
    notes = Path(cluster.socket).parent / "prolog-unreached"
    notes.mkdir(mode=0o755, exist_ok=True)
    note = notes / str(job.id)
    note.write_text("planted by the test: a step's late mount failed\n")
    try:
        p = cluster.as_user("root", ["scontrol", "release", str(job.id)])
        assert p.returncode == 0, p.stderr
        job.wait()
        assert job.state == "COMPLETED" and job.output() == "ran\n", job.output()
        wait_until(lambda: not note.exists(), 10, 0.1, "the epilog to remove the job's note")
    finally:
        note.unlink(missing_ok=True)


@OWN_FAULT_HANDLING
def test_damaged_registry_is_rebuilt_and_the_running_job_keeps_its_image(cluster):
    """A state file with a malformed line (a disk error, a hand edit) while a
    job runs: squashd keeps a copy of the file aside, says so in its log,
    `status` and `health` (healthy: no admin is needed), and drops only
    the entry of the bad record (registry/state_file.h): the running job
    keeps its registry entry and its shared mount, its mount and FUSE
    server go at its end, and the next image job on the node runs."""
    node = cluster.nodes[0]
    img = image_of(cluster, USER1, "damaged.sqfs")
    state = cluster.state_dir / "state"
    blk = BlockingJob(cluster, USER1, img, after="cat /squash/damaged/hello.txt\n")
    try:
        blk.wait_ready()
        server = cluster.shared_mount(img, [blk])["server_pid"]
        node.squashd_stop()
        with open(state, "a") as f:
            f.write("mount this is not a record\n")
        offset = len(cluster.squashd_log())
        node.squashd_start()
        log = log_since(cluster, offset)
        aside = list(cluster.state_dir.glob("state.unreadable-*"))
        assert len(aside) == 1 and aside[0].read_text().endswith("mount this is not a record\n"), aside
        assert re.search(r"cannot read all of the registry: .*state:\d+: malformed record \(1 bad record: "
                         r"the entries they belong to were dropped, the others kept\); kept as "
                         r".*state\.unreadable-\d{8}T\d{6}Z", log), log
        st = cluster.squashctl("status").stdout
        assert re.search(r"^registry: rebuilt from the node at start: .*malformed record", st, re.M), st
        p = cluster.squashctl("health", check=False)
        assert p.returncode == 0, p.stdout
        assert re.search(r"^note: registry rebuilt from the node at start: .*kept as .*unreadable", p.stdout,
                         re.M), p.stdout
        # The running job's entry and shared mount survived the bad record.
        assert cluster.shared_mount(img, [blk])["server_pid"] == server
        assert os.path.exists(f"/proc/{server}")
        # The next image job runs without an admin.
        job = cluster.run_job(USER1, "cat /squash/damaged/hello.txt\n", [f"--squash-image={img}"])
        assert job.state == "COMPLETED", job.output()
        assert job.output() == FILES["hello.txt"]
        blk.release()
        assert blk.job.state == "COMPLETED", blk.job.output()
        assert blk.job.output().endswith(FILES["hello.txt"]), blk.job.output()
        # Released at its end: no mount, no reader left (no_leftovers checks
        # the whole node too).
        wait_until(lambda: not os.path.exists(f"/proc/{server}"), 20, 0.1, "the job's reader to exit")
        wait_until(lambda: not cluster.list_mounts() and not cluster.node_mounts(), 20, 0.1,
                   "the node's mounts to go")
        # A restart does not bring the refusal back: the file kept aside is
        # damaged, not of another format.
        node.squashd_stop()
        node.squashd_start()
        assert cluster.squashctl("health", check=False).returncode == 0
        job = cluster.run_job(USER1, "cat /squash/damaged/hello.txt\n", [f"--squash-image={img}"])
        assert job.state == "COMPLETED", job.output()
    finally:
        blk.go.touch()
        for f in cluster.state_dir.glob("state.unreadable-*"):
            f.unlink()


@OWN_FAULT_HANDLING
def test_registry_of_a_newer_format_is_kept_aside_and_refuses_new_mounts(cluster):
    """A state file of a newer format (as after a downgrade), which only the
    squashd that wrote it can read, is moved aside instead of forgotten: squashd says why in
    its log and `squashctl health`, refuses new mounts with the reason and
    what to do (the job fails, the node stays up), and keeps refusing after
    a restart until an admin removes the file."""
    node = cluster.nodes[0]
    img = image_of(cluster, USER1, "unread.sqfs")
    state = cluster.state_dir / "state"
    node.squashd_stop()
    try:
        state.write_text("squashd-state 2\nnext 1\nsomething 2.0 would write\n")
        node.squashd_start()
        aside = list(cluster.state_dir.glob("state.unreadable-*"))
        assert len(aside) == 1 and aside[0].read_text().startswith("squashd-state 2\n"), aside
        assert re.search(r"cannot read the registry: .*state file format 2, written by a newer "
                         r"squashd; this one reads format 1; kept as .*state\.unreadable-\d{8}T\d{6}Z; "
                         r"squashd mounts nothing", cluster.squashd_log()), cluster.squashd_log()[-2000:]
        p = cluster.squashctl("health", check=False)
        assert p.returncode == 1, p.stdout
        assert re.search(r"^registry not read at start: .*format 2.*\(new mounts are refused", p.stdout,
                         re.M), p.stdout
        job = cluster.run_job(USER1, "cat /squash/unread/hello.txt\necho reached the end\n",
                              [f"--squash-image={img}"])
        out = job.output()
        assert job.state == "FAILED", (job.state, out)
        assert re.search(r"squashd on this node .*lost its registry when it last started: it could not "
                         r"read it \(.*format 2.*\) and mounts nothing until an admin has looked", out), out
        assert "reached the end" not in out
        assert cluster.node_state() == "idle"
        # A restart does not make the node's mounts known: still refused.
        node.squashd_stop()
        node.squashd_start()
        p = cluster.squashctl("health", check=False)
        assert p.returncode == 1 and "holds a registry of another format an earlier squashd" in p.stdout, p.stdout
    finally:
        for f in cluster.state_dir.glob("state.unreadable-*"):
            f.unlink()
        node.squashd_stop()
        node.squashd_start()
    assert cluster.squashctl("health", check=False).returncode == 0
