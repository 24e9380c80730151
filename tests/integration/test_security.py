"""squashd acts with the job user's rights, trusts only what the
admin trusts, and survives hostile clients."""

import os
import re
import subprocess
import time
from pathlib import Path

import pytest

from conftest import (RAWCLIENT, SQUASHD, USER1, USER2, BlockingJob, Job, blocking_jobs,
                      loop_backing_files, mountinfo, proc_uids, uid_of, wait_until)

pytestmark = pytest.mark.host_release_only("squashd's checks of users, images and frames: the same on every release")

FILES = {"hello.txt": "hello from the image\n"}
# A job id no real job of the session uses.
FAKE_JOB = 990001


def test_other_users_private_image(cluster):
    d = cluster.workdir(USER2, "img")
    img = cluster.make_image(d / "mine.sqfs", FILES, owner=USER2, mode=0o600)
    cluster.refused_at_submit(USER1, img, img, r"permission denied|not readable")
    # Root asking squashd to mount it for squser1 must fail too: squashd
    # opens the image with the user's rights, not its own.
    p = cluster.rawclient("mount", FAKE_JOB, uid_of(USER1), f"{img}:/squash/mine")
    try:
        assert p.returncode == 1, p.stdout + p.stderr
        assert p.stdout.startswith("user-error"), p.stdout
        assert re.search(r"permission denied|not readable", p.stdout, re.I), p.stdout
        assert not cluster.node_mounts()
    finally:
        cluster.rawclient("release", FAKE_JOB)


def test_group_readable_image(cluster):
    d = cluster.workdir("root", "grp")
    img = cluster.make_image(d / "group.sqfs", FILES, owner="root", group="sqshare",
                             mode=0o640)
    job = cluster.run_job(USER1, "cat /squash/group/hello.txt\n", [f"--squash-image={img}"])
    assert job.state == "COMPLETED", job.output()
    assert job.output() == "hello from the image\n"
    cluster.refused_at_submit(USER2, img, img, r"permission denied|not readable")


def test_targets_outside_the_allowed_places(cluster):
    d = cluster.workdir(USER1, "img")
    img = cluster.make_image(d / "t.sqfs", FILES, owner=USER1)
    link = cluster.targets / "link"
    if not link.is_symlink():
        link.symlink_to("/etc")
    cluster.refused_at_submit(USER1, f"{img}:/etc/sq", img, r"/etc/sq")
    for target in (link, link / "sq"):
        d2 = cluster.workdir(USER1, "link")
        script = cluster.write_script(d2, "echo job ran; ls /etc/passwd\n")
        res = cluster.sbatch(USER1, script, [f"--squash-image={img}:{target}"], cwd=d2)
        if isinstance(res, Job):
            # Not caught at submit time: the step must refuse to bind through
            # the symlink, and /etc must stay as it is.
            res.wait()
            assert res.state == "FAILED", (target, res.output())
            assert re.search(r"^squash: .*symbolic link", res.output(), re.M), res.output()
            assert "job ran" not in res.output()
        else:
            assert res.returncode != 0 and "squash: " in res.stderr, res.stderr
        assert not [m for m in mountinfo() if m["mount_point"].startswith("/etc")]
    # The daemon refuses such targets itself.
    p = cluster.rawclient("mount", FAKE_JOB, uid_of(USER1), f"{img}:/etc/sq")
    try:
        assert p.returncode == 1 and p.stdout.startswith("user-error"), p.stdout
        assert "/etc/sq" in p.stdout, p.stdout
    finally:
        cluster.rawclient("release", FAKE_JOB)


def test_non_root_client_denied(cluster):
    d = cluster.workdir(USER1, "img")
    img = cluster.make_image(d / "nr.sqfs", FILES, owner=USER1)
    p = cluster.rawclient("mount", FAKE_JOB, uid_of(USER1), f"{img}:/squash/nr", user=USER1)
    try:
        assert p.returncode == 1, p.stdout + p.stderr
        assert p.stdout.startswith("denied"), p.stdout
        p = cluster.rawclient("release", FAKE_JOB, user=USER1)
        assert p.stdout.startswith("denied"), p.stdout
        # Listing is open to everyone.
        p = cluster.rawclient("list", user=USER1)
        assert p.returncode == 0 and p.stdout.startswith("ok"), p.stdout
    finally:
        cluster.rawclient("release", FAKE_JOB)


def test_replayed_credential_refused(cluster):
    p = cluster.rawclient("replay")
    assert p.stdout.startswith("first: ok"), p.stdout + p.stderr
    assert p.returncode == 0, p.stdout + p.stderr
    assert re.search(r"^second: (denied|closed)", p.stdout, re.M), p.stdout


def test_unsigned_request_refused(cluster):
    p = cluster.rawclient("--no-munge", "list")
    assert p.stdout.startswith(("denied", "closed")), p.stdout


