"""srun --squash-image inside an allocation mounts images for that step
only: the step sees the job's images and its own, on every node of the
step; its own go when the step ends, however it ends; mistakes are refused
by srun, before the step starts."""

import os
import pwd
import re
import select
import signal
import subprocess

import pytest

from conftest import RAWCLIENT, SQUASHD, USER1, BlockingJob, mountinfo, run, uid_of, wait_until

A_FILES = {"a.txt": "from the job image\n"}
B_FILES = {"b.txt": "from the step image\n"}
NODES = ("n1", "n2", "n3")


def images(c):
    d = c.workdir(USER1, "img")
    a = c.make_image(d / "jobimg.sqfs", A_FILES, owner=USER1)
    b = c.make_image(d / "stepimg.sqfs", B_FILES, owner=USER1)
    return a, b


def wait_file(path, job, timeout=60):
    def there():
        if path.exists():
            return True
        info = job.info()
        if info and info.get("JobState") in ("COMPLETED", "FAILED", "CANCELLED"):
            raise AssertionError(f"job {job.id} ended before {path.name}:\n{job.output()}")
        return False
    wait_until(there, timeout, 0.1, f"{path.name} of job {job.id}")


def by_image(mounts, image):
    found = [m for m in mounts if m["image"] == str(image)]
    return found[0] if found else None


def test_step_sees_its_own_image_and_the_jobs_and_only_for_that_step(cluster):
    c = cluster
    a, b = images(c)
    d = c.workdir(USER1, "steps")
    before = f"""
srun --squash-image={b} bash -c '
  echo "STEP0 MOUNTS=$SQUASH_MOUNTS IMAGES=$SQUASH_IMAGES INTERNAL=$SQUASH_STEP_IMAGES"
  cat /squash/jobimg/a.txt /squash/stepimg/b.txt
  echo $$ > {d}/step0
  while [ ! -e {d}/go0 ]; do sleep 0.1; done'
srun bash -c 'echo "STEP1 MOUNTS=$SQUASH_MOUNTS"; cat /squash/jobimg/a.txt;
  if [ -e /squash/stepimg ]; then echo "STEP1 SEES B"; else echo "STEP1 WITHOUT B"; fi'
touch {d}/steps-done
"""
    blk = BlockingJob(c, USER1, a, before=before)
    try:
        wait_file(d / "step0", blk.job)
        task = int((d / "step0").read_text())
        # The step's namespace has both targets; the host has neither.
        mps = [m["mount_point"] for m in mountinfo(task)]
        assert "/squash/jobimg" in mps and "/squash/stepimg" in mps, mps
        mounts = c.list_mounts()
        ma, mb = by_image(mounts, a), by_image(mounts, b)
        assert ma and ma["jobs"] == [blk.job.id] and ma["steps"] == [], mounts
        assert mb and mb["jobs"] == [] and mb["steps"] == [f"{blk.job.id}.0"], mounts
        assert mb["refcount"] == 1, mb
        # gc's question to Slurm (squashd --query-slurm) sees the step here.
        q = run([SQUASHD, "--query-slurm", c.node, f"{blk.job.id}.0"], env=c.env)
        assert q.stdout == f"{blk.job.id}.0 here\n", q.stdout
        (d / "go0").touch()
        # After the step: its image is gone (registry and node), the job's stays.
        wait_file(d / "steps-done", blk.job)
        q = run([SQUASHD, "--query-slurm", c.node, f"{blk.job.id}.0", str(blk.job.id)], env=c.env)
        assert q.stdout == f"{blk.job.id}.0 gone step-ended\n{blk.job.id} here\n", q.stdout
        wait_until(lambda: by_image(c.list_mounts(), b) is None, 15, 0.1,
                   "the step image to be released")
        points = [m["mount_point"] for m in c.node_mounts()]
        assert points == [ma["mount_point"]], c.node_mounts()
        assert by_image(c.list_mounts(), a)["jobs"] == [blk.job.id]
        assert re.search(rf"step {blk.job.id}\.0 released", c.squashd_log())
    finally:
        (d / "go0").touch()
        blk.release()
    out = blk.job.output()
    assert blk.job.state == "COMPLETED", out
    assert f"STEP0 MOUNTS=/squash/jobimg:/squash/stepimg IMAGES={a},{b} INTERNAL=\n" in out
    assert "from the job image\nfrom the step image\n" in out
    assert "STEP1 MOUNTS=/squash/jobimg\n" in out and "STEP1 WITHOUT B\n" in out, out
    assert "STEP1 SEES B" not in out


