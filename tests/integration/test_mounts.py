"""Jobs get their squashfs images mounted, privately, shared per node, with
early and clear errors."""

import os
import pwd
import re

import pytest

from conftest import (USER1, USER2, BlockingJob, blocking_jobs, mountinfo, run,
                      wait_until)

SOFTWARE = {
    "hello.txt": "hello from the image\n",
    "bin/tool.sh": "#!/bin/sh\necho tool ran from $(dirname \"$0\")\n",
    "share/data.csv": "a,b\n1,2\n",
}


def image_of(cluster, user, name="stack.sqfs", files=SOFTWARE, mode=0o644, d=None):
    d = d or cluster.workdir(user, "img")
    return cluster.make_image(d / name, files, owner=user, mode=mode)


def test_batch_and_srun_step_see_the_image(cluster):
    img = image_of(cluster, USER1)
    job = cluster.run_job(USER1, r"""
echo "MOUNT=$SQUASH_MOUNT"
echo "MOUNTS=$SQUASH_MOUNTS"
echo "IMAGES=$SQUASH_IMAGES"
cat "$SQUASH_MOUNT/hello.txt"
"$SQUASH_MOUNT/bin/tool.sh"
srun bash -c 'echo "STEP MOUNT=$SQUASH_MOUNT IMAGES=$SQUASH_IMAGES"; cat "$SQUASH_MOUNT/share/data.csv"'
""", [f"--squash-image={img}"])
    out = job.output()
    assert job.state == "COMPLETED", out
    assert "MOUNT=/squash/stack\n" in out
    assert "MOUNTS=/squash/stack\n" in out
    assert f"IMAGES={img}\n" in out
    assert "hello from the image\n" in out
    assert "tool ran from /squash/stack/bin" in out
    assert f"STEP MOUNT=/squash/stack IMAGES={img}\n" in out
    assert "a,b\n1,2\n" in out


def test_two_images_at_two_targets(cluster):
    d = cluster.workdir(USER1, "img")
    a = cluster.make_image(d / "tools.squashfs", {"which": "tools\n"}, owner=USER1)
    b = cluster.make_image(d / "data.sqsh", {"which": "data\n"}, owner=USER1)
    target_b = cluster.targets / "data2"
    target_b.mkdir(exist_ok=True)
    job = cluster.run_job(USER1, r"""
echo "MOUNTS=$SQUASH_MOUNTS"
echo "MOUNT=$SQUASH_MOUNT"
echo "IMAGES=$SQUASH_IMAGES"
cat /squash/tools/which
cat """ + str(target_b) + r"""/which
srun cat /squash/tools/which """ + str(target_b) + "/which\n",
                          [f"--squash-image={a},{b}:{target_b}"])
    out = job.output()
    assert job.state == "COMPLETED", out
    assert f"MOUNTS=/squash/tools:{target_b}\n" in out
    assert "MOUNT=/squash/tools\n" in out
    assert f"IMAGES={a},{b}\n" in out
    assert out.count("tools\n") >= 2 and out.count("data\n") >= 2, out


def test_target_only_in_the_job_namespace(cluster):
    img = image_of(cluster, USER1, "private.sqfs")
    blk = BlockingJob(cluster, USER1, img, after="cat /squash/private/hello.txt")
    try:
        pid = blk.wait_ready()
        # The job itself sees its target ...
        job_mps = [m["mount_point"] for m in mountinfo(pid)]
        assert "/squash/private" in job_mps
        # ... the host (this process, and PID 1) does not.
        for who in ("self", "1"):
            mps = [m["mount_point"] for m in mountinfo(who)]
            assert "/squash/private" not in mps, who
            assert not [m for m in mps if m == "/squash" or m.startswith("/squash/")], who
        # The host only holds the node-level mount in squashd's private dir.
        assert len(cluster.node_mounts()) == 1
        assert not os.path.exists("/squash/private/hello.txt")
    finally:
        blk.release()
    assert blk.job.state == "COMPLETED", blk.job.output()
    assert "hello from the image\n" in blk.job.output()


def test_two_jobs_share_one_node_mount(cluster):
    img = image_of(cluster, USER1, "shared.sqfs")
    after = "cat /squash/shared/hello.txt"
    with blocking_jobs(cluster, (USER1, img, after), (USER1, img, after)) as (j1, j2):
        m = cluster.shared_mount(img, [j1, j2])
        node = [x for x in cluster.node_mounts() if x["mount_point"] == m["mount_point"]]
        assert len(node) == 1, cluster.node_mounts()
        assert len(cluster.node_mounts()) == 1

        # The first job ends: the mount stays for the second.
        j1.release()
        assert j1.job.state == "COMPLETED", j1.job.output()
        cluster.shared_mount(img, [j2])
        assert len(cluster.node_mounts()) == 1

        # The second job still reads from it, then ends: the mount goes.
        j2.release()
        assert j2.job.state == "COMPLETED", j2.job.output()
        assert "hello from the image\n" in j2.job.output()
        wait_until(lambda: not cluster.node_mounts(), 10, what="the node mount to go")
        assert cluster.list_mounts() == []


