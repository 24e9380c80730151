"""Images merged at one target (docs/user.md, "Datasets"): several images
given the same target form one read-only tree there, a later image over an
earlier one where paths collide. A group of the user's own images (FUSE)
is one mount of the user's squash-reader serving their union
(daemon/core/union_mount.c); a group with a trusted image is one
overlayfs mount of the images' own mounts (daemon/core/merge.c). Either is
shared on the node by the jobs that merge the same images in the same
order, and gone with the last of them."""

import hashlib
import json
import os
import re
import signal
import time

import pytest

from conftest import REPO, USER1, USER2, BlockingJob, mountinfo, run, send_hup_and_wait, uid_of, wait_until
from test_health_checks import reload_conf

TARGET = "/squash/data"


def overlays(cluster):
    """squashd's merged mounts: overlayfs mounts below its mount directory
    (a writable image's overlay lives in a job's tmpfs, mnt/jN/oI)."""
    prefix = str(cluster.state_dir) + "/mnt/m"
    return [m for m in mountinfo(cluster.nodes[0].ns_pid)
            if m["fstype"] == "overlay" and m["mount_point"].startswith(prefix)]


def fuse_mounts(cluster):
    """squashd's FUSE mounts (one per image, or one per union)."""
    prefix = str(cluster.state_dir) + "/mnt/m"
    return [m for m in mountinfo(cluster.nodes[0].ns_pid)
            if m["fstype"].startswith("fuse") and m["mount_point"].startswith(prefix)]


def unions(cluster):
    return [m for m in cluster.list_mounts() if " in a union)" in m["image"]]


def bundles(cluster, user, n, name="b", per=None, where=None, comp=None):
    """n tiny images of user's, b0000.sqfs ..., each with its own file
    (per(i): {name: text}, default only/NNNN.txt) and a shared one
    (common.txt, NNNN). Packed 4 at a time: 1,024 take about 6 s. comp:
    mksquashfs's -comp (default its own, gzip)."""
    d = where or cluster.workdir(user, "bundles")
    src = d / f".src-{name}"
    src.mkdir()
    for i in range(n):
        s = src / f"{i:04d}"
        files = per(i) if per else {f"only/{i:04d}.txt": f"{i}\n", "common.txt": f"{i}\n"}
        for rel, text in files.items():
            f = s / rel
            f.parent.mkdir(parents=True, exist_ok=True)
            f.write_text(text)
    run(["chmod", "-R", "a+rX", src])
    opts = f"-comp {comp} " if comp else ""
    run(["bash", "-c", f"cd {src} && ls | xargs -P 4 -I{{}} mksquashfs {{}} {d}/{name}{{}}.sqfs "
         f"{opts}-noappend -quiet -no-progress -all-root -processors 1 >/dev/null"], timeout=300)
    paths = [d / f"{name}{i:04d}.sqfs" for i in range(n)]
    run(["chown", user, *paths])
    run(["rm", "-rf", src])
    return paths


