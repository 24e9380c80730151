"""squashd under load: bursts of job starts on one image and on many, a
squashd restart in the middle of a burst, and the largest image list the
option allows. Every job must complete and read its image; the autouse
leak check then finds nothing left."""

import os
import re

import pytest

from conftest import USER1, USER2, Job, run, wait_until

FILES = {"hello.txt": "hello under load\n"}


def submit_held(cluster, user, body, args, name="burst"):
    """Submits a held job (so that a burst can be released at once)."""
    d = cluster.workdir(user, name)
    job = cluster.sbatch(user, cluster.write_script(d, body), ["-H", *args], cwd=d)
    assert isinstance(job, Job), f"sbatch refused the job:\n{job.stderr}"
    return job


def release_all(cluster, jobs):
    run(["scontrol", "release", ",".join(str(j.id) for j in jobs)], env=cluster.env)


def assert_all_read(jobs, expected_of):
    """Every job completed and printed expected_of(its index)."""
    for job in jobs:
        job.wait(timeout=180)
    failed = [(j.id, j.state, j.output()) for j in jobs if j.state != "COMPLETED"]
    assert not failed, f"{len(failed)} of {len(jobs)} jobs did not complete: {failed[:3]}"
    for i, job in enumerate(jobs):
        assert job.output() == expected_of(i), (job.id, job.output())


def test_32_jobs_at_once_on_one_image_share_one_mount(cluster):
    d = cluster.workdir(USER1, "img")
    img = cluster.make_image(d / "one.sqfs", FILES, owner=USER1)
    jobs = [submit_held(cluster, USER1, 'echo "$SQUASH_MOUNT"; cat "$SQUASH_MOUNT/hello.txt"\n',
                        [f"--squash-image={img}"]) for _ in range(32)]
    release_all(cluster, jobs)
    assert_all_read(jobs, lambda i: "/squash/one\n" + FILES["hello.txt"])
    log = cluster.squashd_log()
    # One mount for all of them (each mount logs one line), made once.
    assert len(re.findall(r"mounted image " + re.escape(str(img)) + " at", log)) == 1, log[-3000:]


@pytest.mark.host_release_only("squashd's own concurrency: one burst of 32 jobs runs on every release")
def test_32_jobs_at_once_on_distinct_images(cluster):
    jobs = []
    for i in range(32):
        user = USER1 if i % 2 == 0 else USER2
        d = cluster.workdir(user, "img")
        img = cluster.make_image(d / f"d{i}.sqfs", {"hello.txt": f"image {i}\n"}, owner=user)
        jobs.append(submit_held(cluster, user, 'echo "$SQUASH_MOUNT"; cat "$SQUASH_MOUNT/hello.txt"\n',
                                [f"--squash-image={img}"]))
    release_all(cluster, jobs)
    assert_all_read(jobs, lambda i: f"/squash/d{i}\nimage {i}\n")


@pytest.mark.host_release_only("squashd's own restart under load: the same on every release")
def test_squashd_restart_during_a_burst_fails_no_job(cluster):
    d = cluster.workdir(USER1, "img")
    img = cluster.make_image(d / "restart.sqfs", FILES, owner=USER1)
    jobs = [submit_held(cluster, USER1, 'cat "$SQUASH_MOUNT/hello.txt"; srun cat "$SQUASH_MOUNT/hello.txt"\n',
                        [f"--squash-image={img}"]) for _ in range(20)]
    old = cluster.squashd_pid()
    seen = len(cluster.squashd_log())
    release_all(cluster, jobs)
    # Kill it hard while prologs are arriving, and bring it back.
    wait_until(lambda: "ready for uid" in cluster.squashd_log()[seen:], 30, 0.02,
               "the burst to reach squashd")
    os.kill(old, 9)
    wait_until(lambda: not os.path.exists(f"/proc/{old}"), 10, what="squashd to die")
    cluster.cluster_sh("squashd-start")
    assert_all_read(jobs, lambda i: FILES["hello.txt"] * 2)


def test_sixteen_images_with_long_paths(cluster):
    """Sixteen images with the longest paths; all reach the job."""
    base = cluster.workdir(USER1, "long")
    # Nested directories: each image path is about 1500 bytes long.
    deep = base
    for k in range(6):
        deep = deep / (f"level{k}-" + "x" * 240)
    os.makedirs(deep)
    run(["chown", "-R", USER1, base])
    names = []
    for i in range(16):
        img = cluster.make_image(deep / f"img{i:02d}.sqfs", {"n.txt": f"{i}\n"}, owner=USER1)
        names.append(str(img))
    assert all(len(n) > 1450 for n in names)
    option = ",".join(names)
    assert len(option) > 16 * 1450
    job = cluster.run_job(USER1, 'for t in $(echo "$SQUASH_MOUNTS" | tr : " "); do cat "$t/n.txt"; done\n'
                                 'srun bash -c \'cat /squash/img15/n.txt\'\n',
                          [f"--squash-image={option}"])
    assert job.state == "COMPLETED", job.output()
    assert job.output() == "".join(f"{i}\n" for i in range(16)) + "15\n"
