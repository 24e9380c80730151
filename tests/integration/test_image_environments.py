"""Image environments: an image's /.squash/meta names environments
(variables to set, paths below the mount point to prepend); every task of
a job (the batch script and each task of an srun step) gets the image's
default-env, --squash-env=NAME picks others (srun's own replacing the
job's), none picks none; an environment no image defines, or one setting
what an image may not (SLURM_*, or LD_* from a default-env), fails the job
with the reason in its output and leaves the node up. A uenv image's views
(its meta/env.json) are environments too, and `squash-images activate`
applies environments in a shell that is already running."""

import pytest

from conftest import BUILD, USER1

SQUASH_IMAGES = BUILD / "daemon" / "squash-images"

META = """\
# as squash-pack writes it
format 1
name tool
version 1.0
target /squash/tool
default-env default
env default prepend-path PATH bin
env default set TOOL_GREETING hello from the image
env dev set TOOL_MODE dev
env dev prepend-path PATH devbin
env loader prepend-path LD_LIBRARY_PATH lib
env slurmy set SLURM_JOB_ID 1
"""

# The option reaches the steps as --squash-image does (tested in every
# release), and slurmstepd runs slurm_spank_task_init before it looks the
# program up in the task's PATH in every release supported (23.11 to 26.05).
pytestmark = pytest.mark.host_release_only("the plugin's own code on Slurm's option path")


def tool_image(c, d):
    return c.make_image(d / "tool.sqfs", {
        ".squash/meta": META,
        "bin/mytool.sh": "#!/bin/sh\necho mytool from bin\n",
        "devbin/mytool.sh": "#!/bin/sh\necho mytool from devbin\n",
    }, owner=USER1)