@pytest.mark.host_release_only("squashd's own merging over the host's overlayfs: the same on every release (the reader's union runs on every libfuse in test_reader_union_matches_overlayfs)")
def test_a_job_sees_the_union_of_kernel_and_fuse_images_the_later_one_winning(cluster):
    os.chmod(cluster.trusted, 0o755)
    log_start = len(cluster.squashd_log())  # the cluster's earlier tests merge too
    kernel = cluster.make_image(cluster.trusted / "base.sqfs", {
        "common.txt": "base\n", "from-base.txt": "base only\n", "dir/x.txt": "base x\n",
        "dir/y.txt": "base y\n"}, owner="root")
    d = cluster.workdir(USER1, "own")
    mid = cluster.make_image(d / "mid.sqfs", {
        "common.txt": "mid\n", "from-mid.txt": "mid only\n", "dir/y.txt": "mid y\n"}, owner=USER1)
    top = cluster.make_image(d / "top.sqfs", {
        "common.txt": "top\n", "from-top.txt": "top only\n", "dir/x.txt": "top x\n"}, owner=USER1)
    spec = ",".join(f"{p}:{TARGET}" for p in (kernel, mid, top))
    body = f"""
for f in common.txt from-base.txt from-mid.txt from-top.txt dir/x.txt dir/y.txt; do
  printf '%s=%s\\n' "$f" "$(cat {TARGET}/$f)"
done
ls {TARGET}/dir | tr '\\n' ' '; echo
echo "mounts=$SQUASH_MOUNTS"
echo "mount=$SQUASH_MOUNT"
touch {TARGET}/new 2>/dev/null && echo writable || echo read-only
"""
    job = cluster.run_job(USER1, body, [f"--squash-image={spec}"])
    out = job.output()
    assert job.state == "COMPLETED", out
    for line in ("common.txt=top", "from-base.txt=base only", "from-mid.txt=mid only",
                 "from-top.txt=top only", "dir/x.txt=top x", "dir/y.txt=mid y",
                 "x.txt y.txt ", f"mounts={TARGET}", f"mount={TARGET}", "read-only"):
        assert line in out.splitlines() or line in out, (line, out)
    log = cluster.squashd_log()[log_start:]
    assert f"merged 3 images at" in log and f"for {TARGET}" in log, log[-3000:]
    assert "as one FUSE union" not in log  # a trusted image: an overlay

    # union_trusted_images: a group this large is a union, trusted or not;
    # the job sees the same.
    conf = cluster.dir / "squashd.conf"
    original = conf.read_text()
    try:
        conf.write_text(original + "union_trusted_images = 3\n")
        send_hup_and_wait(cluster, "setting(s) applied")
        offset = len(cluster.squashd_log())
        again = cluster.run_job(USER1, body, [f"--squash-image={spec}"])
        assert again.state == "COMPLETED" and again.output() == out, again.output()
        assert re.search(rf"merged 3 images at \S+ for {TARGET} as one FUSE union",
                         cluster.squashd_log()[offset:]), cluster.squashd_log()[offset:]
    finally:
        conf.write_text(original)
        send_hup_and_wait(cluster, "setting(s) applied")


@pytest.mark.host_release_only("squashd's own sharing of union mounts: the same on every release")
def test_two_jobs_with_the_same_list_share_one_union_mount(cluster):
    a, b, c = bundles(cluster, USER1, 3)
    same = ",".join(f"{p}:{TARGET}" for p in (a, b, c))
    other_order = ",".join(f"{p}:{TARGET}" for p in (c, b, a))
    jobs = [BlockingJob(cluster, USER1, same), BlockingJob(cluster, USER1, same)]
    try:
        for j in jobs:
            j.wait_ready()
        # One FUSE mount serves the three images: no mount per image, no
        # overlay.
        assert not overlays(cluster), overlays(cluster)
        assert len(fuse_mounts(cluster)) == 1, fuse_mounts(cluster)
        rows = cluster.list_mounts()
        assert len(rows) == 1 and rows[0]["image"] == f"{c} (+2 in a union)", rows
        assert rows[0]["mode"] == "fuse", rows
        assert sorted(rows[0]["jobs"]) == sorted(j.job.id for j in jobs), rows
        assert rows[0]["refcount"] == 6, rows  # one per image of each job
        assert "merged 3 images at" in cluster.squashd_log() and "as one FUSE union" in cluster.squashd_log()
        # Another order is another tree: a union of its own.
        third = BlockingJob(cluster, USER1, other_order, after=f"cat {TARGET}/common.txt > seen")
        jobs.append(third)
        third.wait_ready()
        assert len(unions(cluster)) == 2 and len(fuse_mounts(cluster)) == 2, cluster.list_mounts()
        jobs[0].release()
        assert len(unions(cluster)) == 2
        jobs[1].release()
        wait_until(lambda: len(fuse_mounts(cluster)) == 1, 10, 0.1, "the shared union mount to go")
        third.release()
        assert third.job.state == "COMPLETED", third.job.output()
        assert (third.dir / "seen").read_text() == "0\n"  # a (listed last) on top
    finally:
        for j in jobs:
            j.go.touch()
        for j in jobs:
            j.job.wait()
    wait_until(lambda: not fuse_mounts(cluster), 10, 0.1, "every union mount to go")
    assert not [m for m in cluster.list_mounts()], cluster.list_mounts()


