"""Slurm-style patterns in image paths: %a, %A, %j, %u and %% are expanded
per job and per array task, so each task of an array can mount its own
image; a task whose image is bad fails with its own message while the
others run; pattern typos are refused at submit."""

import re

from conftest import USER1, Job, run, wait_until


def task_states(cluster, array_id):
    """{task id: JobState} of the tasks of an array job."""
    p = run(["scontrol", "-o", "show", "job", array_id], check=False, env=cluster.env)
    states = {}
    for line in p.stdout.splitlines():
        task = re.search(r"\bArrayTaskId=(\d+)\b", line)
        state = re.search(r"\bJobState=(\S+)", line)
        if task and state:
            states[int(task.group(1))] = state.group(1)
    return states


def test_each_array_task_mounts_its_own_image(cluster):
    d = cluster.workdir(USER1, "arr")
    for k in (1, 3):  # no img_2.sqfs
        cluster.make_image(d / f"img_{k}.sqfs", {"which": f"dataset {k}\n"}, owner=USER1)
    script = cluster.write_script(d, 'echo "TASK $SLURM_ARRAY_TASK_ID MOUNTS=$SQUASH_MOUNTS"\n'
                                     "cat /squash/data/which\n")
    p = cluster.as_user(USER1, ["sbatch", "--parsable", "--array=1-3", "-o", d / "out_%a.txt",
                                f"--squash-image={d}/img_%a.sqfs:/squash/data", script],
                        cwd=d, timeout=60)
    assert p.returncode == 0, p.stderr
    array_id = int(p.stdout.strip().split(";")[0])

    def ended():
        s = task_states(cluster, array_id)
        return s if len(s) == 3 and all(v in ("COMPLETED", "FAILED") for v in s.values()) else None
    states = wait_until(ended, 120, 0.3, f"the tasks of array {array_id} to end")
    outputs = {k: (d / f"out_{k}.txt").read_text() for k in (1, 2, 3)}
    assert states == {1: "COMPLETED", 2: "FAILED", 3: "COMPLETED"}, (states, outputs)
    for k in (1, 3):
        assert outputs[k] == f"TASK {k} MOUNTS=/squash/data\ndataset {k}\n", outputs[k]
    # The task with the missing image says which file, and why.
    assert re.search(rf"^squash: job \d+: .*{re.escape(str(d))}/img_2\.sqfs.*No such file",
                     outputs[2], re.M), outputs[2]
    assert "TASK 2" not in outputs[2]
    wait_until(lambda: not cluster.squeue_ids(), 30, 0.2, "the array to leave the queue")
    assert cluster.node_state() == "idle"


def test_job_id_and_user_patterns(cluster):
    """%j is known only once the job exists: submit held, make the image
    under the job's id, release."""
    d = cluster.workdir(USER1, "pat")
    (d / USER1).mkdir()
    # %u and %% are known at submit, so that image is checked there already.
    cluster.make_image(d / USER1 / "100%.sqfs", {"which": "user's\n"}, owner=USER1)
    script = cluster.write_script(d, "cat /squash/j/which /squash/u/which\n")
    out = d / "job.out"
    p = cluster.as_user(USER1, ["sbatch", "--parsable", "--hold", "-o", out,
                                f"--squash-image={d}/run_%j.sqfs:/squash/j,"
                                f"{d}/%u/100%%.sqfs:/squash/u", script],
                        cwd=d, timeout=60)
    assert p.returncode == 0, p.stderr
    job = Job(cluster, int(p.stdout.strip().split(";")[0]), out, p)
    try:
        cluster.make_image(d / f"run_{job.id}.sqfs", {"which": f"job {job.id}\n"}, owner=USER1)
        run(["scontrol", "release", job.id], env=cluster.env)
    finally:
        job.wait()
    assert job.state == "COMPLETED", job.output()
    assert job.output() == f"job {job.id}\nuser's\n"


def test_array_pattern_in_a_plain_job_fails_clearly(cluster):
    d = cluster.workdir(USER1, "pat")
    cluster.make_image(d / "img_0.sqfs", {"which": "0\n"}, owner=USER1)
    job = cluster.run_job(USER1, "echo reached the script\n",
                          [f"--squash-image={d}/img_%a.sqfs"], cwd=d)
    out = job.output()
    assert job.state == "FAILED", out
    assert f"uses %a but job {job.id} is not part of a job array" in out, out
    assert "reached the script" not in out
    assert cluster.node_state() == "idle"


def test_unknown_pattern_refused_at_submit(cluster):
    d = cluster.workdir(USER1, "pat")
    err = cluster.sbatch_refuses(USER1, f"{d}/img_%t.sqfs")
    assert f"squash: {d}/img_%t.sqfs: '%t' in '{d}/img_%t.sqfs' is not a known pattern" in err
    assert "%a (array task id)" in err


def test_array_tasks_on_two_nodes(cluster3):
    """Every node of a task expands the pattern for that task: both nodes
    of each two-node task mount the task's own image."""
    c = cluster3
    d = c.workdir(USER1, "arr")
    for k in (1, 2):
        c.make_image(d / f"img_{k}.sqfs", {"which": f"dataset {k}\n"}, owner=USER1)
    script = c.write_script(d, "srun -N2 --ntasks-per-node=1 bash -c "
                               "'echo \"$(hostname) $(cat /squash/data/which)\"'\n")
    p = c.as_user(USER1, ["sbatch", "--parsable", "-N2", "--array=1-2", "-o", d / "out_%a.txt",
                          f"--squash-image={d}/img_%a.sqfs:/squash/data", script],
                  cwd=d, timeout=60)
    assert p.returncode == 0, p.stderr
    array_id = int(p.stdout.strip().split(";")[0])

    def ended():
        s = task_states(c, array_id)
        return s if len(s) == 2 and all(v in ("COMPLETED", "FAILED") for v in s.values()) else None
    states = wait_until(ended, 120, 0.3, f"the tasks of array {array_id} to end")
    outputs = {k: (d / f"out_{k}.txt").read_text() for k in (1, 2)}
    assert states == {1: "COMPLETED", 2: "COMPLETED"}, (states, outputs)
    for k in (1, 2):
        lines = sorted(outputs[k].splitlines())
        assert len(lines) == 2, outputs[k]
        hosts = {line.split()[0] for line in lines}
        assert len(hosts) == 2 and hosts <= {"n1", "n2", "n3"}, outputs[k]
        assert all(line.endswith(f" dataset {k}") for line in lines), outputs[k]
    wait_until(lambda: not c.squeue_ids(), 30, 0.2, "the array to leave the queue")
