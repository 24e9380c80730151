"""Writable images (--squash-image=IMAGE:TARGET:rw): the job gets an overlay
whose upper layer is a node-local tmpfs of overlay_size bytes, shared by the
job's steps on the node and discarded when the job is released. Writes never
reach the image; the limit gives ENOSPC; files the job creates are the
user's. Both mount modes: a trusted image (kernel squashfs lower) and a
user's image (squashfuse_ll lower).

squashd runs with a small overlay_size inside the `overlay_limit` fixture,
which restores the configuration afterwards."""

import contextlib
import hashlib
import os
import pwd
import re
import shutil
import signal
import stat
import subprocess
import tempfile
import time
from pathlib import Path

import pytest

from conftest import (RAWCLIENT, SQUASHD, USER1, USER2, BlockingJob, mountinfo, proc_uids, resume, run,
                      threads_stopped, wait_until)

LIMIT_MB = 16
FILES = {"hello.txt": "hello from the image\n", "data/keep.txt": "kept\n"}


@contextlib.contextmanager
def squashd_with(cluster, extra):
    conf = cluster.dir / "squashd.conf"
    original = conf.read_text()
    try:
        cluster.cluster_sh("squashd-stop")
        conf.write_text(original + extra)
        cluster.cluster_sh("squashd-start")
        yield
    finally:
        cluster.cluster_sh("squashd-stop")
        conf.write_text(original)
        cluster.cluster_sh("squashd-start")


@pytest.fixture(scope="module")
def overlay_limit(cluster):
    with squashd_with(cluster, f"overlay_size = {LIMIT_MB}M\n"):
        yield


def user_image(cluster, path, owner, file_owner):
    """An image whose files (and root directory) belong to file_owner, as
    mksquashfs leaves a user's own tree; the image file belongs to owner."""
    src = Path(tempfile.mkdtemp(prefix="rwsrc.", dir=cluster.dir))
    try:
        src.chmod(0o755)
        for rel, text in FILES.items():
            f = src / rel
            f.parent.mkdir(mode=0o755, parents=True, exist_ok=True)
            f.write_text(text)
        pw = pwd.getpwnam(file_owner)
        run(["mksquashfs", src, path, "-noappend", "-quiet", "-no-progress",
             "-force-uid", pw.pw_uid, "-force-gid", pw.pw_gid])
    finally:
        shutil.rmtree(src)
    opw = pwd.getpwnam(owner)
    os.chown(path, opw.pw_uid, opw.pw_gid)
    Path(path).chmod(0o644)
    return Path(path)


def digest(path):
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def overlay_dirs(cluster):
    return sorted(p.name for p in (cluster.state_dir / "mnt").iterdir() if p.name.startswith("j"))


def overlays_gone(cluster):
    """Waits for the release's teardown, which runs after its answer."""
    wait_until(lambda: overlay_dirs(cluster) == [], 10, what="the overlays to go")


def test_job_writes_its_rw_images_and_the_images_stay_unchanged(cluster, overlay_limit):
    kernel = user_image(cluster, cluster.trusted / "rwk.sqfs", "root", USER1)
    fuse = user_image(cluster, cluster.workdir(USER1, "rwimg") / "rwf.sqfs", USER1, USER1)
    ro = user_image(cluster, cluster.workdir(USER1, "roimg") / "ro.sqfs", USER1, USER1)
    before = {p: digest(p) for p in (kernel, fuse, ro)}
    uid = pwd.getpwnam(USER1).pw_uid
    body = f"""
set -u
echo new-in-kernel > /squash/k/new.txt
echo appended >> /squash/f/hello.txt
mkdir /squash/f/data/sub && echo deep > /squash/f/data/sub/x
rm /squash/k/data/keep.txt
touch /squash/ro/nope 2>&1 || true
# A second step of the same job sees what the first one wrote.
srun bash -c 'cat /squash/k/new.txt /squash/f/hello.txt /squash/f/data/sub/x;
  stat -c "owner=%u" /squash/k/new.txt /squash/f/data/sub/x;
  ls /squash/k/data/keep.txt 2>&1 | sed "s/^.*No such/gone: No such/"'
# Past the node's limit: ENOSPC, for the job's writer only.
dd if=/dev/zero of=/squash/f/big bs=1M count={LIMIT_MB * 2} 2>&1 | grep -o "No space left on device" | head -1
echo end
"""
    job = cluster.run_job(USER1, body, [f"--squash-image={kernel}:/squash/k:rw,{fuse}:/squash/f:rw,{ro}"])
    out = job.output()
    assert job.state == "COMPLETED", out
    assert "touch: cannot touch '/squash/ro/nope': Read-only file system" in out, out
    assert "new-in-kernel\nhello from the image\nappended\ndeep\n" in out, out
    assert out.count(f"owner={uid}\n") == 2, out
    assert "gone: No such file or directory" in out, out
    assert "No space left on device\nend\n" in out, out
    assert wait_until(lambda: not cluster.list_mounts(), 10, what="the release") is True
    # Nothing reached the images, and the overlays are gone with the job.
    assert {p: digest(p) for p in before} == before
    overlays_gone(cluster)
    assert not [m for m in cluster.stray_mounts() if m["fstype"] in ("overlay", "tmpfs")]

    # The next job on the same images starts from the images again.
    job2 = cluster.run_job(USER1, "ls /squash/k/new.txt 2>&1; cat /squash/f/hello.txt /squash/k/data/keep.txt\n",
                           [f"--squash-image={kernel}:/squash/k:rw,{fuse}:/squash/f"])
    out2 = job2.output()
    assert job2.state == "COMPLETED", out2
    assert "No such file or directory" in out2 and "appended" not in out2, out2
    assert out2.endswith("hello from the image\nkept\n"), out2