def test_step_image_in_a_job_without_images(cluster):
    """An allocation made without --squash-image: the step's images are all
    it gets."""
    _, b = images(cluster)
    (cluster.targets / "mine").mkdir(exist_ok=True)  # targets outside base_dir must exist
    job = cluster.run_job(USER1, f"""
srun --squash-image={b}:{cluster.targets}/mine bash -c 'echo "M=$SQUASH_MOUNTS"; cat {cluster.targets}/mine/b.txt'
srun bash -c 'echo "PLAIN=$SQUASH_MOUNTS"'
""")
    out = job.output()
    assert job.state == "COMPLETED", out
    assert f"M={cluster.targets}/mine\nfrom the step image\n" in out
    assert "PLAIN=\n" in out


def test_step_mistakes_are_refused_by_srun(cluster):
    a, b = images(cluster)
    d = cluster.workdir(USER1, "bad")
    missing = d / "missing.sqfs"
    notsq = d / "notsq.sqfs"
    notsq.write_text("not an image\n")
    pw = pwd.getpwnam(USER1)
    os.chown(notsq, pw.pw_uid, pw.pw_gid)
    job = cluster.run_job(USER1, f"""
echo MISSING; srun --squash-image={missing} echo ran-missing; echo "rc=$?"
echo NOTSQ; srun --squash-image={notsq} echo ran-notsq; echo "rc=$?"
echo CLASH; srun --squash-image={b}:/squash/jobimg echo ran-clash; echo "rc=$?"
echo INSIDE; srun --squash-image={b}:/squash/jobimg/sub echo ran-inside; echo "rc=$?"
echo SAME; srun --squash-image={a} cat /squash/jobimg/a.txt; echo "rc=$?"
""", [f"--squash-image={a}"], cwd=d)
    out = job.output()
    assert job.state == "COMPLETED", out
    sections = dict(re.findall(r"^(MISSING|NOTSQ|CLASH|INSIDE|SAME)\n(.*?)(?=^[A-Z]+\n|\Z)", out, re.M | re.S))
    assert re.search(rf"squash: {re.escape(str(missing))}: No such file or directory", sections["MISSING"])
    assert re.search(rf"squash: {re.escape(str(notsq))}: .*squashfs", sections["NOTSQ"], re.I)
    assert re.search(r"its target /squash/jobimg is also the target /squash/jobimg of the job's image",
                     sections["CLASH"]), sections["CLASH"]
    assert "lies inside the target /squash/jobimg" in sections["INSIDE"], sections["INSIDE"]
    for name in ("MISSING", "NOTSQ", "CLASH", "INSIDE"):
        assert "rc=1" in sections[name] and "ran-" not in sections[name], (name, sections[name])
    # The same image at the same target is the job's own: the step just runs.
    assert "from the job image\nrc=0" in sections["SAME"], sections["SAME"]
    # srun refused before any step started: squashd never heard of them.
    assert not re.search(rf"step {job.id}\.\d+", cluster.squashd_log())


@pytest.mark.host_release_only("squashd's own checks of a raw request: the same on every release")
def test_squashd_refuses_a_clash_it_is_sent_directly(cluster):
    """The policy lives in squashd: a step mount whose target is a job
    image's is refused even when the plugin's check is bypassed."""
    a, b = images(cluster)
    blk = BlockingJob(cluster, USER1, a)
    try:
        blk.wait_ready()
        p = cluster.rawclient("mount", f"{blk.job.id}.7", str(uid_of(USER1)), f"{b}:/squash/jobimg")
        assert p.stdout.startswith("user-error: step image "), (p.stdout, p.stderr)
        assert "give the step image another target" in p.stdout + p.stderr
        assert by_image(cluster.list_mounts(), b) is None
    finally:
        blk.release()


def step_pids(cluster, job_id, step):
    """Pids of the step's slurmstepd on the node (scontrol listpids does not
    show slurmstepd itself: find it by its command line)."""
    res = []
    for p in os.listdir("/proc"):
        if not p.isdigit():
            continue
        try:
            cmd = open(f"/proc/{p}/cmdline").read()
        except OSError:
            continue
        if cmd.startswith("slurmstepd") and f"[{job_id}.{step}]" in cmd:
            res.append(int(p))
    return res


