"""Default images from the environment, as Slurm's own input variables work:
sbatch reads SBATCH_SQUASH_IMAGE, salloc SALLOC_SQUASH_IMAGE, srun
SLURM_SQUASH_IMAGE (only when it makes its own allocation); the command
line wins, a #SBATCH line loses, and a bad value is refused at submit
naming the variable."""

from conftest import USER1, Job, wait_until

SHOW = 'shopt -s nullglob\necho "MOUNTS=$SQUASH_MOUNTS"\nfor f in /squash/*/which; do cat "$f"; done\n'


def images(cluster):
    d = cluster.workdir(USER1, "img")
    a = cluster.make_image(d / "enva.sqfs", {"which": "from enva\n"}, owner=USER1)
    b = cluster.make_image(d / "envb.sqfs", {"which": "from envb\n"}, owner=USER1)
    return a, b


def sbatch_with_env(cluster, env, body, args=(), directives=""):
    """sbatch as USER1 with extra environment variables; returns the ended
    Job, or the refused CompletedProcess."""
    d = cluster.workdir(USER1, "env")
    script = d / "job.sh"
    script.write_text("#!/bin/bash\n" + directives + body)
    script.chmod(0o755)
    out = d / "job.out"
    p = cluster.as_user(USER1, ["env", *[f"{k}={v}" for k, v in env.items()],
                                "sbatch", "--parsable", "-o", out, *args, script],
                        cwd=d, timeout=60)
    if p.returncode != 0:
        return p
    job = Job(cluster, int(p.stdout.strip().split(";")[0]), out, p)
    job.wait()
    return job


def test_sbatch_reads_SBATCH_SQUASH_IMAGE(cluster):
    a, _ = images(cluster)
    job = sbatch_with_env(cluster, {"SBATCH_SQUASH_IMAGE": a},
                          SHOW + "srun cat /squash/enva/which\n")
    assert isinstance(job, Job), job.stderr
    out = job.output()
    assert job.state == "COMPLETED", out
    # The batch step and an srun step both get it, as if given as an option.
    assert out == "MOUNTS=/squash/enva\nfrom enva\nfrom enva\n", out


def test_command_line_wins_and_directive_loses(cluster):
    a, b = images(cluster)
    job = sbatch_with_env(cluster, {"SBATCH_SQUASH_IMAGE": a}, SHOW,
                          [f"--squash-image={b}"])
    assert isinstance(job, Job), job.stderr
    assert job.state == "COMPLETED", job.output()
    assert job.output() == "MOUNTS=/squash/envb\nfrom envb\n"
    # As with Slurm's SBATCH_* variables, the environment beats #SBATCH.
    job = sbatch_with_env(cluster, {"SBATCH_SQUASH_IMAGE": a}, SHOW,
                          directives=f"#SBATCH --squash-image={b}\n")
    assert isinstance(job, Job), job.stderr
    assert job.state == "COMPLETED", job.output()
    assert job.output() == "MOUNTS=/squash/enva\nfrom enva\n"


def test_bad_value_refused_naming_the_variable(cluster):
    d = cluster.workdir(USER1, "img")
    missing = d / "missing.sqfs"
    p = sbatch_with_env(cluster, {"SBATCH_SQUASH_IMAGE": missing}, "echo should not run\n")
    assert not isinstance(p, Job), p.output()
    assert f"squash: {missing}: No such file or directory" in p.stderr, p.stderr
    assert ("squash: the images came from SBATCH_SQUASH_IMAGE in the environment; "
            "correct or unset it, or give --squash-image on the command line") in p.stderr
    assert cluster.squeue_ids() == []
    # A good option on the command line overrides the bad default.
    _, b = images(cluster)
    job = sbatch_with_env(cluster, {"SBATCH_SQUASH_IMAGE": missing}, SHOW,
                          [f"--squash-image={b}"])
    assert isinstance(job, Job), job.stderr
    assert job.output() == "MOUNTS=/squash/envb\nfrom envb\n"


def test_each_command_reads_only_its_own_variable(cluster):
    a, b = images(cluster)
    # sbatch ignores srun's and salloc's variables.
    job = sbatch_with_env(cluster, {"SLURM_SQUASH_IMAGE": a, "SALLOC_SQUASH_IMAGE": a},
                          SHOW)
    assert isinstance(job, Job), job.stderr
    assert job.state == "COMPLETED", job.output()
    assert job.output() == "MOUNTS=\n"


