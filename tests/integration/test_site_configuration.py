"""Slurm as sites configure it (conftest's cluster_site): proctrack/cgroup,
task/cgroup,task/affinity, PrologFlags=Contain (RunInJob from 24.05 on) and
a job namespace plugin (job_container/tmpfs, namespace/tmpfs from 25.11 on;
with and without EntireStepInNS where Slurm has it). Every task joins the
job's mount namespace before it runs: the images still reach the batch
step, srun steps, a step's own images, :rw overlays and a step that mounts
what its prolog did not (under RunInJob every job: then squashd releases
the job when its extern step ends); the job's private /tmp still works; the tasks are
in the job's cgroups and the FUSE servers are not (a job's end must not
take a mount other jobs share); nothing is left behind
(spank/task_hooks.c)."""

import os
import pwd
import shutil
import tempfile
from pathlib import Path

import pytest

from conftest import USER1, BlockingJob, mountinfo, run, slurm_release, wait_until

JOB_FILES = {"a.txt": "from the job image\n"}
STEP_FILES = {"b.txt": "from the step image\n"}


def image(c, name, files):
    return c.make_image(c.workdir(USER1, "img") / name, files, owner=USER1)


def test_batch_and_srun_steps_see_the_image_and_the_private_tmp(cluster_site):
    c = cluster_site
    a = image(c, "jobimg.sqfs", JOB_FILES)
    job = c.run_job(USER1, r"""
cat /squash/jobimg/a.txt
echo "kept in the job's own /tmp" > /tmp/squash-jobns-marker
srun bash -c 'cat /squash/jobimg/a.txt /tmp/squash-jobns-marker;
  grep -c " /squash/jobimg " /proc/self/mountinfo'
awk '$5 == "/tmp" {print "TMP FROM " $4}' /proc/self/mountinfo
""", [f"--squash-image={a}"])
    out = job.output()
    assert job.state == "COMPLETED", out
    assert out.count("from the job image\n") == 2, out
    assert "kept in the job's own /tmp\n" in out, out
    # The job's /tmp is the plugin's, under the cluster's BasePath.
    assert "TMP FROM /" in out and "/jobns/" in out, out
    # Written in the job's /tmp, not the node's.
    assert not any(m["mount_point"] == "/squash/jobimg" for m in mountinfo())
    assert not Path("/tmp/squash-jobns-marker").exists()


def test_a_step_sees_its_own_image_and_the_jobs(cluster_site):
    c = cluster_site
    a = image(c, "jobimg2.sqfs", JOB_FILES)
    b = image(c, "stepimg.sqfs", STEP_FILES)
    job = c.run_job(USER1, f"""
srun --squash-image={b} bash -c 'echo "STEP MOUNTS=$SQUASH_MOUNTS"; cat /squash/jobimg2/a.txt /squash/stepimg/b.txt'
srun bash -c 'if [ -e /squash/stepimg/b.txt ]; then echo "LATER STEP SEES B"; else echo "LATER STEP WITHOUT B"; fi'
""", [f"--squash-image={a}"])
    out = job.output()
    assert job.state == "COMPLETED", out
    assert "STEP MOUNTS=/squash/jobimg2:/squash/stepimg\n" in out, out
    assert "from the job image\nfrom the step image\n" in out, out
    assert "LATER STEP WITHOUT B\n" in out, out


def users_own_image(c, name, files):
    """An image whose files belong to USER1, as mksquashfs leaves a user's
    own tree (so the user may write in its overlay)."""
    src = Path(tempfile.mkdtemp(prefix="rwsrc.", dir=c.dir))
    path = c.workdir(USER1, "img") / name
    pw = pwd.getpwnam(USER1)
    try:
        src.chmod(0o755)
        for rel, text in files.items():
            (src / rel).write_text(text)
        run(["mksquashfs", src, path, "-noappend", "-quiet", "-no-progress",
             "-force-uid", pw.pw_uid, "-force-gid", pw.pw_gid])
    finally:
        shutil.rmtree(src)
    shutil.chown(path, USER1)
    return path


def test_rw_overlay_is_written_and_seen_by_the_next_step(cluster_site):
    c = cluster_site
    a = users_own_image(c, "rwimg.sqfs", JOB_FILES)
    job = c.run_job(USER1, r"""
echo written-in-batch > /squash/rw/new.txt
srun cat /squash/rw/new.txt /squash/rw/a.txt
""", [f"--squash-image={a}:/squash/rw:rw"])
    out = job.output()
    assert job.state == "COMPLETED", out
    assert "written-in-batch\nfrom the job image\n" in out, out


def test_a_user_error_fails_the_job_and_leaves_the_node_up(cluster_site):
    c = cluster_site
    a = image(c, "gone.sqfs", JOB_FILES)
    # Passes the check at submit; gone by the time the prolog opens it
    # (held, not --begin: a begin time waits for the scheduler's pass).
    job = c.sbatch(USER1, c.write_script(c.workdir(USER1, "gone"), "cat /squash/gone/a.txt\n"),
                   [f"--squash-image={a}", "--hold"])
    a.unlink()
    run(["scontrol", "release", str(job.id)], env=c.env)
    job.wait()
    out = job.output()
    assert job.state == "FAILED", out
    assert f"squash: {a}" in out or str(a) in out, out
    assert all(s in ("idle", "mixed") for s in c.node_states().values()), c.node_states()


def freezer_cgroup(pid):
    """The freezer cgroup (proctrack/cgroup's) of process pid."""
    with open(f"/proc/{pid}/cgroup") as f:
        for line in f:
            _, controllers, path = line.rstrip("\n").split(":", 2)
            if "freezer" in controllers.split(","):
                return path
    return None