@pytest.mark.host_release_only("squashd's and the reader's scale: the same on every release")
def test_1024_image_jobs_of_one_user_and_another_run_at_once(cluster):
    """The most a job may have, 1,024, at one target, twice at once for one
    user under the default settings (two orders: two unions of 1,024
    images) and once more for another user: each is one FUSE mount of its
    user's one reader, whose threads do not grow with the images, in its
    user's reader cgroup, not squashd's (whose tasks none of this uses up);
    the jobs see every file, and their ends leave nothing."""
    n = 1024
    t0 = time.monotonic()
    log_before = len(cluster.squashd_log())
    # zstd, and text that compresses (the fragment block holding it is
    # stored compressed): every read goes through the reader's
    # decompressor.
    paths = bundles(cluster, USER1, n, comp="zstd",
                    per=lambda i: {f"only/{i:04d}.txt": f"{i}\n" * 64, "common.txt": f"{i}\n" * 64})
    built = time.monotonic() - t0
    d = paths[0].parent
    forward = ",".join(f"{p}:{TARGET}" for p in paths)
    backward = ",".join(f"{p}:{TARGET}" for p in reversed(paths))
    check = f"""
ls {TARGET}/only | wc -l
head -n1 {TARGET}/common.txt
cat {TARGET}/only/0000.txt {TARGET}/only/{n - 1:04d}.txt | uniq
echo "mounts=$SQUASH_MOUNTS"
"""
    seen = {u: cluster.workdir(u, "first") / "before" for u in (USER1, USER2)}
    holders = [BlockingJob(cluster, u, forward, before=f"{{ {check}\n}} > {seen[u]}")
               for u in (USER1, USER2)]
    try:
        for h in holders:
            h.wait_ready(timeout=120)
        job = cluster.run_job(USER1, check, [f"--squash-image={backward}"], cwd=d)
        out = job.output()
        assert job.state == "COMPLETED", out
        # The listing read a compressed directory block of every bundle;
        # the files, compressed fragments of the first and the last.
        assert out.split()[:4] == [str(n), "0", "0", str(n - 1)], out
        assert f"mounts={TARGET}" in out, out
        for u in (USER1, USER2):
            lines = seen[u].read_text().split()
            assert lines[:4] == [str(n), str(n - 1), "0", str(n - 1)], (u, lines)
        log = cluster.squashd_log()[log_before:]
        readers = re.findall(r"started \S+ pid (\d+) for the FUSE mounts of user (\S+)", log)
        assert len(readers) == 2, log[-3000:]
        squashd_cgroups = open(f"/proc/{cluster.squashd_pid()}/cgroup").read()
        threads = {}
        for pid, who in readers:
            threads[who] = len(os.listdir(f"/proc/{pid}/task"))
            mine = open(f"/proc/{pid}/cgroup").read()
            assert re.search(rf"/squashd-readers\.[^/\n]+/uid-\d+/reader-{pid}$", mine, re.M), mine
            assert mine != squashd_cgroups
        print(f"{n} images, three jobs: built in {built:.1f} s, the jobs in "
              f"{time.monotonic() - t0 - built:.1f} s; reader threads {threads}")
        assert len(unions(cluster)) == 2 and len(fuse_mounts(cluster)) == 2, cluster.list_mounts()
    finally:
        for h in holders:
            h.go.touch()
        for h in holders:
            h.job.wait()
    for h in holders:
        assert h.job.state == "COMPLETED", h.job.output()
    wait_until(lambda: not fuse_mounts(cluster), 20, 0.1, "the union mounts to go")


def test_rw_in_a_merge_group_is_refused_at_submission(cluster):
    a, b = bundles(cluster, USER1, 2)
    err = cluster.sbatch_refuses(USER1, f"{a}:{TARGET},{b}:{TARGET}:rw")
    assert "merged images are read-only" in err and ":rw is not supported" in err, err
    # Nested targets stay refused.
    err = cluster.sbatch_refuses(USER1, f"{a}:{TARGET},{b}:{TARGET}/inner")
    assert "nested targets are not supported" in err, err