@pytest.mark.host_release_only("squashd's own overlays: the same on every release")
def test_rw_with_default_target_and_two_jobs_do_not_share_their_overlays(cluster, overlay_limit):
    img = user_image(cluster, cluster.trusted / "shared-rw.sqfs", "root", USER1)
    d = cluster.workdir(USER1, "rwpair")
    gate = d / "go"
    first = cluster.sbatch(USER1, cluster.write_script(d, f"""
echo from-first > /squash/shared-rw/mine.txt
touch {d}/first-wrote
for i in $(seq 1 600); do [ -e {gate} ] && break; sleep 0.1; done
cat /squash/shared-rw/mine.txt
""", "first.sh"), [f"--squash-image={img}::rw"], cwd=d)
    try:
        wait_until(lambda: (d / "first-wrote").exists(), 60, what="the first job to write")
        second = cluster.run_job(USER1, "ls /squash/shared-rw/mine.txt 2>&1; echo two\n",
                                 [f"--squash-image={img}::rw"])
        assert second.state == "COMPLETED", second.output()
        assert "No such file or directory" in second.output(), second.output()
        # One node-level mount for both jobs, an overlay for each (the
        # second one's goes with it).
        assert len(cluster.list_mounts()) == 1
        wait_until(lambda: len(overlay_dirs(cluster)) == 1, 10, what="the second job's overlay to go")
    finally:
        gate.touch()
    first.wait()
    assert first.state == "COMPLETED", first.output()
    assert first.output() == "from-first\n"
    overlays_gone(cluster)


@pytest.mark.host_release_only("squashd's own settings: the same on every release")
def test_rw_refused_when_the_node_disables_overlays(cluster):
    img = user_image(cluster, cluster.workdir(USER1, "rwoff") / "off.sqfs", USER1, USER1)
    with squashd_with(cluster, "overlay_size = 0\n"):
        job = cluster.run_job(USER1, "echo should not run\n", [f"--squash-image={img}::rw"])
    out = job.output()
    assert job.state == "FAILED", out
    assert re.search(r"^squash: job \d+: writable images \(:rw\) are not enabled on this node "
                     r"\(overlay_size = 0 in squashd.conf\)", out, re.M), out
    assert "should not run" not in out


def test_bad_flag_refused_at_submit(cluster):
    img = user_image(cluster, cluster.workdir(USER1, "rwbad") / "bad.sqfs", USER1, USER1)
    arg = f"{img}:/squash/bad:ro"
    err = cluster.refused_at_submit(USER1, arg, f"--squash-image={arg}")
    assert "unknown flag 'ro' after the target (the only flag is rw" in err, err


