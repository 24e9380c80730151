"""A bad spank_squash line in plugstack.conf (an admin's mistake) fails
only the jobs that ask for images, with the reason in their output, at
submit where sbatch reads it and in the job where the node does; jobs
without images run and the node stays up, on every Slurm release (the
plugin never fails slurm_spank_init in a job: that would drain the node
before 25.05 and fail every job on it from 25.05 on). The same for the
plugin named twice; slurmd, which only then fails to start, is checked in
the guests (tests/node, case double_load)."""

import re

import pytest

from conftest import USER1, Job, run


def test_bad_plugstack_line_fails_only_image_jobs_and_not_the_node(cluster):
    c = cluster
    d = c.workdir(USER1, "badconf")
    img = c.make_image(d / "badconf.sqfs", {"x": "x\n"}, owner=USER1)
    conf = c.dir / "plugstack.conf"
    original = conf.read_text()
    with_image = c.sbatch(USER1, c.write_script(d, "cat /squash/badconf/x\n", "with.sh"),
                          [f"--squash-image={img}", "--hold"])
    without = c.sbatch(USER1, c.write_script(d, "echo plain job ran\n", "without.sh"), ["--hold"])
    try:
        # The node reads plugstack.conf again for the prolog and each step:
        # both jobs start only after the bad line is in place.
        conf.write_text(re.sub(r"\btimeout=\d+", "timeout=forever", original))
        run(["scontrol", "release", f"{with_image.id},{without.id}"], env=c.env)
        with_image.wait()
        without.wait()
        refused = c.as_user(USER1, ["sbatch", f"--squash-image={img}", d / "with.sh"], cwd=d)
        plain = c.as_user(USER1, ["sbatch", "--parsable", "-o", d / "late.out", d / "without.sh"], cwd=d)
        states = c.node_states()
    finally:
        conf.write_text(original)
    out = with_image.output()
    assert with_image.state == "FAILED", out
    assert "plugstack.conf line for spank_squash is invalid" in out, out
    assert "timeout" in out and "forever" in out, out
    assert without.state == "COMPLETED", without.output()
    assert "plain job ran" in without.output()
    assert refused.returncode != 0, refused.stdout
    assert "plugstack.conf line for spank_squash is invalid" in refused.stderr, refused.stderr
    assert plain.returncode == 0, plain.stderr
    assert all(s in ("idle", "mixed", "allocated") for s in states.values()), states
    late = Job(c, int(plain.stdout.strip().split(";")[0]), d / "late.out", plain)
    late.wait()
    assert late.state == "COMPLETED", late.output()


@pytest.mark.host_release_only("Slurm's plugin loader keeps both lines on every release (22.05 to 26.05); "
                               "slurmd's refusal to start is checked in the guests, tests/node")
def test_plugin_named_twice_refuses_images_with_the_fix_and_runs_other_jobs(cluster):
    """The packaged plugstack.conf.d snippet included and the plugin's own
    `required` line in plugstack.conf (docs/admin.md, "Configure Slurm"):
    Slurm loads the same .so for both lines. Jobs with images are refused
    with what to remove, at submit and in the job; plain jobs run."""
    c = cluster
    d = c.workdir(USER1, "twice")
    img = c.make_image(d / "twice.sqfs", {"x": "x\n"}, owner=USER1)
    conf = c.dir / "plugstack.conf"
    original = conf.read_text()
    snippet_dir = c.dir / "plugstack.conf.d"
    snippet_dir.mkdir(exist_ok=True)
    (snippet_dir / "squash.conf").write_text(original)
    with_image = c.sbatch(USER1, c.write_script(d, "cat /squash/twice/x\n", "with.sh"),
                          [f"--squash-image={img}", "--hold"])
    try:
        conf.write_text(f"include {snippet_dir}/*.conf\n" + original)
        run(["scontrol", "release", str(with_image.id)], env=c.env)
        with_image.wait()
        refused = c.as_user(USER1, ["sbatch", f"--squash-image={img}", d / "with.sh"], cwd=d)
        plain = c.run_job(USER1, "echo plain job ran\n")
        states = c.node_states()
    finally:
        conf.write_text(original)
        (snippet_dir / "squash.conf").unlink()
    out = with_image.output()
    assert with_image.state == "FAILED", out
    for text in (out, refused.stderr):
        assert "spank_squash.so is loaded twice" in text, text
        assert "remove one of them" in text and "Ask your administrator" in text, text
    assert refused.returncode != 0, refused.stdout
    assert plain.state == "COMPLETED" and "plain job ran" in plain.output(), plain.output()
    assert all(s in ("idle", "mixed", "allocated") for s in states.values()), states
