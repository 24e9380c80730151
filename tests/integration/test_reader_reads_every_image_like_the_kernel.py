"""squash-reader shows every image squashfs-tools makes as the kernel's
squashfs shows it. One tree with every feature (files of every size class
around the block size, a sparse file, hard links, symlinks short and long,
a 255-byte name, a 40-deep path, a fifo and a device, owners, modes with
set-id and sticky bits, times, user.* and security.capability xattrs,
short and out-of-line values) is packed with every compressor the kernel
reads (gzip, xz with and without a BCJ filter, lzo, lz4 with and without
-Xhc, zstd) and with each way of storing tails (fragments, -no-fragments,
-tailends, -always-use-fragments); a second image has one directory of
100,000 entries, whose lookups go through the directory index. Each image
is mounted by the kernel and by squash-reader alone (reader_and_kernel.py)
and both must agree on every entry: stat (st_blksize aside), the order of
readdir, file contents, link targets, xattr names and values, statvfs;
and the kernel's view must be the packed tree. Legacy lzma, which the
kernel never read, is compared with the packed tree in the unit test
test_reader_reads_every_codec. On every release: each brings its own
squashfs-tools and libfuse."""

import errno
import hashlib
import os
import shutil
import struct
import tempfile
from pathlib import Path

import pytest

from conftest import run
from reader_and_kernel import kernel_and_reader, stats, statvfs

BS = 128 * 1024
# security.capability, version 2: cap_net_bind_service (10) permitted
# and effective.
CAPABILITY = struct.pack("<IIIII", 0x02000001, 1 << 10, 0, 0, 0)
VARIANTS = [
    ["-comp", "gzip"],
    ["-comp", "xz"],
    ["-comp", "xz", "-Xbcj", "x86"],
    ["-comp", "lzo"],
    ["-comp", "lz4"],
    ["-comp", "lz4", "-Xhc"],
    ["-comp", "zstd"],
    ["-comp", "zstd", "-no-fragments"],
    ["-comp", "gzip", "-tailends"],
    ["-comp", "zstd", "-always-use-fragments"],
]


def make_tree(src):
    """The feature tree; returns what it holds, for the comparison with the
    packed tree: {relative path: xattrs it was given}."""
    def data(n, seed):
        return hashlib.shake_256(f"{seed}".encode()).digest(n)

    xattrs = {}
    for name, size in [("empty", 0), ("one", 1), ("page", 4095), ("block", BS),
                       ("block+1", BS + 1), ("three-blocks-and-a-tail", 3 * BS + 4321),
                       ("zeros", 2 * BS + 10)]:
        (src / name).write_bytes(b"\0" * size if name == "zeros" else data(size, name))
    with open(src / "sparse", "wb") as f:  # data, a hole of 3 blocks, data
        f.write(data(BS + 100, "sparse-head"))
        f.seek(4 * BS + 7)
        f.write(data(5000, "sparse-tail"))
    (src / "links").mkdir()
    (src / "links" / "a").write_bytes(data(777, "hard"))
    os.link(src / "links" / "a", src / "links" / "b")
    os.link(src / "links" / "a", src / "c-hard")
    os.symlink("a", src / "links" / "short")
    os.symlink("x/" * 1999 + "end", src / "links" / "long")  # a 4,001-byte target
    os.symlink("nowhere", src / "links" / "dangling")
    (src / ("n" * 255)).write_text("a 255-byte name\n")
    deep = src / "deep"
    for i in range(40):
        deep = deep / f"d{i:02d}"
    deep.mkdir(parents=True)
    (deep / "bottom").write_text("40 directories down\n")
    os.mkfifo(src / "fifo")
    os.mknod(src / "null", 0o620 | 0o020000, os.makedev(1, 3))
    (src / "modes").mkdir()
    for name, mode in [("setuid", 0o4755), ("setgid", 0o2750), ("private", 0o600), ("none", 0)]:
        (src / "modes" / name).write_text(name + "\n")
        os.chmod(src / "modes" / name, mode)
    (src / "modes" / "sticky").mkdir()
    os.chmod(src / "modes" / "sticky", 0o1777)
    os.chown(src / "modes" / "private", 1234, 5678)
    os.lchown(src / "links" / "short", 4321, 8765)
    for name, values in [("one", {"user.short": b"1", "user.empty": b""}),
                         ("links", {"user.dir": b"on a directory"}),
                         ("page", {"user.long": data(3000, "xattr"), "security.capability": CAPABILITY}),
                         ("block", {"user.shared": b"same value"}),
                         ("block+1", {"user.shared": b"same value"})]:
        for k, v in values.items():
            os.setxattr(src / name, k, v, follow_symlinks=False)
        xattrs[name] = values
    for i, p in enumerate(sorted(src.rglob("*"))):
        os.utime(p, (0, 1_600_000_000 + i * 3601), follow_symlinks=False)  # squashfs: seconds
    return xattrs