@pytest.mark.host_release_only("squashd's own restart: the same on every release")
def test_squashd_restart_keeps_the_jobs_overlay_and_removes_unknown_ones(cluster, overlay_limit):
    img = user_image(cluster, cluster.workdir(USER1, "rwrestart") / "keep.sqfs", USER1, USER1)
    # What a crashed squashd could leave: an overlay directory no record
    # names, a tmpfs with a mount inside.
    stale = cluster.state_dir / "mnt" / "j999999"
    stale.mkdir()
    run(["mount", "-t", "tmpfs", "tmpfs", stale])
    (stale / "o0").mkdir()
    run(["mount", "-t", "tmpfs", "tmpfs", stale / "o0"])
    blk = BlockingJob(cluster, USER1, f"{img}::rw", before="echo before > /squash/keep/mark",
                      after="srun bash -c 'echo after >> /squash/keep/mark'; cat /squash/keep/mark")
    try:
        blk.wait_ready()
        mine = overlay_dirs(cluster)
        assert len(mine) == 2 and "j999999" in mine, mine
        offset = len(cluster.squashd_log())
        cluster.cluster_sh("squashd-stop")
        cluster.cluster_sh("squashd-start")
        log = cluster.squashd_log()[offset:]
        assert f"cleaning up unknown leftover {stale}" in log, log
        assert f"removed overlay directory {stale}" in log, log
        assert not [m for m in mountinfo() if m["mount_point"].startswith(str(stale))]
        assert overlay_dirs(cluster) == [d for d in mine if d != "j999999"]
    finally:
        blk.release()
    out = blk.job.output()
    assert blk.job.state == "COMPLETED", out
    assert out == "before\nafter\n"
    overlays_gone(cluster)


def test_each_node_has_its_own_overlay_shared_by_its_steps(cluster3):
    c = cluster3
    img = user_image(c, c.workdir(USER1, "rwnodes") / "nodes.sqfs", USER1, USER1)
    body = """
srun -N3 --ntasks-per-node=1 bash -c 'hostname > /squash/nodes/who'
srun -N3 --ntasks-per-node=1 bash -c 'echo "on $(hostname): $(cat /squash/nodes/who)"'
"""
    job = c.run_job(USER1, body, ["-N3", f"--squash-image={img}::rw"])
    out = job.output()
    assert job.state == "COMPLETED", out
    # The second step on each node read what the first wrote on that node.
    assert sorted(re.findall(r"^on (\S+): (\S+)$", out, re.M)) == [(n, n) for n in ("n1", "n2", "n3")], out
    for n in c.nodes:
        wait_until(lambda: not [d for d in n.run(["ls", n.state_dir / "mnt"]).stdout.split()
                                if d.startswith("j")], 10, what=f"the overlay on {n.name} to go")


def owners_below(path):
    """{relative path: uid} of everything below path."""
    res = {}
    for root, dirs, files in os.walk(path):
        for name in dirs + files:
            p = Path(root) / name
            res[str(p.relative_to(path))] = os.lstat(p).st_uid
    return res


def test_rw_dir_keeps_the_changes_in_the_users_directory(cluster, overlay_limit):
    kernel = user_image(cluster, cluster.trusted / "keepk.sqfs", "root", USER1)
    fuse = user_image(cluster, cluster.workdir(USER1, "keepimg") / "keepf.sqfs", USER1, USER1)
    before = {p: digest(p) for p in (kernel, fuse)}
    kdir, fdir = cluster.workdir(USER1, "kchanges"), cluster.workdir(USER1, "fchanges")
    uid = pwd.getpwnam(USER1).pw_uid
    spec = f"--squash-image={kernel}:/squash/k:rw={kdir},{fuse}:/squash/f:rw={fdir}"
    job = cluster.run_job(USER1, """
echo first > /squash/k/new.txt
echo changed > /squash/f/hello.txt
rm /squash/f/data/keep.txt
srun cat /squash/k/new.txt
""", [spec])
    assert job.state == "COMPLETED", job.output()
    assert job.output() == "first\n"
    # The changes are in the user's directories, and everything overlayfs
    # made there (files, the whiteout, its work directory) is the user's.
    assert (kdir / "upper" / "new.txt").read_text() == "first\n"
    assert (fdir / "upper" / "hello.txt").read_text() == "changed\n"
    assert stat.S_ISCHR(os.lstat(fdir / "upper" / "data" / "keep.txt").st_mode)  # whiteout
    for d in (kdir, fdir):
        owners = owners_below(d)
        assert owners and set(owners.values()) == {uid}, owners
    assert {p: digest(p) for p in before} == before
    overlays_gone(cluster)

    # The next job with the same directories starts where the first ended;
    # one without them sees the images.
    job2 = cluster.run_job(USER1, "cat /squash/k/new.txt /squash/f/hello.txt; "
                           "ls /squash/f/data/keep.txt 2>&1 | grep -c 'No such file'\n", [spec])
    assert job2.state == "COMPLETED", job2.output()
    assert job2.output() == "first\nchanged\n1\n"
    job3 = cluster.run_job(USER1, "cat /squash/f/hello.txt /squash/f/data/keep.txt\n",
                           [f"--squash-image={fuse}:/squash/f:rw"])
    assert job3.output() == "hello from the image\nkept\n", job3.output()