def test_a_glob_expands_sorted_at_submission(cluster):
    d = cluster.workdir(USER1, "glob")
    # Made in another order than the names sort in: the sort decides.
    for i in (2, 0, 1):
        bundles(cluster, USER1, 1, name=f"bundle_{i}_", where=d,
                per=lambda _, i=i: {"common.txt": f"{i}\n", f"only{i}.txt": "x\n"})
    cluster.make_image(d / "other.sqfs", {"common.txt": "other\n"}, owner=USER1)
    job = cluster.run_job(USER1, f"""
cat {TARGET}/common.txt
ls {TARGET}
echo "images=$SQUASH_IMAGES"
""", [f"--squash-image={d}/bundle_*.sqfs:{TARGET}"], cwd=d)
    out = job.output()
    assert job.state == "COMPLETED", out
    lines = out.splitlines()
    assert lines[0] == "2", out  # bundle_2 is last in name order: on top
    assert "only0.txt" in lines and "only2.txt" in lines and "other.sqfs" not in out, out
    assert lines[-1] == "images=" + ",".join(
        f"{d}/bundle_{i}_0000.sqfs" for i in range(3)), out
    # Nothing matches: refused before the job is queued, with the count.
    err = cluster.sbatch_refuses(USER1, f"{d}/nothing_*.sqfs:{TARGET}")
    assert "nothing_*.sqfs: no file matches (0 images)" in err, err
    # Too many matches: refused with the count, before any file is read.
    many = d / "many"
    many.mkdir()
    for i in range(1025):
        (many / f"b{i:04d}.sqfs").touch()
    run(["chown", "-R", USER1, many])
    err = cluster.sbatch_refuses(USER1, f"{many}/b*.sqfs:{TARGET}")
    assert "b*.sqfs matches 1025 files; with the other images that is 1025, more than the 1024" in err, err


@pytest.mark.host_release_only("squashd's own restart and adoption: the same on every release")
def test_a_union_mount_outlives_a_squashd_restart_and_its_readers_death(cluster):
    """The state file records a union mount with its images; a restarted
    squashd adopts it and its reader's connection, links the job's images
    to it again, gives it a new reader (all its images) when the reader
    dies under the job, and releases it at the job's end."""
    a, b = bundles(cluster, USER1, 2)
    blk = BlockingJob(cluster, USER1, f"{a}:{TARGET},{b}:{TARGET}",
                      after=f"srun cat {TARGET}/common.txt > after\nls {TARGET}/only >> after")
    try:
        blk.wait_ready()
        before = fuse_mounts(cluster)
        assert len(before) == 1 and not overlays(cluster), before
        node = cluster.nodes[0]
        node.squashd_stop()
        offset = len(cluster.squashd_log())
        node.squashd_start()
        assert [m["mount_point"] for m in fuse_mounts(cluster)] == [m["mount_point"] for m in before]
        rows = unions(cluster)
        assert len(rows) == 1 and rows[0]["jobs"] == [blk.job.id], rows
        assert rows[0]["refcount"] == 2, rows
        log = cluster.squashd_log()[offset:]
        assert f"adopted mount of {b} (+1 in a union)" in log, log[-2000:]
        if "kept the FUSE connection of" in log:
            # The reader dies under the job: a new one takes both images.
            old = rows[0]["server_pid"]
            os.kill(old, signal.SIGKILL)
            wait_until(lambda: unions(cluster) and unions(cluster)[0].get("server_pid") not in (None, old),
                       10, 0.1, "a new reader for the union")
            assert "restarted as pid" in cluster.squashd_log()[offset:]
        else:
            print("no kept connection on this kernel: the reader's death is not tried")
    finally:
        blk.go.touch()
    blk.job.wait()
    assert blk.job.state == "COMPLETED", blk.job.output()
    assert (blk.dir / "after").read_text() == "1\n0000.txt\n0001.txt\n"
    wait_until(lambda: not fuse_mounts(cluster), 10, 0.1, "the union mount to go")


