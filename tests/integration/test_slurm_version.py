"""The plugin says which Slurm it was built for when it loads: in the logs
of slurmd/slurmstepd (info), never on the user's terminal (debug there)."""

import re
from pathlib import Path

from conftest import USER1, Job, package_version, run

FILES = {"hello.txt": "hello from the image\n"}


def built_for():
    """The Slurm version of the headers this build used, as configure
    printed it."""
    num = int(re.search(r"^#define SLURM_VERSION_NUMBER (0x[0-9a-fA-F]+)",
                        Path("/usr/include/slurm/slurm_version.h").read_text(), re.M).group(1), 16)
    return f"{num >> 16}.{(num >> 8) & 255:02d}.{num & 255}"


def test_plugin_logs_the_slurm_it_was_built_for_in_slurmd_logs_only(cluster):
    line = f"spank_squash {package_version()} built for Slurm {built_for()}, protocol 2"
    d = cluster.workdir(USER1, "img")
    img = cluster.make_image(d / "ver.sqfs", FILES, owner=USER1)
    job = cluster.sbatch(USER1, cluster.write_script(d, "cat /squash/ver/hello.txt\n"),
                         [f"--squash-image={img}"])
    assert isinstance(job, Job), job.stderr
    assert "built for Slurm" not in job.submit.stderr, job.submit.stderr
    job.wait()
    assert job.state == "COMPLETED", job.output()
    assert "built for Slurm" not in job.output()
    logs = "".join(p.read_text(errors="replace") for p in (cluster.dir / "log").glob("slurmd*.log"))
    assert line in logs, f"{line!r} not in the slurmd logs"