@pytest.mark.host_release_only("squashd's own checks of rw=DIR: the same on every release")
def test_rw_dir_refused_when_not_the_users_or_in_use(cluster, overlay_limit):
    img = user_image(cluster, cluster.workdir(USER1, "useimg") / "use.sqfs", USER1, USER1)
    mine = cluster.workdir(USER1, "inuse")
    other = cluster.workdir(USER2, "others")
    other.chmod(0o777)
    # The submit check refuses another user's directory.
    arg = f"{img}::rw={other}"
    err = cluster.refused_at_submit(USER1, arg, img)
    assert f"upper directory {other}: not yours" in err, err

    # squashd checks again, as the user: a directory that changed hands
    # after submission fails the job.
    d = cluster.workdir(USER1, "handover")
    changing = cluster.workdir(USER1, "changing")
    held = cluster.sbatch(USER1, cluster.write_script(d, "echo should not run\n"),
                          ["-H", f"--squash-image={img}::rw={changing}"], cwd=d)
    os.chown(changing, pwd.getpwnam(USER2).pw_uid, -1)
    run(["scontrol", "release", held.id], env=cluster.env)
    held.wait()
    assert held.state == "FAILED", held.output()
    assert re.search(rf"^squash: job {held.id}: upper directory {changing} belongs to uid "
                     rf"{pwd.getpwnam(USER2).pw_uid}, not to {USER1}: it must be a directory you own",
                     held.output(), re.M), held.output()

    # One job at a time per directory on a node, also after a squashd
    # restart (the registry keeps the directory).
    blk = BlockingJob(cluster, USER1, f"{img}::rw={mine}")
    try:
        blk.wait_ready()
        cluster.cluster_sh("squashd-stop")
        cluster.cluster_sh("squashd-start")
        second = cluster.run_job(USER1, "echo should not run\n", [f"--squash-image={img}::rw={mine}"])
        assert second.state == "FAILED", second.output()
        assert f"upper directory {mine} is in use by job {blk.job.id} on this node" in second.output()
        # Another user's job naming that directory (a prolog's request,
        # past sbatch's check) is told it is not theirs, not which job of
        # USER1's uses it; and such a name, while its job is still
        # mounting, never blocks the owner's (only the owner's own jobs
        # count).
        p = cluster.rawclient("mount", "3999996", str(pwd.getpwnam(USER2).pw_uid),
                              f"{img}:/squash/other:rw={mine}")
        try:
            assert p.returncode != 0, p.stdout + p.stderr
            assert f"upper directory {mine} belongs to uid {pwd.getpwnam(USER1).pw_uid}" in p.stdout + p.stderr, \
                p.stdout + p.stderr
            assert f"job {blk.job.id}" not in p.stdout + p.stderr, p.stdout + p.stderr
        finally:
            cluster.rawclient("release", "3999996")
    finally:
        blk.release()
    assert blk.job.state == "COMPLETED", blk.job.output()


@pytest.mark.host_release_only("squashd's own checks of rw=DIR: the same on every release")
def test_rw_dir_never_gets_a_root_owned_copy_of_a_set_uid_file(cluster, overlay_limit):
    """A user's image may claim that a file is set-uid root. Changing it
    through an overlay that keeps its changes in the user's directory must
    not leave a set-uid root file there: the copy-up fails instead."""
    img = cluster.workdir(USER1, "suidimg") / "suid.sqfs"
    src = Path(tempfile.mkdtemp(prefix="suidsrc.", dir=cluster.dir))
    try:
        (src / "sh").write_text("#!/bin/sh\n")
        (src / "sh").chmod(0o4777)
        run(["mksquashfs", src, img, "-noappend", "-quiet", "-no-progress", "-all-root"])
    finally:
        shutil.rmtree(src)
    os.chown(img, pwd.getpwnam(USER1).pw_uid, -1)
    keep = cluster.workdir(USER1, "suidkeep")
    job = cluster.run_job(USER1, "stat -c '%a %u' /squash/suid/sh; : >> /squash/suid/sh; echo rc=$?\n",
                          [f"--squash-image={img}::rw={keep}"])
    out = job.output()
    assert out.startswith("4777 0\n"), out
    assert re.search(r"Operation not permitted\nrc=1\n$", out), out
    for root, dirs, files in os.walk(keep):
        for name in dirs + files:
            st = os.lstat(Path(root) / name)
            assert st.st_uid != 0 and not st.st_mode & (stat.S_ISUID | stat.S_ISGID), (root, name)