@pytest.mark.host_release_only("squashd's own restart and adoption: the same on every release")
def test_a_merged_overlay_outlives_a_squashd_restart(cluster):
    """The same for trusted images: their overlay is recorded after the
    mounts it stacks and linked to the job's images again."""
    os.chmod(cluster.trusted, 0o755)
    a = cluster.make_image(cluster.trusted / "ra.sqfs", {"common.txt": "0\n", "only/0000.txt": "a"},
                           owner="root")
    b = cluster.make_image(cluster.trusted / "rb.sqfs", {"common.txt": "1\n", "only/0001.txt": "b"},
                           owner="root")
    blk = BlockingJob(cluster, USER1, f"{a}:{TARGET},{b}:{TARGET}",
                      after=f"srun cat {TARGET}/common.txt > after\nls {TARGET}/only >> after")
    try:
        blk.wait_ready()
        before = overlays(cluster)
        assert len(before) == 1, before
        node = cluster.nodes[0]
        node.squashd_stop()
        node.squashd_start()
        assert [m["mount_point"] for m in overlays(cluster)] == [m["mount_point"] for m in before]
        rows = [m for m in cluster.list_mounts() if m["mode"] == "merged"]
        assert len(rows) == 1 and rows[0]["jobs"] == [blk.job.id], rows
        assert rows[0]["refcount"] == 2, rows
        assert f"adopted mount of {b} (+1 merged)" in cluster.squashd_log(), cluster.squashd_log()[-2000:]
    finally:
        blk.go.touch()
    blk.job.wait()
    assert blk.job.state == "COMPLETED", blk.job.output()
    assert (blk.dir / "after").read_text() == "1\n0000.txt\n0001.txt\n"
    wait_until(lambda: not overlays(cluster), 10, 0.1, "the merged mount to go")


@pytest.mark.host_release_only("squashd's own budget, the same on every Slurm release")
def test_a_user_past_their_share_of_merged_mounts_fails_alone(cluster):
    """max_merged_mounts_per_user (core/merged_budget.c): a user who holds
    that many merged overlays gets a user error for a new merge, naming the
    setting, without draining the node; sharing a merge they hold works;
    another user's merge is theirs to make."""
    os.chmod(cluster.trusted, 0o755)
    a, b, c = (cluster.make_image(cluster.trusted / f"mb-{n}.sqfs", {"common.txt": f"{n}\n", f"only/{n}.txt": n},
                                  owner="root") for n in "abc")
    conf = cluster.dir / "squashd.conf"
    original = conf.read_text()

    def merged_budget(user):
        rows = json.loads(cluster.squashctl("status", "--json").stdout)["user_budgets"]
        mine = [r for r in rows if r["uid"] == uid_of(user)]
        return mine[0]["budgets"].get("merged mounts") if mine else None

    try:
        reload_conf(cluster, original + "max_merged_mounts_per_user = 1\n",
                    "reload: max_merged_mounts_per_user is now '1'")
        blk = BlockingJob(cluster, USER1, f"{a}:{TARGET},{b}:{TARGET}")
        try:
            blk.wait_ready()
            assert len(overlays(cluster)) == 1
            assert merged_budget(USER1) == {"used": 1, "limit": 1}
            job = cluster.run_job(USER1, "cat /squash/other/common.txt\n",
                                  [f"--squash-image={a}:/squash/other,{c}:/squash/other"])
            assert job.state == "FAILED", job.output()
            assert (f"the jobs and sessions of uid {uid_of(USER1)} on this node already hold 1 merged mounts "
                    "(images merged at one target; max_merged_mounts_per_user = 1)") in job.output(), job.output()
            assert "drain" not in cluster.node_state(), "a user's budget drained the node"
            # Sharing the merge the user holds makes none.
            job = cluster.run_job(USER1, f"cat {TARGET}/common.txt\n", [f"--squash-image={a}:{TARGET},{b}:{TARGET}"])
            assert job.state == "COMPLETED" and job.output() == "b\n", job.output()
            # Another user's share is their own.
            job = cluster.run_job(USER2, "cat /squash/other/common.txt\n",
                                  [f"--squash-image={a}:/squash/other,{c}:/squash/other"])
            assert job.state == "COMPLETED" and job.output() == "c\n", job.output()
        finally:
            blk.go.touch()
        blk.job.wait()
        assert blk.job.state == "COMPLETED", blk.job.output()
        wait_until(lambda: not overlays(cluster) and not cluster.list_mounts(), 15, 0.1,
                   "the merged mounts to go")
    finally:
        reload_conf(cluster, original, "reload: max_merged_mounts_per_user is now '256'")


