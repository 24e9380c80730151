"""With a job namespace plugin (job_container/tmpfs, namespace/tmpfs from
25.11 on; with and without EntireStepInNS where Slurm has it) every task
joins the job's mount namespace before it runs: the images still reach the
batch step, srun steps, a step's own images and :rw overlays, the job's
private /tmp still works, and nothing is left behind (spank/step_bind.c)."""

import pwd
import shutil
import tempfile
from pathlib import Path

from conftest import USER1, mountinfo, run

JOB_FILES = {"a.txt": "from the job image\n"}
STEP_FILES = {"b.txt": "from the step image\n"}


def image(c, name, files):
    return c.make_image(c.workdir(USER1, "img") / name, files, owner=USER1)


def test_batch_and_srun_steps_see_the_image_and_the_private_tmp(cluster_jobns):
    c = cluster_jobns
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


def test_a_step_sees_its_own_image_and_the_jobs(cluster_jobns):
    c = cluster_jobns
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


def test_rw_overlay_is_written_and_seen_by_the_next_step(cluster_jobns):
    c = cluster_jobns
    a = users_own_image(c, "rwimg.sqfs", JOB_FILES)
    job = c.run_job(USER1, r"""
echo written-in-batch > /squash/rw/new.txt
srun cat /squash/rw/new.txt /squash/rw/a.txt
""", [f"--squash-image={a}:/squash/rw:rw"])
    out = job.output()
    assert job.state == "COMPLETED", out
    assert "written-in-batch\nfrom the job image\n" in out, out


def test_a_user_error_fails_the_job_and_leaves_the_node_up(cluster_jobns):
    c = cluster_jobns
    a = image(c, "gone.sqfs", JOB_FILES)
    # Passes the check at submit; gone by the time the prolog opens it.
    job = c.sbatch(USER1, c.write_script(c.workdir(USER1, "gone"), "cat /squash/gone/a.txt\n"),
                   [f"--squash-image={a}", "--begin=now+3"])
    a.unlink()
    job.wait()
    out = job.output()
    assert job.state == "FAILED", out
    assert f"squash: {a}" in out or str(a) in out, out
    assert all(s in ("idle", "mixed") for s in c.node_states().values()), c.node_states()
