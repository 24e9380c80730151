"""One user's share of the loop devices (core/loop_devices.c): trusted
images are mounted by the kernel, one loop device each, and
max_loop_devices bounds them for the node; without a share of its own, one
user's jobs and squash-shell sessions could hold every device and every
other user's next trusted image would fail (and fail its prolog: a node
error). By default a user's holders may hold a quarter of
max_loop_devices in distinct kernel mounts: past it that user's new kernel
mount fails their job only, as a user error with the reason in the job's
output, the node stays up, sharing a mount that exists is never refused,
and another user still mounts."""

import json
import os

import pytest

from conftest import USER1, USER2, blocking_jobs, uid_of, wait_until
from test_health_checks import reload_conf

pytestmark = pytest.mark.host_release_only("squashd's own budget, the same on every Slurm release")

FILES = {"hello.txt": "hello from the image\n"}


def kernel_mounts_budget(cluster, user):
    rows = json.loads(cluster.squashctl("status", "--json").stdout)["user_budgets"]
    mine = [r for r in rows if r["uid"] == uid_of(user)]
    return mine[0]["budgets"].get("kernel mounts") if mine else None


def test_a_user_past_their_share_of_loop_devices_fails_alone(cluster):
    os.chmod(cluster.trusted, 0o755)
    a, b, c = (cluster.make_image(cluster.trusted / f"share-{n}.sqfs", FILES, owner="root", mode=0o644)
               for n in "abc")
    conf = cluster.dir / "squashd.conf"
    original = conf.read_text()
    try:
        reload_conf(cluster, original + "max_loop_devices = 8\n", "reload: max_loop_devices is now '8'")
        with blocking_jobs(cluster, (USER1, f"{a},{b}", "")) as (blk,):
            wait_until(lambda: len(cluster.list_mounts()) == 2, 15, what="the two kernel mounts")
            assert kernel_mounts_budget(cluster, USER1) == {"used": 2, "limit": 2}
            job = cluster.run_job(USER1, "cat /squash/share-c/hello.txt\n", [f"--squash-image={c}"])
            assert job.state == "FAILED", job.output()
            assert (f"no loop device for a kernel mount: the jobs and sessions of uid {uid_of(USER1)} "
                    "on this node already hold 2 kernel mounts, each on a loop device of its own "
                    "(max_loop_devices_per_user = 2): end some of that user's jobs or sessions first"
                    ) in job.output(), job.output()
            assert "drain" not in cluster.node_state(), "a user's budget drained the node"
            # Sharing what the user holds needs no device.
            job = cluster.run_job(USER1, "cat /squash/share-a/hello.txt\n", [f"--squash-image={a}"])
            assert job.state == "COMPLETED" and job.output() == FILES["hello.txt"], job.output()
            # Another user's share is their own.
            job = cluster.run_job(USER2, "cat /squash/share-c/hello.txt\n", [f"--squash-image={c}"])
            assert job.state == "COMPLETED" and job.output() == FILES["hello.txt"], job.output()
            assert {m["image"] for m in cluster.list_mounts()} == {str(a), str(b)}
            blk.release()
            assert blk.job.state == "COMPLETED", blk.job.output()
        wait_until(lambda: not cluster.list_mounts() and not cluster.node_mounts(), 15,
                   what="the kernel mounts to go")
    finally:
        reload_conf(cluster, original, "reload: max_loop_devices is now '0'")
