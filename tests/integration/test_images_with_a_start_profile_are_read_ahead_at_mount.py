"""An image packed with a start profile (squash-pack --profile) has the
parts of the image file its start read brought into the node's page cache
as soon as squashd mounts it for a job, before the job reads anything:
by the user's squash-reader for a user's image (FUSE), and by squashd's
squash-reader --prefetch for a trusted image (the kernel's squashfs on a
loop device, which reads the file through the same page cache). A file the
profile does not name stays out; an image without a profile gets nothing
read ahead. Then the profile is walked through the mount itself (the
user's reader, with the mount's root from squashd; for a trusted image the
same prefetch process, which opens the root before it drops to nobody):
the small files' own pages are then in the kernel's cache of the mount,
not only the image file's."""

import os
import shutil
import subprocess

import pytest

from conftest import BUILD, REPO, USER1, BlockingJob, run, wait_until

PACK = REPO / "contrib" / "squash-pack"
MIB = 1 << 20
WANTED = 6 * MIB
SMALL = 24 << 10  # below the walk's START_PROFILE_WALK_FILE_MAX (64 KiB)


def cached_bytes(path):
    """Bytes of the file in the page cache (util-linux fincore)."""
    out = run(["fincore", "--bytes", "--noheadings", "--output", "RES", path]).stdout
    return int(out.split()[0])


def drop_cache(path):
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fdatasync(fd)
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(fd)


@pytest.fixture(scope="module")
def images(cluster):
    """A user's image with a profile that read lib/wanted.so and
    lib/small.py, the same file as a trusted image, and the user's image
    packed without a profile."""
    d = cluster.workdir(USER1, "profiled")
    src = d / "stack"
    (src / "lib").mkdir(parents=True)
    # Incompressible: their parts of the image are as large as they are.
    (src / "lib" / "wanted.so").write_bytes(os.urandom(WANTED))
    (src / "lib" / "unread.bin").write_bytes(os.urandom(WANTED))
    (src / "lib" / "small.py").write_bytes(os.urandom(SMALL))
    for p in (src, src / "lib", *(src / "lib").iterdir()):
        p.chmod(0o755 if p.is_dir() else 0o644)
    env = dict(os.environ, SQUASH_READER=str(BUILD / "daemon" / "reader" / "squash-reader"))
    user_img = d / "profiled.sqfs"
    plain_img = d / "plain.sqfs"
    for img, extra in ((user_img, ["--profile", "cat lib/wanted.so lib/small.py >/dev/null"]), (plain_img, [])):
        p = subprocess.run([PACK, "-q", "--no-meta", src, img, *extra], env=env,
                           capture_output=True, text=True, timeout=300)
        assert p.returncode == 0, p.stdout + p.stderr
        img.chmod(0o644)
    profile = run(["unsquashfs", "-cat", user_img, ".squash/start-profile"]).stdout
    assert profile.splitlines()[1:] == [f"0 {WANTED} lib/wanted.so", f"0 {SMALL} lib/small.py"], profile
    trusted_img = cluster.trusted / "profiled.sqfs"
    shutil.copyfile(user_img, trusted_img)
    trusted_img.chmod(0o644)
    yield {"fuse": user_img, "kernel": trusted_img, "plain": plain_img}
    trusted_img.unlink()


@pytest.mark.host_release_only("the reader's and squashd's own read-ahead: the same on every release")
@pytest.mark.parametrize("mode", ["fuse", "kernel"])
def test_the_profile_is_in_the_page_cache_before_the_job_reads(cluster, images, mode):
    img = images[mode]
    drop_cache(img)
    assert cached_bytes(img) < MIB, "the image's pages could not be dropped"
    blk = BlockingJob(cluster, USER1, str(img), after="md5sum /squash/profiled/lib/wanted.so")
    try:
        blk.wait_ready()
        mounts = [m for m in cluster.list_mounts() if m["image"] == str(img)]
        assert [m["mode"] for m in mounts] == [mode], cluster.list_mounts()
        # Nobody has read a file yet: only the read-ahead brings it in.
        # It is advice (POSIX_FADV_WILLNEED), which the kernel may carry
        # out short by a few pages when the disk is busy (readahead I/O
        # may be dropped, its allocations do not retry): twice in about
        # 15 full runs 56-80 KiB of the 6 MiB never came. Nine tenths
        # cannot come from anything but the read-ahead.
        want = (WANTED + SMALL) * 9 // 10
        try:
            wait_until(lambda: cached_bytes(img) >= want, 20, 0.1,
                       f"{want} of the profile's {WANTED + SMALL} bytes of {img} in the page cache")
        except AssertionError as e:
            status = cluster.squashctl("status", check=False)
            budgets = status.stdout[status.stdout.find("per-user budgets"):]
            raise AssertionError(f"{e}: {cached_bytes(img)} bytes there; squashd's budgets:\n"
                                 f"{budgets}\nsquashd's log:\n{cluster.squashd_log()[-4000:]}") from None
        assert cached_bytes(img) < WANTED + 2 * MIB, \
            f"more than the profile was read ahead: {cached_bytes(img)} bytes"
    finally:
        blk.release()
    assert blk.job.state == "COMPLETED", blk.job.output()


@pytest.mark.host_release_only("the reader's own walk: the same on every release")
@pytest.mark.parametrize("mode", ["fuse", "kernel"])
def test_the_profiled_small_files_are_in_the_mounts_cache_before_the_job_reads(cluster, images, mode):
    img = images[mode]
    drop_cache(img)
    blk = BlockingJob(cluster, USER1, str(img), after="md5sum /squash/profiled/lib/wanted.so")
    try:
        blk.wait_ready()
        (point,) = [m["mount_point"] for m in cluster.list_mounts() if m["image"] == str(img)]
        lib = f"/proc/{cluster.nodes[0].ns_pid}/root{point}/lib"
        # Nobody has read a file of the mount yet: only the walk brings it
        # in, a small file's bytes only (a large one is read on faults).
        wait_until(lambda: cached_bytes(f"{lib}/small.py") >= SMALL, 20, 0.1,
                   "lib/small.py's pages in the mount's page cache")
        assert cached_bytes(f"{lib}/wanted.so") == 0, "a large file was read through the mount"
        assert cached_bytes(f"{lib}/unread.bin") == 0, "a file the profile does not name was read"
    finally:
        blk.release()
    assert blk.job.state == "COMPLETED", blk.job.output()


@pytest.mark.host_release_only("the reader's own read-ahead: the same on every release")
def test_an_image_without_a_profile_gets_nothing_read_ahead(cluster, images):
    img = images["plain"]
    drop_cache(img)
    blk = BlockingJob(cluster, USER1, str(img))
    try:
        blk.wait_ready()
        # As long as the profiled image took, and then some.
        with pytest.raises(AssertionError):
            wait_until(lambda: cached_bytes(img) >= MIB, 3, 0.1, "pages of an image without a profile")
    finally:
        blk.release()
    assert blk.job.state == "COMPLETED", blk.job.output()