def test_trusted_image_kernel_mounted_and_shared(cluster):
    img = cluster.make_image(cluster.trusted / "stack.sqfs", FILES, owner="root", mode=0o644)
    os.chmod(cluster.trusted, 0o755)
    after = "cat /squash/stack/hello.txt"
    with blocking_jobs(cluster, (USER1, img, after), (USER2, img, after)) as jobs:
        assert len(cluster.list_mounts()) == 1, cluster.list_mounts()
        m = cluster.shared_mount(img, jobs)
        assert m["mode"] == "kernel", m
        loops = loop_backing_files()
        assert m.get("loop_device") in loops, (m, loops)
        assert loops[m["loop_device"]] == str(img)
        node = cluster.node_mounts()
        assert len(node) == 1 and node[0]["fstype"] == "squashfs", node
        assert node[0]["source"] == m["loop_device"]
        for b in jobs:
            b.release()
            assert b.job.state == "COMPLETED", b.job.output()
            assert b.job.output() == "hello from the image\n"
    wait_until(lambda: not cluster.instance_loops(), 10, what="the loop device to go")


def test_fuse_server_runs_as_job_user(cluster):
    d = cluster.workdir(USER1, "img")
    img = cluster.make_image(d / "u.sqfs", FILES, owner=USER1)
    blk = BlockingJob(cluster, USER1, img)
    try:
        blk.wait_ready()
        mounts = cluster.list_mounts()
        assert len(mounts) == 1 and mounts[0]["mode"] == "fuse", mounts
        m = mounts[0]
        assert m["owner_uid"] == uid_of(USER1)
        pid = m["server_pid"]
        assert Path(f"/proc/{pid}").exists()
        assert set(proc_uids(pid)) == {uid_of(USER1)}, proc_uids(pid)
        node = cluster.node_mounts()
        assert len(node) == 1 and node[0]["fstype"].startswith("fuse"), node
    finally:
        blk.release()
    assert blk.job.state == "COMPLETED", blk.job.output()


def test_config_writable_by_others_refused(cluster):
    bad = cluster.dir / "bad.conf"
    text = (cluster.dir / "squashd.conf").read_text()
    text = text.replace(str(cluster.socket), str(cluster.dir / "bad.sock"))
    text = text.replace(f"state_dir = {cluster.state_dir}",
                        f"state_dir = {cluster.dir / 'badstate'}")
    bad.write_text(text)
    bad.chmod(0o666)
    proc = subprocess.Popen([SQUASHD, "--config", bad], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        out, err = proc.communicate(timeout=15)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.communicate()
        raise AssertionError("squashd started with a world-writable config file")
    finally:
        bad.unlink()
    assert proc.returncode != 0
    assert str(bad) in err, err
    assert not (cluster.dir / "bad.sock").exists()


def test_hostile_frames(cluster):
    d = cluster.workdir(USER1, "img")
    img = cluster.make_image(d / "h.sqfs", FILES, owner=USER1)
    pid = cluster.squashd_pid()
    blk = BlockingJob(cluster, USER1, img, after="cat /squash/h/hello.txt")
    idle = None
    try:
        blk.wait_ready()
        node_before = cluster.node_mounts()
        assert len(node_before) == 1
        # A client that connects and never sends: squashd must not wait on
        # it forever (request_timeout is 10 s in the test cluster).
        idle = subprocess.Popen([RAWCLIENT, "--socket", cluster.socket, "idle", "40"],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        time.sleep(0.5)  # let it connect
        answers = {}
        for kind in ("garbage", "short", "badmagic", "badversion", "oversize"):
            t = time.monotonic()
            p = cluster.rawclient(kind, timeout=30)
            answers[kind] = p.stdout.strip()
            assert p.returncode == 0, (kind, p.stdout, p.stderr)
            assert not answers[kind].startswith("ok"), answers
            assert (answers[kind] == "closed" or
                    re.match(r"(bad-request|version-mismatch|denied)\b", answers[kind])), answers
            assert time.monotonic() - t < 10, f"{kind}: squashd took too long"
            assert cluster.squashd_pid() == pid, f"squashd died after {kind}"
        # Answered in the version it sent, naming both and the upgrade order.
        assert answers["badversion"].startswith("version-mismatch: the client speaks protocol "
                                                "version 32574, squashd (slurm-squash "), answers
        assert "speaks version 2" in answers["badversion"], answers
        assert "squashd on the compute nodes first" in answers["badversion"], answers
        # With an idle connection open squashd still answers others.
        t = time.monotonic()
        p = cluster.rawclient("list", timeout=30)
        assert p.stdout.startswith("ok"), p.stdout
        assert time.monotonic() - t < 5
        assert cluster.squashd_pid() == pid
        # The job's mount is untouched.
        assert cluster.node_mounts() == node_before
        assert len(cluster.list_mounts()) == 1
        out, _ = idle.communicate(timeout=45)
        assert re.match(r"connected\nclosed after", out), out
        assert float(out.split()[-2]) < 30, out
        assert cluster.squashd_pid() == pid
    finally:
        if idle and idle.poll() is None:
            idle.kill()
            idle.communicate()
        blk.release()
    assert blk.job.state == "COMPLETED", blk.job.output()
    assert blk.job.output() == "hello from the image\n"