def view(root):
    """Everything a reader shows of the tree under root, entry by entry."""
    out = {}
    for dp, dns, fns in os.walk(root):
        order = os.listdir(dp)  # readdir's order, compared as is
        for n in [""] + sorted(dns + fns):
            p = os.path.join(dp, n) if n else dp
            rel = os.path.relpath(p, root)
            names = sorted(os.listxattr(p, follow_symlinks=False))
            entry = {"xattrs": {x: os.getxattr(p, x, follow_symlinks=False).hex() for x in names}}
            if os.path.islink(p):
                entry["target"] = os.readlink(p)
            elif os.path.isfile(p):
                with open(p, "rb") as f:
                    entry["sha256"] = hashlib.sha256(f.read()).hexdigest()
            elif os.path.isdir(p) and not n:
                entry["readdir"] = order
            try:
                os.getxattr(p, "user.absent", follow_symlinks=False)
                entry["absent"] = 0
            except OSError as e:
                entry["absent"] = e.errno
            out[rel] = entry
    return out


def compare(img, where, src_view=None, src_stats=None):
    with kernel_and_reader(img, where) as (kdir, fdir):
        kv, fv = view(kdir), view(fdir)
        assert fv == kv, {k: (fv.get(k), kv.get(k)) for k in set(fv) | set(kv) if fv.get(k) != kv.get(k)}
        ks, fs = stats(kdir), stats(fdir)
        assert fs == ks, {k: (fs.get(k), ks.get(k)) for k in set(fs) | set(ks) if fs.get(k) != ks.get(k)}
        assert statvfs(fdir) == statvfs(kdir), (statvfs(fdir), statvfs(kdir))
        if src_view is not None:
            assert packed(kv) == packed(src_view)
            assert packed_stats(ks) == packed_stats(src_stats)


def packed(v):
    """A view without what the image changes by design: the root (it takes
    the tree's mode and times, not its xattrs) and readdir's order (the
    image sorts names)."""
    return {k: {f: x for f, x in e.items() if f != "readdir"} for k, e in v.items() if k != "."}


def packed_stats(s):
    """Mode, link count, uid, gid, size (not of directories: a squashfs
    directory's size is its own) and mtime of every entry but the root;
    inode numbers and ctime are the image's."""
    return {k: (v[0], v[2], v[3], v[4], None if (v[0] & 0o170000) == 0o040000 else v[5], v[7])
            for k, v in s.items() if k != "."}


@pytest.fixture(scope="module")
def tree():
    src = Path(tempfile.mkdtemp(prefix="every-image.", dir="/dev/shm"))
    try:
        xattrs = make_tree(src)
        yield src, xattrs, view(src), stats(src)
    finally:
        shutil.rmtree(src)


@pytest.mark.parametrize("options", VARIANTS, ids=[" ".join(v) for v in VARIANTS])
def test_an_image_reads_as_through_the_kernel(cluster, tree, options):
    src, xattrs, src_view, src_stats = tree
    d = cluster.workdir("root", "every-image-" + "-".join(o.strip("-") for o in options))
    try:
        img = d / "image.sqfs"
        run(["mksquashfs", src, img, "-noappend", "-quiet", "-no-progress", "-processors", "1", *options])
        compare(img, d, src_view, src_stats)
        # The tree had what the comparison is about.
        assert {k: {x: v.hex() for x, v in xs.items()} for k, xs in xattrs.items()} == \
            {k: src_view[k]["xattrs"] for k in xattrs}
    finally:
        shutil.rmtree(d)


@pytest.mark.host_release_only("the reader's own paging of a large listing: the same with every libfuse (the images above run on every release)")
def test_a_directory_of_100000_entries_reads_as_through_the_kernel(cluster):
    """Lookups of present and absent names go through the directory index
    (squash-reader's dir_lookup); readdir lists all in the same order."""
    d = cluster.workdir("root", "every-image-bigdir")
    src = Path(tempfile.mkdtemp(prefix="bigdir.", dir="/dev/shm"))
    try:
        big = src / "big"
        big.mkdir()
        names = [f"entry-{i:06d}-{hashlib.md5(str(i).encode()).hexdigest()[:8]}" for i in range(100_000)]
        for n in names:
            (big / n).touch()
        img = d / "bigdir.sqfs"
        run(["mksquashfs", src, img, "-noappend", "-quiet", "-no-progress", "-comp", "zstd"], timeout=300)
        with kernel_and_reader(img, d) as (kdir, fdir):
            listed = os.listdir(fdir / "big")
            assert listed == os.listdir(kdir / "big")
            assert sorted(listed) == sorted(names)
            # Every 97th name, the first and the last, and names between and
            # beyond them that are absent.
            probe = names[::97] + [names[0], names[-1]]
            for n in probe:
                assert os.lstat(fdir / "big" / n).st_ino == os.lstat(kdir / "big" / n).st_ino, n
            for n in ["entry-", "entry-000000-", names[500] + "x", "zzz", "a", names[-1] + "0"]:
                for root in (fdir, kdir):
                    with pytest.raises(OSError) as e:
                        os.lstat(root / "big" / n)
                    assert e.value.errno == errno.ENOENT, (root, n)
    finally:
        shutil.rmtree(src)
        shutil.rmtree(d)