def test_tasks_are_in_the_jobs_cgroup_the_fuse_server_is_not_and_a_step_mounts_late(cluster_site):
    c = cluster_site
    a = image(c, "late.sqfs", JOB_FILES)
    blk = BlockingJob(c, USER1, str(a), after="srun cat /squash/late/a.txt\n")
    try:
        pid = blk.wait_ready()
        job_id = blk.job.id
        assert f"/job_{job_id}/" in (freezer_cgroup(pid) or ""), freezer_cgroup(pid)
        servers = c.instance_fuse_servers()
        assert servers, "no FUSE server serves the job's image"
        for s in servers:
            assert "/job_" not in (freezer_cgroup(s) or ""), (s, freezer_cgroup(s))
        # squashd forgets the job (an admin's release): the next step
        # mounts the image itself, inside the job's namespace. The job's
        # binds keep the old mount's FUSE connection: where squashd keeps
        # it (Linux 6.9 on, squash-reader), it sees that and ends the reader at once
        # instead of waiting request_timeout for it to exit.
        p = c.squashctl("release", str(job_id))
        assert p.returncode == 0, p.stderr
        wait_until(lambda: not c.list_mounts(), 20, 0.1, "the job's mount to go")
        log = c.nodes[0].squashd_log()
        if "one that dies is restarted on its connection" in log:
            assert "still serves copies of the mount outside squashd's namespace" in log, log[-2000:]
        blk.release()
        out = blk.job.output()
        assert blk.job.state == "COMPLETED", out
        assert out.endswith(JOB_FILES["a.txt"]), out
        assert f"job {job_id}: its prolog did not mount its images on this node" in c.nodes[0].slurmd_log()
    finally:
        blk.go.touch()
    # No gc on this cluster: the epilog, or squashd seeing the job's extern
    # step end, releases what the step mounted.
    wait_until(lambda: not c.list_mounts(), 20, 0.1, "the job's end to release its images")


def test_the_end_of_a_job_whose_step_mounted_releases_its_images(cluster_site):
    """Under RunInJob (24.05 on) Slurm runs no SPANK prolog or epilog: the
    batch step mounts the images and squashd releases them when the job's
    extern step is gone (gc, every hour on this cluster, never comes)."""
    c = cluster_site
    a = image(c, "runinjob.sqfs", JOB_FILES)
    job = c.run_job(USER1, "cat /squash/runinjob/a.txt\n", [f"--squash-image={a}"])
    out = job.output()
    assert job.state == "COMPLETED", out
    assert out == JOB_FILES["a.txt"], out
    wait_until(lambda: not c.list_mounts(), 20, 0.1, "the job's end to release its images")
    log = c.nodes[0].squashd_log()
    if slurm_release() >= 2405:
        assert f"job {job.id}: its prolog did not mount its images on this node" in c.nodes[0].slurmd_log()
        assert f"job {job.id} released: it has ended on this node" in log, log[-3000:]
    else:
        assert f"job {job.id} released" in log, log[-3000:]


def test_a_restarted_squashd_watches_its_step_mounted_jobs_again(cluster_site):
    """Under RunInJob the registry marks a job whose step mounted
    (core/job_end_watch.h): a squashd restarted while such jobs run
    watches those still running again, from one look at the node's
    processes, and releases at once those that ended while it was down;
    with no gc on this cluster nothing else would."""
    c = cluster_site
    if slurm_release() < 2405 or c.job_ns != "tmpfs":
        pytest.skip("RunInJob is new in Slurm 24.05; run with one namespace kind")
    node = c.nodes[0]
    images = [image(c, f"watched{k}.sqfs", JOB_FILES) for k in (1, 2)]
    running = BlockingJob(c, USER1, images[0])
    ending = BlockingJob(c, USER1, images[1])
    try:
        running.wait_ready()
        ending.wait_ready()
        node.squashd_stop()
        assert ending.release()["JobState"] == "COMPLETED", ending.job.output()
        node.squashd_start()
        log = node.squashd_log()
        assert (f"job {ending.job.id} released: it ended on this node while squashd was down"
                in log), log[-3000:]
        assert (f"job {running.job.id}: watching its steps on this node again" in log), log[-3000:]
        wait_until(lambda: [m["image"] for m in c.list_mounts()] == [str(images[0])], 20, 0.1,
                   "the ended job's image to go and the running one's to stay")
        assert running.release()["JobState"] == "COMPLETED", running.job.output()
        wait_until(lambda: not c.list_mounts(), 20, 0.1, "the job's end to release its image")
        assert (f"job {running.job.id} released: it has ended on this node"
                in node.squashd_log()), node.squashd_log()[-3000:]
    finally:
        running.go.touch()
        ending.go.touch()
        if not node.squashd_pid():
            node.squashd_start(check=False)


def test_srun_and_salloc_allocations_see_the_image(cluster_site):
    """srun and salloc making their own allocations: under RunInJob the
    first step mounts, from the list srun or salloc left in its
    environment (spank/submit_check.c)."""
    c = cluster_site
    a = image(c, "alloc.sqfs", JOB_FILES)
    d = c.workdir(USER1, "alloc")
    for cmd in (["srun", f"--squash-image={a}"], ["salloc", f"--squash-image={a}", "srun"]):
        p = c.as_user(USER1, [*cmd, "cat", "/squash/alloc/a.txt"], cwd=d, timeout=90)
        assert p.returncode == 0, (cmd, p.stderr)
        assert p.stdout == JOB_FILES["a.txt"], (cmd, p.stdout, p.stderr)
        wait_until(lambda: not c.squeue_ids(), 30, 0.2, "the allocation to end")
        wait_until(lambda: not c.list_mounts(), 20, 0.1, "the allocation's end to release its images")