@pytest.mark.parametrize("value", ["-1", "2T", "1X", "1GB", "G"])
def test_overlay_size_out_of_bounds_is_refused(cluster, value):
    conf = cluster.dir / "bad-overlay.conf"
    conf.write_text((cluster.dir / "squashd.conf").read_text() + f"overlay_size = {value}\n")
    p = run([SQUASHD, "--config", conf, "--socket", cluster.dir / "bad.sock"], check=False, timeout=30)
    assert p.returncode == 1
    assert "overlay_size must be a size from 0 to 1024G" in p.stderr, p.stderr


def test_gc_keeps_a_gone_job_while_a_process_still_holds_its_overlay(cluster, overlay_limit):
    """Reconciliation releases a job Slurm no longer runs unless a process
    still holds one of its mounts; for a writable image that is the
    overlay (steps bind it, not the image's mount)."""
    img = user_image(cluster, cluster.workdir(USER1, "gcrw") / "gcrw.sqfs", USER1, USER1)
    p = cluster.rawclient("mount", "3999997", pwd.getpwnam(USER1).pw_uid, f"{img}:/squash/gcrw:rw")
    assert p.returncode == 0, p.stdout + p.stderr
    source = re.search(r"-> /squash/gcrw \((\S+), fuse\)", p.stdout).group(1)
    assert source.startswith(str(cluster.state_dir / "mnt" / "j")), p.stdout
    # A namespace holding only the overlay, as a step winding down would.
    mnt_dir = cluster.state_dir / "mnt"
    holder = subprocess.Popen(
        ["unshare", "-m", "--propagation", "private", "sh", "-c",
         f"mount --bind {source} /mnt && "
         f"awk '$5 ~ \"^{mnt_dir}/\" {{print $5}}' /proc/self/mountinfo | sort -r | "
         "xargs -r -n1 umount -l && echo ready && exec sleep 600"],
        stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "ready"
        offset = len(cluster.squashd_log())
        cluster.squashctl("gc")
        assert re.search(r"gc: job 3999997 is gone unknown-to-slurmctld in Slurm, but pid \d+ "
                         r"still uses its mount; keeping it", cluster.squashd_log()[offset:])
        assert len(overlay_dirs(cluster)) == 1
    finally:
        holder.kill()
        holder.wait()
    wait_until(lambda: "gc: released job 3999997" in cluster.squashctl("gc").stdout + cluster.squashd_log(),
               40, 1, "gc to release the job once nothing holds its overlay")
    overlays_gone(cluster)


def test_rw_is_refused_for_a_steps_own_images(cluster):
    img = user_image(cluster, cluster.workdir(USER1, "rwstep") / "st.sqfs", USER1, USER1)
    job = cluster.run_job(USER1, f"srun --squash-image={img}:/squash/st:rw true; echo srun=$?\n")
    out = job.output()
    assert re.search(rf"squash: {re.escape(str(img))}: :rw is only for a job's own images", out), out
    assert re.search(r"^srun=[1-9]", out, re.M), out


@pytest.mark.host_release_only("squashd's own checks of rw=DIR: the same on every release")
def test_rw_gets_no_set_gid_root_and_rw_dir_is_opened_with_the_users_rights_alone(cluster, overlay_limit):
    """A user's image may claim a set-gid root directory of group root. The
    plain :rw overlay's root takes the image root's owner and mode, read as
    the user (root never stats the user's FUSE mount), but never its
    set-uid or set-gid bit: files the user creates there keep the user's
    group. And :rw=DIR is opened by a child with no capability at all: a
    directory of the user's below one only root may enter is refused (with
    CAP_DAC_OVERRIDE, as before, it was taken)."""
    img = cluster.workdir(USER1, "sgidimg") / "sgid.sqfs"
    src = Path(tempfile.mkdtemp(prefix="sgidsrc.", dir=cluster.dir))
    try:
        src.chmod(0o2777)
        (src / "f.txt").write_text("x\n")
        run(["mksquashfs", src, img, "-noappend", "-quiet", "-no-progress", "-all-root"])
    finally:
        shutil.rmtree(src)
    os.chown(img, pwd.getpwnam(USER1).pw_uid, -1)
    job = cluster.run_job(USER1, "stat -c '%a %u %g' /squash/sgid; : > /squash/sgid/new; "
                                 "stat -c '%g' /squash/sgid/new\n", [f"--squash-image={img}::rw"])
    assert job.state == "COMPLETED", job.output()
    assert job.output() == f"777 0 0\n{pwd.getpwnam(USER1).pw_gid}\n", job.output()

    locked = cluster.work / "root-only"
    locked.mkdir(mode=0o700)
    mine = locked / "mine"
    mine.mkdir(mode=0o755)
    os.chown(mine, pwd.getpwnam(USER1).pw_uid, pwd.getpwnam(USER1).pw_gid)
    try:
        # As slurmd would ask (the submit check, as the user, would not
        # even get this far).
        p = cluster.rawclient("mount", "3999996", pwd.getpwnam(USER1).pw_uid,
                              f"{img}:/squash/locked:rw={mine}")
        out = p.stdout + p.stderr
        assert p.returncode != 0, out
        assert f"upper directory {mine}: cannot open it as user {USER1}: Permission denied" in out, out
        assert not any(m["mount_point"].startswith(str(cluster.state_dir / "mnt" / "j"))
                       for m in mountinfo()), "an overlay was left"
    finally:
        cluster.rawclient("release", "3999996")
        shutil.rmtree(locked)


REQUEST_TIMEOUT = 10  # tests/cluster/cluster.sh's squashd.conf


@pytest.mark.host_release_only("squashd's deadline on a stopped reader: the same on every release")
def test_rw_over_a_stopped_readers_mount_fails_by_its_deadline_and_leaves_nothing(cluster, overlay_limit):
    """The overlay of a plain :rw image asks its lower layer, the user's
    reader's FUSE mount, for STATFS (and LOOKUP, GETATTR) while it
    mounts. A user who stops their reader (SIGSTOP) must not hold the
    request's worker: the mount runs on a thread the request gives up on
    at its deadline (daemon/core/overlay.c, daemon/util/deadline_call.c);
    the request fails with the reason, the silent reader is killed, and
    the mount's thread removes the job's overlay directory once the mount
    returns. Issue 37, item 2."""
    img = user_image(cluster, cluster.workdir(USER1, "rwstop") / "rwstop.sqfs", USER1, USER1)
    other = user_image(cluster, cluster.workdir(USER2, "rwother") / "other.sqfs", USER2, USER2)
    uid = pwd.getpwnam(USER1).pw_uid
    job_id = "3999995"
    holder = BlockingJob(cluster, USER1, f"{img}:/squash/held")
    stopped, request = [], None
    try:
        holder.wait_ready()
        readers = [p for p in cluster.instance_fuse_servers() if proc_uids(p)[0] == uid]
        assert readers, "no squash-reader serves the user's mount"
        for pid in readers:
            os.kill(pid, signal.SIGSTOP)
            stopped.append(pid)
        # The prolog's request for a job with the held image :rw (root asks
        # for the user, as slurmd's prolog does).
        t = time.monotonic()
        request = subprocess.Popen(
            [RAWCLIENT, "--socket", cluster.socket, "--munge-socket", cluster.munge_socket,
             "mount", job_id, str(uid), f"{img}:/squash/w:rw"],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)

        # Another user's job runs meanwhile.
        t2 = time.monotonic()
        job = cluster.run_job(USER2, "cat /squash/o/hello.txt\n", [f"--squash-image={other}:/squash/o"])
        assert job.state == "COMPLETED" and job.output() == FILES["hello.txt"], job.output()
        print(f"another user's job meanwhile: {time.monotonic() - t2:.1f} s")

        out, err = request.communicate(timeout=REQUEST_TIMEOUT + 30)
        took = time.monotonic() - t
        print(f":rw over a stopped reader's mount: failed after {took:.1f} s: {out.strip()}")
        assert out.startswith("node-error"), (out, err)
        assert "did not mount within the request's deadline" in out and str(img) in out, out
        assert took < REQUEST_TIMEOUT + 5
        assert "it did not answer the overlay mount of a :rw image in time" in cluster.squashd_log()
        # Nothing is left: no overlay, no tmpfs in squashd's mount directory.
        overlays_gone(cluster)
        assert not [m for m in mountinfo() if m["fstype"] in ("overlay", "tmpfs")
                    and m["mount_point"].startswith(str(cluster.state_dir / "mnt") + "/")]
    finally:
        resume(stopped)
        if request:
            if request.poll() is None:
                request.communicate(timeout=60)
            cluster.rawclient("release", job_id)
        holder.release()
        wait_until(lambda: not cluster.list_mounts(), 30, what="the mounts to go")
    # The holder's job ran on: its mount recovered after the reader's death.
    assert holder.job.state == "COMPLETED", holder.job.output()


def squashd_forks(cluster):
    """squashd's children that are copies of it (not the spawner, not the
    FUSE servers it reaps): what a request forks and may give up on."""
    forks = []
    for p in Path("/proc").iterdir():
        try:
            stat = (p / "stat").read_text()
        except (OSError, ValueError):
            continue
        comm, rest = stat[stat.index("(") + 1:stat.rindex(")")], stat[stat.rindex(")") + 2:].split()
        if comm == "squashd" and int(rest[1]) == cluster.squashd_pid():
            forks.append(int(p.name))
    return forks


@pytest.mark.host_release_only("squashd's deadline on a silent reader: the same on every release")
def test_rw_dir_over_a_reader_that_never_answers_ends_that_reader(cluster, overlay_limit):
    """The overlay of :rw=DIR is mounted by a child of squashd's, which
    waits in the kernel on the lower layer, the user's reader's FUSE
    mount, for as long as the reader does not answer: a SIGKILL does not
    end that wait. A reader whose threads a tracer stopped runs on (the
    watch of stopped readers, set far off here, would take its time), so
    when the mount times out squashd kills the reader, as for a plain
    :rw: the request that waited goes to the next reader, which answers,
    and the abandoned child ends instead of staying in squashd's unit."""
    d = cluster.workdir(USER1, "rwsilent")
    img = user_image(cluster, d / "silent.sqfs", USER1, USER1)
    keep = d / "keep"
    keep.mkdir()
    os.chown(keep, pwd.getpwnam(USER1).pw_uid, pwd.getpwnam(USER1).pw_gid)
    uid = pwd.getpwnam(USER1).pw_uid
    job_id = "3999994"
    with squashd_with(cluster, "stopped_reader_timeout = 300\n"):
        holder = BlockingJob(cluster, USER1, f"{img}:/squash/held")
        try:
            holder.wait_ready()
            (reader,) = [p for p in cluster.instance_fuse_servers() if proc_uids(p)[0] == uid]
            offset = len(cluster.squashd_log())
            workers = [int(t) for t in os.listdir(f"/proc/{reader}/task") if int(t) != reader]
            with threads_stopped(workers):
                t = time.monotonic()
                p = cluster.rawclient("mount", job_id, str(uid), f"{img}:/squash/w:rw={keep}",
                                      timeout=REQUEST_TIMEOUT + 30)
                took = time.monotonic() - t
                out = p.stdout + p.stderr
                print(f":rw=DIR over a silent reader: answered after {took:.1f} s: {out.strip()}")
                assert out.startswith("node-error"), out
                assert "mounting the overlay as user" in out and "squashd killed it" in out, out
                assert took < REQUEST_TIMEOUT + 5
                log = cluster.squashd_log()[offset:]
                assert f"killed FUSE server pid {reader} of image {img}" in log, log
            wait_until(lambda: not os.path.exists(f"/proc/{reader}"), 10, what="the silent reader to go")
            # No child of squashd's is left waiting on the mount.
            wait_until(lambda: not squashd_forks(cluster), 10,
                       what="squashd's abandoned overlay child to end")
        finally:
            cluster.rawclient("release", job_id)
            holder.release()
            wait_until(lambda: not cluster.list_mounts(), 30, what="the mounts to go")
    assert holder.job.state == "COMPLETED", holder.job.output()
    assert not [m for m in mountinfo() if m["fstype"] == "overlay"
                and m["mount_point"].startswith(str(cluster.state_dir / "mnt") + "/")]