def test_image_environments_reach_every_task_and_bad_ones_fail_the_job(cluster):
    c = cluster
    d = c.workdir(USER1, "env")
    img = tool_image(c, d)

    # Refused at submission, before anything runs.
    p = c.sbatch(USER1, c.write_script(d, "true\n", "nothing.sh"), ["--squash-env=dev"])
    assert p.returncode != 0 and "--squash-env=dev: the job or step has no images" in p.stderr, p
    p = c.sbatch(USER1, c.write_script(d, "true\n", "badname.sh"),
                 [f"--squash-image={img}", "--squash-env=dev,1x"])
    assert p.returncode != 0 and "'1x' is not an environment name" in p.stderr, p.stderr

    # A merged target is one tree with one /.squash/meta: the later image's.
    merged = [c.make_image(d / f"part{i}.sqfs", {
        f"part{i}": "x\n",
        ".squash/meta": f"format 1\ndefault-env d\nenv d set DATA_FROM part{i}\n"}, owner=USER1)
        for i in (1, 2)]

    # 1. The default-env in the batch script and in both tasks of a step;
    # srun's own --squash-env for one step; loader variables by name only.
    job = c.run_job(USER1, """
echo "MERGED DATA_FROM=$DATA_FROM $(ls /squash/data | tr '\\n' ' ')"
echo "BATCH first=${PATH%%:*} G=$TOOL_GREETING $(mytool.sh)"
echo "BATCH ENVS=$SQUASH_ENVS"
srun -n2 bash -c 'echo "TASK$SLURM_PROCID first=${PATH%%:*} G=$TOOL_GREETING $(mytool.sh)"' | sort
srun -n1 --squash-env=dev bash -c 'echo "DEV M=$TOOL_MODE G=${TOOL_GREETING-unset} $(mytool.sh) ENVS=$SQUASH_ENVS"'
srun -n1 --squash-env=tool:dev,data:d bash -c 'echo "IMGDEV M=$TOOL_MODE ENVS=$SQUASH_ENVS"'
srun -n1 mytool.sh
srun -n2 bash -c 'echo "AGAIN$SLURM_PROCID PATH=$PATH"' | sort -u
# A step inherits the script's environment; none adds nothing to it.
SRUN=$(command -v srun)
env -u TOOL_GREETING PATH=/usr/bin:/bin "$SRUN" -n1 --squash-env=none bash -c 'echo "NONE G=${TOOL_GREETING-unset} PATH=$PATH"'
srun -n1 --squash-env=loader bash -c 'echo "LOADER L=$LD_LIBRARY_PATH"'
srun -n1 --squash-env=slurmy bash -c 'echo "SLURMY ran"'
echo "SLURMY rc=$?"
""", [f"--squash-image={img},{merged[0]}:/squash/data,{merged[1]}:/squash/data", "-n2"])
    out = job.output()
    assert "MERGED DATA_FROM=part2 part1 part2 \n" in out, out
    assert job.state == "COMPLETED", out
    assert "BATCH first=/squash/tool/bin G=hello from the image mytool from bin\n" in out, out
    for t in (0, 1):
        assert f"TASK{t} first=/squash/tool/bin G=hello from the image mytool from bin\n" in out, out
    # slurmstepd finds a step's program in the PATH the environment made.
    assert out.count("mytool from bin\n") == 4, out
    assert "DEV M=dev G=hello from the image mytool from devbin ENVS=/squash/tool:dev\n" in out, out
    # IMAGE:NAME: that image's environment only (as uenv's --view=IMAGE:VIEW).
    assert "IMGDEV M=dev ENVS=/squash/tool:dev,/squash/data:d\n" in out, out
    # Which environments the task got (as uenv's UENV_VIEW).
    assert "BATCH ENVS=/squash/tool:default,/squash/data:d\n" in out, out
    assert "NONE G=unset PATH=/usr/bin:/bin\n" in out, out
    # Applied again in a step that inherits the script's PATH: not repeated.
    again = [l for l in out.splitlines() if l.startswith("AGAIN")]
    assert len(again) == 2 and all(l.count("/squash/tool/bin") == 1 for l in again), out
    assert "LOADER L=/squash/tool/lib\n" in out, out
    # Named or not, an image never sets Slurm's variables: the step fails.
    assert "SLURMY ran" not in out, out
    assert ("/squash/tool/.squash/meta: line 12: environment slurmy sets SLURM_JOB_ID: "
            "Slurm's variables (SLURM_*, SPANK_*) are not an image's to set") in out, out
    assert "SLURMY rc=0" not in out, out
    assert out.count("environment slurmy sets") == 1, out  # once, not logged again

    # 2. An environment no image defines fails the job, naming what exists.
    job = c.run_job(USER1, "echo should not run\n", [f"--squash-image={img}", "--squash-env=nosuch"])
    out = job.output()
    assert job.state == "FAILED", out
    assert "should not run" not in out, out
    assert (f"squash: job {job.id}: --squash-env=nosuch: no image of this step defines the "
            "environment nosuch (the images' environments: /squash/tool (default, dev, loader, "
            "slurmy))") in out, out
    assert c.node_state() == "idle"

    # 3. A default-env may not set loader variables: only a name given by
    # the user may.
    bad = c.make_image(d / "preload.sqfs", {
        ".squash/meta": "format 1\ndefault-env run\nenv run set LD_PRELOAD /tmp/x.so\n",
    }, owner=USER1)
    job = c.run_job(USER1, "echo should not run\n", [f"--squash-image={bad}"])
    out = job.output()
    assert job.state == "FAILED", out
    assert "should not run" not in out, out
    assert ("/squash/preload/.squash/meta: line 3: environment run sets LD_PRELOAD: loader "
            "variables (LD_*) are applied only from an environment you name (--squash-env; "
            "squash-shell --env), not from an image's default-env") in out, out
    assert c.node_state() == "idle"


