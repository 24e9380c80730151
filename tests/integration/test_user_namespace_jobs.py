"""Jobs in a user namespace of their own (conftest's cluster_userns:
namespace/linux with CLONE_NEWUSER, Slurm 25.11 on). Their slurmstepd may
not enter squashd's mount namespace, so the node's mounts cannot be bound
into their tasks: a job with an image fails, saying why, instead of running
on with empty directories where its images should be; jobs without images
run, and the node stays up (spank/node_mounts.c)."""

import os

from conftest import USER1

FILES = {"a.txt": "from the image\n"}


def test_a_job_with_an_image_fails_saying_why(cluster_userns):
    c = cluster_userns
    img = c.make_image(c.workdir(USER1, "img") / "userns.sqfs", FILES, owner=USER1)
    job = c.run_job(USER1, "cat /squash/userns/a.txt\n", [f"--squash-image={img}"])
    out = job.output()
    assert job.state == "FAILED", out
    assert "runs in a user namespace of its own" in out, out
    assert "from the image" not in out, out
    assert all(s in ("idle", "mixed") for s in c.node_states().values()), c.node_states()


def test_a_job_without_images_runs(cluster_userns):
    c = cluster_userns
    job = c.run_job(USER1, "readlink /proc/self/ns/user\n", [])
    out = job.output()
    assert job.state == "COMPLETED", out
    # The job really runs in a user namespace of its own.
    assert out.startswith("user:[") and out.strip() != os.readlink("/proc/self/ns/user"), out