def test_missing_image_refused_at_submit(cluster):
    d = cluster.workdir(USER1, "img")
    img = d / "nothere.sqfs"
    cluster.refused_at_submit(USER1, img, img, r"no such file|not found|does not exist")


def test_not_squashfs_refused_at_submit(cluster):
    d = cluster.workdir(USER1, "img")
    bad = d / "notes.sqfs"
    bad.write_text("this is not a squashfs image\n" * 100)
    pw = pwd.getpwnam(USER1)
    os.chown(bad, pw.pw_uid, pw.pw_gid)
    cluster.refused_at_submit(USER1, bad, bad, r"squashfs")


def test_unreadable_image_refused_at_submit(cluster):
    img = image_of(cluster, USER2, "secret.sqfs", mode=0o600)
    cluster.refused_at_submit(USER1, img, img, r"permission denied|cannot read|not readable")


def test_squashd_down_fails_the_job_not_the_node(cluster):
    img = image_of(cluster, USER1, "down.sqfs")
    cluster.cluster_sh("squashd-stop")
    try:
        assert cluster.squashd_pid() is None
        with cluster.plugin_retry(1):
            job = cluster.run_job(USER1, "cat /squash/down/hello.txt\necho reached the end\n",
                                  [f"--squash-image={img}"])
        out = job.output()
        assert job.state == "FAILED", (job.state, out)
        assert re.search(r"^squash: .*squashd.*not reachable", out, re.M), out
        # It retried for plugstack.conf's retry= (1 s here), no longer.
        assert re.search(r"not reachable: .*\(after \d+ attempts in [12]\.\d s\)", out), out
        assert "hello from the image" not in out
        assert "reached the end" not in out
        # The node stays in service.
        assert cluster.node_state() == "idle"
        info = run(["scontrol", "-o", "show", "node", cluster.node], env=cluster.env).stdout
        assert "DRAIN" not in info, info
    finally:
        cluster.cluster_sh("squashd-start")
    # And with squashd back, jobs work again.
    job = cluster.run_job(USER1, "cat /squash/down/hello.txt\n", [f"--squash-image={img}"])
    assert job.state == "COMPLETED", job.output()
    assert "hello from the image\n" in job.output()


def test_srun_and_salloc(cluster):
    img = image_of(cluster, USER1, "inter.sqfs")
    d = cluster.workdir(USER1, "inter")
    p = cluster.as_user(USER1, ["srun", f"--squash-image={img}", "cat",
                                "/squash/inter/hello.txt"], cwd=d, timeout=90)
    assert p.returncode == 0, p.stderr
    assert p.stdout == "hello from the image\n"
    p = cluster.as_user(USER1, ["salloc", f"--squash-image={img}", "srun", "bash", "-c",
                                'echo "$SQUASH_MOUNT"; cat "$SQUASH_MOUNT/hello.txt"'],
                        cwd=d, timeout=90)
    assert p.returncode == 0, p.stderr
    assert p.stdout == "/squash/inter\nhello from the image\n", (p.stdout, p.stderr)
    wait_until(lambda: not cluster.squeue_ids(), 30, 0.2, "the allocation to end")


@pytest.mark.host_release_only("squashd's own restart and adoption: the same on every release")
def test_squashd_restart_keeps_running_jobs_mounts(cluster):
    """A restart of squashd (KillMode=process in the unit) leaves the FUSE
    server and the mount to the running job; the new squashd adopts them
    from its state file and still tears them down when the job ends."""
    img = image_of(cluster, USER1, "restart.sqfs")
    after = "cat /squash/restart/hello.txt"
    with blocking_jobs(cluster, (USER1, img, after)) as (blk,):
        before = cluster.shared_mount(img, [blk])
        server = before["server_pid"]
        old = cluster.squashd_pid()
        cluster.cluster_sh("squashd-stop")
        wait_until(lambda: not os.path.exists(f"/proc/{old}"), 10, what="squashd to exit")
        assert os.path.exists(f"/proc/{server}"), "the FUSE server died with squashd"
        assert len(cluster.node_mounts()) == 1

        cluster.cluster_sh("squashd-start")
        adopted = cluster.shared_mount(img, [blk])
        assert adopted["mount_point"] == before["mount_point"]
        assert adopted["server_pid"] == server
        assert "adopted mount" in cluster.squashd_log()

        blk.release()
        assert blk.job.state == "COMPLETED", blk.job.output()
        assert "hello from the image\n" in blk.job.output()
    wait_until(lambda: not cluster.node_mounts(), 10, what="the adopted mount to go")
    wait_until(lambda: not os.path.exists(f"/proc/{server}"), 10, what="the FUSE server to exit")