# What a uenv image holds: no /.squash/meta, its views in /meta/env.json,
# paths written for the mount point it was built for.
UENV_META = """\
{"name": "gnu", "description": "a uenv-built stack", "mount": "/user-environment",
 "views": {
  "default": {"root": "/user-environment/env/default", "env": {"version": 1, "type": "spack-view",
   "values": {"list": {"PATH": [{"op": "prepend", "value": ["/user-environment/env/default/bin"]}]},
              "scalar": {"GNU_ROOT": "/user-environment/env/default", "GNU_GONE": null}}}},
  "develop-gpu": {"env": {"version": 1, "type": "augment",
   "values": {"list": {}, "scalar": {"GNU_MODE": "gpu"}}}},
  "modules": {"activate": "/user-environment/modules/activate.sh", "root": "/user-environment/modules"}
 }}
"""


def test_a_uenv_images_views_apply_by_name_and_in_a_running_shell(cluster):
    c = cluster
    d = c.workdir(USER1, "uenv")
    img = c.make_image(d / "gnu.sqfs", {
        "meta/env.json": UENV_META,
        "env/default/bin/gnu-tool.sh": "#!/bin/sh\necho gnu-tool from the view\n",
    }, owner=USER1)

    # As uenv, no view unless named; --squash-env=VIEW as --view=VIEW, its
    # paths at the target the image is seen at; a view with only an
    # activation script is refused, naming why.
    tool = tool_image(c, d)
    images = c.for_user(USER1, SQUASH_IMAGES)
    job = c.run_job(USER1, f"""
export GNU_GONE=still-here
IMAGES={images}
"""  + """
echo "PLAIN first=${PATH%%:*} ENVS=[$SQUASH_ENVS]"
# In the running shell, as uenv's `uenv view`: eval what activate prints.
eval "$($IMAGES activate gnu:develop-gpu,tool:dev)"
echo "ACTIVE M=$GNU_MODE T=$TOOL_MODE $(mytool.sh) ENVS=$SQUASH_ENVS"
out=$($IMAGES activate nosuch)
echo "NOSUCH rc=$? out=$out"
out=$($IMAGES activate none)
echo "NONE rc=$? out=$out"
srun -n1 --squash-env=gnu:default bash -c 'echo "VIEW first=${PATH%%:*} R=$GNU_ROOT G=${GNU_GONE-unset} $(gnu-tool.sh) ENVS=$SQUASH_ENVS"'
srun -n1 --squash-env=gnu:develop-gpu bash -c 'echo "DEV M=$GNU_MODE ENVS=$SQUASH_ENVS"'
srun -n1 --squash-env=modules true
echo "MODULES rc=$?"
""", [f"--squash-image={img},{tool}"])
    out = job.output()
    # The packed image's default-env applies, the uenv image's nothing.
    assert "PLAIN first=/squash/tool/bin ENVS=[/squash/tool:default]\n" in out, out
    assert ("VIEW first=/squash/gnu/env/default/bin R=/squash/gnu/env/default G=unset "
            "gnu-tool from the view ENVS=/squash/gnu:default\n") in out, out
    assert "DEV M=gpu ENVS=/squash/gnu:develop-gpu\n" in out, out
    # tool's default-env was applied at the start; activate adds to it.
    assert ("ACTIVE M=gpu T=dev mytool from devbin "
            "ENVS=/squash/tool:default,/squash/gnu:develop-gpu,/squash/tool:dev\n") in out, out
    assert "NOSUCH rc=1 out=false\n" in out, out
    assert "NONE rc=2 out=false\n" in out, out
    assert ("squash-images: activate=nosuch: no image here defines the environment nosuch (the "
            "images' environments: /squash/gnu (default, develop-gpu, modules), /squash/tool ") in out, out
    assert ("/squash/gnu/meta/env.json: environment modules cannot be applied: it has only an "
            "activation script") in out, out
    assert "MODULES rc=0" not in out, out
    # Seen away from where it was built: said once per step (the batch
    # step and three srun steps) and by each activate, with what to do.
    assert out.count("squash: note: the image at /squash/gnu was built for /user-environment "
                     "(its meta/env.json)") == 6, out
    assert c.node_state() == "idle"
