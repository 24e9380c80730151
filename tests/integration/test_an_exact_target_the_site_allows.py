"""A site may allow a directory itself as a target, not only what lies
below a prefix: allowed_targets' "=DIR" items (squashd.conf and the
plugin's plugstack.conf line alike), for images built for one place, such
as uenv's /user-environment. A job mounts an image at that directory (which
the site makes on every node); below it and beside it are refused at
submission, naming the list (proto/target.c)."""

import contextlib
import re

import pytest

from conftest import USER1

pytestmark = pytest.mark.host_release_only("the target policy is the plugin's and squashd's own")


@contextlib.contextmanager
def allowed_targets_too(cluster, item):
    """item added to allowed_targets in plugstack.conf and squashd.conf
    (squashd restarted) for the block."""
    plugstack, conf = cluster.dir / "plugstack.conf", cluster.dir / "squashd.conf"
    originals = plugstack.read_text(), conf.read_text()
    try:
        cluster.cluster_sh("squashd-stop")
        plugstack.write_text(re.sub(r"\ballowed_targets=(\S+)", rf"allowed_targets=\1:{item}", originals[0]))
        conf.write_text(re.sub(r"(?m)^allowed_targets = (.*)$", rf"allowed_targets = \1:{item}", originals[1]))
        cluster.cluster_sh("squashd-start")
        yield
    finally:
        cluster.cluster_sh("squashd-stop")
        plugstack.write_text(originals[0])
        conf.write_text(originals[1])
        cluster.cluster_sh("squashd-start")


def test_a_job_mounts_an_image_at_an_exact_target_and_nothing_below_it(cluster):
    c = cluster
    d = c.workdir(USER1, "exact")
    img = c.make_image(d / "stack.sqfs", {"env.json": "{\"views\": {}}\n"}, owner=USER1)
    exact = c.dir / "user-environment"
    exact.mkdir(mode=0o755, exist_ok=True)
    try:
        with allowed_targets_too(c, f"={exact}"):
            assert f"={exact}" in c.squashctl("status").stdout
            job = c.run_job(USER1, f"cat {exact}/env.json\ngrep -c ' {exact} ' /proc/self/mountinfo\n",
                            [f"--squash-image={img}:{exact}"])
            out = job.output()
            assert job.state == "COMPLETED", out
            assert out.splitlines() == ['{"views": {}}', "1"], out
            for bad in (f"{exact}/sub", f"{exact}-2"):
                err = c.sbatch_refuses(USER1, f"{img}:{bad}")
                assert f"target '{bad}' is not below an allowed prefix (" in err, err
                assert f":={exact})" in err, err
        # Without the item: refused again.
        err = c.sbatch_refuses(USER1, f"{img}:{exact}")
        assert "is not below an allowed prefix" in err, err
    finally:
        exact.rmdir()