def test_salloc_and_srun_variables(cluster):
    a, b = images(cluster)
    d = cluster.workdir(USER1, "inter")
    # srun making its own allocation reads SLURM_SQUASH_IMAGE.
    p = cluster.as_user(USER1, ["env", f"SLURM_SQUASH_IMAGE={a}", "srun", "cat",
                                "/squash/enva/which"], cwd=d, timeout=90)
    assert p.returncode == 0, p.stderr
    assert p.stdout == "from enva\n"
    # salloc reads SALLOC_SQUASH_IMAGE; srun inside the allocation ignores
    # SLURM_SQUASH_IMAGE (the allocation's images were fixed by salloc).
    p = cluster.as_user(USER1, ["env", f"SALLOC_SQUASH_IMAGE={a}", f"SLURM_SQUASH_IMAGE={b}",
                                "salloc", "srun", "bash", "-c", SHOW], cwd=d, timeout=90)
    assert p.returncode == 0, p.stderr
    assert p.stdout == "MOUNTS=/squash/enva\nfrom enva\n", (p.stdout, p.stderr)
    wait_until(lambda: not cluster.squeue_ids(), 30, 0.2, "the allocation to end")
    # A bad SLURM_SQUASH_IMAGE is refused by srun, naming it.
    p = cluster.as_user(USER1, ["env", f"SLURM_SQUASH_IMAGE={d}/nope.sqfs", "srun", "true"],
                        cwd=d, timeout=90)
    assert p.returncode != 0
    assert "squash: the images came from SLURM_SQUASH_IMAGE in the environment" in p.stderr, \
        p.stderr
    assert cluster.squeue_ids() == []


def test_srun_in_a_batch_job_ignores_SLURM_SQUASH_IMAGE(cluster):
    a, b = images(cluster)
    job = sbatch_with_env(cluster, {"SLURM_SQUASH_IMAGE": b},
                          "srun bash -c '" + SHOW.replace("'", "'\\''") + "'\n",
                          [f"--squash-image={a}"])
    assert isinstance(job, Job), job.stderr
    out = job.output()
    assert job.state == "COMPLETED", out
    assert out == "MOUNTS=/squash/enva\nfrom enva\n", out


def test_sbatch_reads_SBATCH_SQUASH_ENV_and_a_job_without_images_ignores_it(cluster):
    d = cluster.workdir(USER1, "img")
    img = cluster.make_image(d / "envtool.sqfs", {
        "which": "from envtool\n",
        ".squash/meta": "format 1\ndefault-env default\nenv default set MODE plain\n"
                        "env dev set MODE dev\n"}, owner=USER1)
    body = 'echo "MODE=${MODE-unset} ENVS=${SQUASH_ENVS-unset}"\n'
    # Applied as --squash-env=dev would be, to the batch step and its steps.
    job = sbatch_with_env(cluster, {"SBATCH_SQUASH_IMAGE": img, "SBATCH_SQUASH_ENV": "dev"},
                          body + "srun bash -c '" + body.replace("'", "'\\''") + "'\n")
    assert isinstance(job, Job), job.stderr
    assert job.state == "COMPLETED", job.output()
    assert job.output() == "MODE=dev ENVS=/squash/envtool:dev\n" * 2, job.output()
    # A job without images runs as if it were not set (a login profile's
    # default for every job).
    job = sbatch_with_env(cluster, {"SBATCH_SQUASH_ENV": "dev"}, body)
    assert isinstance(job, Job), job.stderr
    assert job.state == "COMPLETED", job.output()
    assert job.output() == "MODE=unset ENVS=unset\n", job.output()
    # A bad one is refused at submission, naming it; the command line wins.
    p = sbatch_with_env(cluster, {"SBATCH_SQUASH_ENV": "1x"}, body, [f"--squash-image={img}"])
    assert not isinstance(p, Job), p.output()
    assert ("'1x' is not an environment name" in p.stderr and
            "(from SBATCH_SQUASH_ENV in the environment; correct or unset it, or give "
            "--squash-env on the command line)" in p.stderr), p.stderr
    job = sbatch_with_env(cluster, {"SBATCH_SQUASH_ENV": "1x"}, body,
                          [f"--squash-image={img}", "--squash-env=none"])
    assert isinstance(job, Job), job.stderr
    assert job.output() == "MODE=unset ENVS=unset\n", job.output()