def test_killed_steps_leave_nothing_behind(cluster):
    a, b = images(cluster)
    d = cluster.workdir(USER1, "kill")
    body = f"""
srun --squash-image={b} bash -c 'echo $$ > {d}/s0; sleep 300' &
for i in $(seq 1 600); do [ -e {d}/s0 ] && break; sleep 0.1; done
while [ ! -e {d}/cancelled ]; do sleep 0.1; done
wait
srun --squash-image={b} bash -c 'echo $$ > {d}/s1; sleep 300' &
echo $! > {d}/srun1
wait
while [ ! -e {d}/killed ]; do sleep 0.1; done
"""
    blk = BlockingJob(cluster, USER1, a, before=body)
    job = blk.job
    try:
        # scancel JOBID.STEPID
        wait_file(d / "s0", job)
        assert by_image(cluster.list_mounts(), b)["steps"] == [f"{job.id}.0"]
        run(["scancel", f"{job.id}.0"], env=cluster.env)
        wait_until(lambda: by_image(cluster.list_mounts(), b) is None, 30, 0.2,
                   "the cancelled step's image to be released")
        (d / "cancelled").touch()
        # SIGKILL of srun
        wait_file(d / "s1", job)
        assert by_image(cluster.list_mounts(), b)["steps"] == [f"{job.id}.1"]
        os.kill(int((d / "srun1").read_text()), signal.SIGKILL)
        wait_until(lambda: by_image(cluster.list_mounts(), b) is None, 60, 0.2,
                   "the killed srun's step image to be released")
        (d / "killed").touch()
        blk.wait_ready()
        # The job's image stayed through both.
        assert by_image(cluster.list_mounts(), a)["jobs"] == [job.id]
        assert len(cluster.node_mounts()) == 1, cluster.node_mounts()
    finally:
        for f in ("cancelled", "killed"):
            (d / f).touch()
        blk.release()


def job_with_a_running_step_image(cluster, name):
    """A blocking job with image A whose background step 0 has image B of
    its own and sleeps. Returns (a, b, the job's directory, its BlockingJob)."""
    a, b = images(cluster)
    d = cluster.workdir(USER1, name)
    body = f"""
srun --squash-image={b} bash -c 'echo $$ > {d}/s0; exec sleep 300' &
echo $! > {d}/srun0
wait
"""
    return a, b, d, BlockingJob(cluster, USER1, a, before=body)


def test_step_whose_slurmstepd_dies_is_released(cluster):
    """slurmstepd killed hard never runs its end of step (and Slurm still
    lists the step): squashd watches the slurmstepd that asked (its pidfd)
    and releases the step's images when it dies; the job keeps its own."""
    a, b, d, blk = job_with_a_running_step_image(cluster, "hard")
    job = blk.job
    try:
        wait_file(d / "s0", job)
        task = int((d / "s0").read_text())
        stepds = step_pids(cluster, job.id, 0)
        assert len(stepds) == 1, stepds
        assert by_image(cluster.list_mounts(), b)["steps"] == [f"{job.id}.0"]
        assert "steps with images of their own: 1\n" in cluster.squashctl("status").stdout
        for pid in (stepds[0], task):
            os.kill(pid, signal.SIGKILL)
        wait_until(lambda: by_image(cluster.list_mounts(), b) is None, 30, 0.1,
                   "the dead slurmstepd's step image to be released")
        assert "steps with images of their own: 0\n" in cluster.squashctl("status").stdout
        assert re.search(rf"step {job.id}\.0: its slurmstepd \(pid {stepds[0]}\) is gone",
                         cluster.squashd_log())
        assert len(cluster.node_mounts()) == 1, cluster.node_mounts()
        assert by_image(cluster.list_mounts(), a)["jobs"] == [job.id]
        os.kill(int((d / "srun0").read_text()), signal.SIGKILL)
        blk.wait_ready()
    finally:
        blk.release()


