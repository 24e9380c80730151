"""squash-reader stores the small files packed after the one a READ asks
for into the kernel's page cache before it answers that READ, once a
client reads the image's files in the order they were packed
(daemon/reader/neighbour_push.c; issue 38): a client reading a tree file
after file then asks for about one file per fragment block instead of
one per file. Counted with the kernel's FUSE tracepoint on the reader's
connection, with every byte compared with the kernel's squashfs mount of
the same image: in the packing order most files come without a READ; in
the reverse order (a client that jumps) every file is asked for, so
nothing is stored that the client does not go on to read next; and a
single-threaded reader stores nothing (the READ a store may wait for
would have no other thread to answer it)."""

import os
import random
import shutil
import tempfile
from pathlib import Path

import pytest

from reader_and_kernel import FuseRequests, kernel_and_reader, packed

DIRS, FILES = 3, 80

pytestmark = pytest.mark.skipif(not FuseRequests.available(),
                                reason="no fuse tracepoint in /sys/kernel/tracing")


@pytest.fixture(scope="module")
def image():
    """Small files of 100-3,000 bytes, with what breaks a run among them:
    an empty file, a symbolic link, a file of three data blocks and a
    subdirectory."""
    def fill(src):
        rnd = random.Random(38)
        for i in range(DIRS):
            d = src / f"d{i}"
            (d / "sub").mkdir(parents=True)
            for j in range(FILES):
                (d / f"f{j:03d}").write_bytes(rnd.randbytes(rnd.randint(100, 3000)))
            (d / "f020-empty").touch()
            os.symlink("f000", d / "f030-link")
            (d / "f040-large").write_bytes(rnd.randbytes(300 * 1024))
            (d / "sub" / "g").write_bytes(rnd.randbytes(2000))

    with packed("store-ahead.", fill) as img:
        yield img


def small_files(root):
    """Every regular file of 1 byte to 64 KiB under root, in the order a
    walk meets them (os.walk, names sorted: the order mksquashfs packs)."""
    out = []
    for dp, dns, fns in os.walk(root):
        dns.sort()
        for n in sorted(fns):
            p = Path(dp) / n
            if p.is_file() and not p.is_symlink() and 0 < p.stat().st_size <= 65536:
                out.append(p.relative_to(root))
    return out


def read_raw(path):
    """A file's bytes read as md5sum or cat read them: no ioctl on the way
    (python's open() asks isatty(), which squash-reader answers by storing
    the file: test_reader_stores_a_small_file_python_opens.py)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        out = b""
        while chunk := os.read(fd, 1 << 20):
            out += chunk
        return out
    finally:
        os.close(fd)


def read_through(image, where, order, reader_args=(), read=read_raw):
    """Lists the tree on a fresh mount of image (as find does), then reads
    its small files in the walk's order or reversed; checks each against
    the kernel's mount and returns (files read, READ requests the reader
    got for them). Only files the kernel knows (listed or looked up) can
    be stored ahead."""
    with kernel_and_reader(image, where, reader_args) as (kdir, fdir):
        files = small_files(fdir)
        assert files == small_files(kdir) and len(files) == DIRS * (FILES + 1)
        if order == "reversed":
            files.reverse()
        requests = FuseRequests(fdir, "store-ahead")
        try:
            for f in files:
                assert read(fdir / f) == (kdir / f).read_bytes(), f
            reads = requests.take()["READ"]
        finally:
            requests.close()
    return len(files), reads


@pytest.fixture
def where():
    d = Path(tempfile.mkdtemp(prefix="store-ahead.", dir="/dev/shm"))
    yield d
    shutil.rmtree(d)


def test_files_read_in_packing_order_mostly_come_without_a_read(image, where):
    files, reads = read_through(image, where, "walk")
    # 243 files of 1.5 KiB on average fill about three fragment blocks of
    # 128 KiB; a READ starts each run, one more after each break (a READ
    # that finds the next file is the one after the last stored).
    assert reads <= files // 6, (files, reads)


def test_files_read_in_reverse_are_each_asked_for(image, where):
    files, reads = read_through(image, where, "reversed")
    assert reads == files


def test_a_single_threaded_reader_stores_nothing_ahead(image, where):
    files, reads = read_through(image, where, "walk", ["--threads", "1"])
    assert reads == files
