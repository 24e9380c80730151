"""squash-reader stores a small file into the kernel's page cache when
python opens it, before the client reads it (daemon/reader/neighbour_push.c,
open_push; issue 38): python's open() asks isatty() of every file, an
IOCTL the kernel forwards to the reader each time (it never remembers the
answer); the reader stores the file's bytes before it answers, while the
client waits, so the READ that would follow is not sent. A cold import
sends a READ for one small file in three instead of every one. Counted
with the kernel's FUSE tracepoint on the reader's connection, with every
byte compared with the kernel's squashfs mount of the same image: files
opened by python in an order that jumps (reversed: nothing is stored
ahead by a run of reads) come without a READ, read again in a second pass
without any request, and a single-threaded reader stores nothing."""

import pytest

from reader_and_kernel import FuseRequests, kernel_and_reader
from test_reader_stores_the_next_small_files_ahead import DIRS, FILES, image, small_files, where  # noqa: F401

pytestmark = pytest.mark.skipif(not FuseRequests.available(),
                                reason="no fuse tracepoint in /sys/kernel/tracing")


def python_reads(image, where, reader_args=(), passes=1):
    """Reads every small file with python's open(), in reverse walk order,
    on a fresh mount; checks each against the kernel's mount and returns
    (files read, the requests of each pass by opcode)."""
    with kernel_and_reader(image, where, reader_args) as (kdir, fdir):
        files = small_files(fdir)
        assert files == small_files(kdir) and len(files) == DIRS * (FILES + 1)
        files.reverse()
        counts = []
        requests = FuseRequests(fdir, "store-at-open")
        try:
            for _ in range(passes):
                for f in files:
                    with open(fdir / f, "rb") as fh:
                        assert fh.read() == (kdir / f).read_bytes(), f
                counts.append(requests.take())
        finally:
            requests.close()
    return len(files), counts


def test_a_small_file_python_opens_is_stored_before_it_is_read(image, where):
    files, (first, second) = python_reads(image, where, passes=2)
    assert first["IOCTL"] >= files, first
    # A store can only lose to a READ of the same file from elsewhere;
    # nothing else reads here.
    assert first["READ"] == 0, first
    assert second.get("READ", 0) == 0, second


def test_a_single_threaded_reader_stores_nothing_at_open(image, where):
    files, (first,) = python_reads(image, where, ["--threads", "1"])
    assert first["READ"] == files, first