def test_step_images_on_every_node_of_the_step(cluster3):
    c = cluster3
    d = c.workdir(USER1, "img")
    a = c.make_image(d / "jobimg.sqfs", A_FILES, owner=USER1)
    b = c.make_image(d / "stepimg.sqfs", B_FILES, owner=USER1)
    w = c.workdir(USER1, "n3")
    before = f"""
srun -N3 --ntasks-per-node=1 --squash-image={b} bash -c '
  echo "task $SLURM_PROCID on $(hostname): $(cat /squash/jobimg/a.txt) + $(cat /squash/stepimg/b.txt)"
  touch {w}/at-$(hostname)
  while [ ! -e {w}/go ]; do sleep 0.1; done'
srun -N3 --ntasks-per-node=1 bash -c 'echo "plain $(hostname): $SQUASH_MOUNTS"'
"""
    blk = BlockingJob(c, USER1, a, extra_args=["-N3"], before=before)
    try:
        for n in NODES:
            wait_file(w / f"at-{n}", blk.job)
        for n in c.nodes:
            mb = by_image(n.list_mounts(), b)
            assert mb and mb["steps"] == [f"{blk.job.id}.0"], (n.name, n.list_mounts())
        (w / "go").touch()
    finally:
        (w / "go").touch()
        blk.release()
    out = blk.job.output()
    assert blk.job.state == "COMPLETED", out
    seen = dict(re.findall(r"^task \d+ on (\S+): (.*)$", out, re.M))
    assert seen == {n: "from the job image + from the step image" for n in NODES}, out
    plain = dict(re.findall(r"^plain (\S+): (.*)$", out, re.M))
    assert plain == {n: "/squash/jobimg" for n in NODES}, out
    for n in c.nodes:
        assert re.search(rf"step {blk.job.id}\.0 released", n.squashd_log()), n.name


@pytest.mark.host_release_only("squashd's own restart and adoption: the same on every release")
def test_squashd_restart_keeps_a_running_steps_images(cluster):
    """squashd restarted while a step with images of its own runs: the new
    squashd adopts the step (and its watch on the step's slurmstepd), and
    still releases the step's images when that slurmstepd dies."""
    a, b, d, blk = job_with_a_running_step_image(cluster, "restart")
    job = blk.job
    try:
        wait_file(d / "s0", job)
        task = int((d / "s0").read_text())
        before = by_image(cluster.list_mounts(), b)
        cluster.cluster_sh("squashd-stop")
        cluster.cluster_sh("squashd-start")
        wait_until(lambda: cluster.squashd_pid(), 30, 0.1, "squashd to start")
        after = by_image(cluster.list_mounts(), b)
        assert after and after["steps"] == [f"{job.id}.0"], cluster.list_mounts()
        assert after["mount_point"] == before["mount_point"]
        # The step still reads its image through the adopted mount.
        assert (open(f"/proc/{task}/root/squash/stepimg/b.txt").read() == "from the step image\n")
        stepds = step_pids(cluster, job.id, 0)
        for pid in stepds + [task]:
            os.kill(pid, signal.SIGKILL)
        wait_until(lambda: by_image(cluster.list_mounts(), b) is None, 30, 0.1,
                   "the adopted step's image to be released")
        assert re.search(rf"step {job.id}\.0: its slurmstepd \(pid {stepds[0]}\) is gone",
                         cluster.squashd_log())
        os.kill(int((d / "srun0").read_text()), signal.SIGKILL)
        blk.wait_ready()
    finally:
        blk.release()


def test_gc_releases_a_step_slurm_no_longer_lists(cluster):
    """The last safety net: a step record whose step Slurm does not list
    (here a step id the job never had, asked for by a process that stays
    alive) is released by gc, and the job's own images stay."""
    a, b = images(cluster)
    d = cluster.workdir(USER1, "gc")
    blk = BlockingJob(cluster, USER1, a)
    hold = d / "hold"
    holder = None
    try:
        blk.wait_ready()
        holder = subprocess.Popen([str(RAWCLIENT), "--socket", str(cluster.socket), "--munge-socket",
                                   str(cluster.munge_socket), "--hold", str(hold), "mount",
                                   f"{blk.job.id}.42", str(uid_of(USER1)), f"{b}:/squash/ghost"],
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        released = rf"gc: released step {blk.job.id}\.42 \(Slurm: gone step-ended"
        # Answered first: until then the record is the request's, which gc
        # leaves alone (its answer waits for the save that holds it).
        assert select.select([holder.stdout], [], [], 30)[0], "the ghost step's mount was not answered"
        answer = holder.stdout.readline()
        assert answer.startswith("ok"), answer

        # The periodic gc may release the ghost before this test asks:
        # either is fine, neither is a race to lose.
        def listed_or_released():
            m = by_image(cluster.list_mounts(), b)
            return (m and m["steps"] == [f"{blk.job.id}.42"]) or \
                re.search(released, cluster.squashd_log())
        wait_until(listed_or_released, 30, 0.1, "the ghost step's record")
        out = cluster.squashctl("gc").stdout
        assert by_image(cluster.list_mounts(), b) is None, (out, cluster.list_mounts())
        assert re.search(released, cluster.squashd_log())
        assert by_image(cluster.list_mounts(), a)["jobs"] == [blk.job.id]
    finally:
        hold.touch()
        if holder:
            holder.communicate(timeout=30)
        blk.release()