def _tree_digest(files):
    """What `find . -type f | LC_ALL=C sort | xargs md5sum | md5sum` prints
    in a tree of these {relative path: bytes}."""
    lines = "".join(f"{hashlib.md5(files[p]).hexdigest()}  ./{p}\n" for p in sorted(files))
    return hashlib.md5(lines.encode()).hexdigest()


def test_a_dataset_of_56_bundles_reads_the_same_on_every_node(cluster3):
    """The HCP layout (docs/user.md, "A dataset end to end") on three nodes:
    112 subjects packed by squash-pack into 56 bundles, submitted with the
    glob it prints, and a corrections image after it that shadows two
    subjects' files. Every node's tasks see every file of every bundle with
    its content, the corrections winning."""
    c = cluster3
    d = c.workdir(USER1, "hcp")
    src, out = d / "src", d / "bundles"
    files = {}
    for i in range(112):
        files[f"sub_{i:03d}/info.txt"] = f"subject {i}\n".encode()
        files[f"sub_{i:03d}/T1w/T1w.nii"] = bytes([i]) * (1000 + i)
    for rel, data in files.items():
        (src / rel).parent.mkdir(parents=True, exist_ok=True)
        (src / rel).write_bytes(data)
    out.mkdir()
    run(["chmod", "-R", "a+rX", d])
    # Four files, directories included, per subject: two subjects a bundle.
    p = run([REPO / "contrib" / "squash-pack", "--bundle-files", "8", "--target", "/squash/hcp", src, out],
            timeout=300)
    assert len(list(out.glob("bundle_*.sqfs"))) == 56, sorted(f.name for f in out.iterdir())
    printed = re.search(r"--squash-image='([^']+)'", p.stdout + p.stderr)
    assert printed and printed.group(1) == f"{out}/bundle_*.sqfs:/squash/hcp", p.stdout + p.stderr
    fixes = {"sub_007/info.txt": b"subject 7, corrected\n", "sub_100/T1w/T1w.nii": b"rescanned\n"}
    fix = c.make_image(d / "fixes.sqfs", {k: v.decode() for k, v in fixes.items()}, owner=USER1)
    run(["chown", "-R", USER1, out])
    spec = printed.group(1)
    # (Each bundle holds squash-pack's /.squash/meta too: the union shows
    # one, the subjects' files are counted without it.)
    files_cmd = "find . -path ./.squash -prune -o -type f -print"
    job = c.run_job(USER1, "srun -N3 --ntasks-per-node=1 bash -c 'cd /squash/hcp && echo \"$(hostname) "
                    f"$({files_cmd} | wc -l) $({files_cmd} | LC_ALL=C sort | xargs md5sum | md5sum)\"; "
                    "test -f .squash/meta && echo \"$(hostname) has meta\"'\n",
                    [f"--squash-image={spec},{fix}:/squash/hcp", "-N3"])
    out_text = job.output()
    assert job.state == "COMPLETED", out_text
    want = _tree_digest({**files, **fixes})
    seen = re.findall(r"^(n\d) (\d+) ([0-9a-f]{32})  -$", out_text, re.M)
    assert sorted(seen) == [(n, str(len(files)), want) for n in ("n1", "n2", "n3")], out_text
    assert sorted(re.findall(r"^(n\d) has meta$", out_text, re.M)) == ["n1", "n2", "n3"], out_text
    for n in c.nodes:
        wait_until(lambda: not n.list_mounts(), 20, what=f"{n.name}'s epilog to release the mounts")
