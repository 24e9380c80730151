"""squash-reader reads past 4 GiB exactly as the kernel's squashfs does:
a file over 4 GiB (64-bit sizes, block counts and read offsets) and an
image over 4 GiB (64-bit block and fragment positions). Each image is
mounted read-only twice, by the kernel (loop) and by squash-reader run
directly on a directory (no cluster, no job: the reader alone), and both
are compared with each other and with what was packed: regions across
the 4 GiB boundaries and reads at offsets past them (SHA-256 of each),
holes, tail fragments, stat of every entry (st_blksize aside: 1024 for
the kernel, 4096 for the reader) and statvfs.

- The file over 4 GiB is sparse input on tmpfs (a few distinct non-zero
  runs around and past 4 GiB, a non-zero tail fragment), packed with 1 MiB
  blocks: mksquashfs still reads every byte, 1.3-5 s on 2 cores, the test
  about 1.5-6 s. It runs on every release, where the comparison tests run.
- The image over 4 GiB needs 4 GiB of real data, packed with -noD (stored
  as is) from pseudo file commands (no input file on disk) and 128 KiB
  blocks. Making it writes 4 GiB: 14-60 s here, on disk or on tmpfs alike
  (the cost is this virtual machine's first touch of 4 GiB of memory);
  the generator widens its pipe to 1 MiB, since with the 64 KiB default
  feeding mksquashfs cost 3 times the generator's own time. More than the
  release matrix can afford, so it runs on the host release only (marked
  host_release_only: left out in the roots of tests/matrix, as
  tests/sanitizers is). It needs 6 GiB free beside the cluster's
  directory (fails otherwise) and deletes the image whatever happens."""

import os
import random
import shutil
import struct
import tempfile
import time
import zlib
from pathlib import Path

import pytest

from conftest import run
from reader_and_kernel import digest, kernel_and_reader, pread, stats, statvfs

G4 = 1 << 32
BS = 128 * 1024  # mksquashfs's default block size


def compare_regions(kdir, fdir, name, regions, expect):
    """Each (offset, length) of file name read through both mounts (one
    pread each) equals expect(offset, length); returns the bytes compared."""
    total = 0
    for off, n in regions:
        want = expect(off, n)
        k = pread(kdir / name, off, n)
        f = pread(fdir / name, off, n)
        where = f"{name} [{off:#x}, +{n}]"
        assert digest(k) == digest(want), f"{where}: the kernel read {digest(k)}, packed {digest(want)}"
        assert digest(f) == digest(want), f"{where}: squash-reader read {digest(f)}, packed {digest(want)}"
        total += n
    return total


def test_a_file_over_4_gib_reads_as_through_the_kernel(cluster):
    d = cluster.workdir("root", "over4g-file")
    # The sparse input on tmpfs: reading its holes there allocates
    # nothing (on ext4 mksquashfs's read would fill 4 GiB of page cache
    # with zeros, 10-18 s); 1 MiB blocks: a third of the 128 KiB blocks'
    # cost (the image over 4 GiB below has those).
    src = Path(tempfile.mkdtemp(prefix="over4g-src.", dir="/dev/shm"))
    bs = 1 << 20
    size = G4 + 5 * bs + 1234  # 4,101 blocks and a 1,234-byte tail fragment
    # Distinct non-zero runs: the first block, across 4 GiB (the last
    # block below it, the first above), at an odd offset past 4 GiB, and
    # the tail; everything else is a hole (sparse blocks in the image).
    runs = [(0, 100), (G4 - 1000, 2000), (G4 + 2 * bs + 777, 5000), (G4 + 5 * bs, 1234)]
    img = d / "file.sqfs"
    try:
        with open(src / "big", "wb") as f:
            f.truncate(size)
            for off, n in runs:
                f.seek(off)
                f.write(random.Random(off).randbytes(n).replace(b"\0", b"\1"))
        (src / "small").write_bytes(b"shares the fragment block\n")
        t0 = time.monotonic()
        run(["mksquashfs", src, img, "-noappend", "-quiet", "-no-progress", "-all-root",
             "-b", "1M"])
        print(f"mksquashfs of a sparse {size}-byte file: {time.monotonic() - t0:.1f} s, "
              f"image {img.stat().st_size} bytes")

        def expect(off, n):
            return pread(src / "big", off, n)

        regions = [
            (0, 2 * bs),                        # first block, a hole after it
            (G4 - bs - 3, 2 * bs + 6),          # across 4 GiB, one read
            (G4 - 1500, 3000),
            (G4, bs),                           # the first block past 4 GiB
            (G4 + 3 * bs - 700, 6000),          # odd offset past 4 GiB, across a block end
            (G4 + 2 * bs + 777 + 4999, 1),      # the last byte of that run
            (G4 + 3 * bs + 12345, 7),           # a hole past 4 GiB
            (G4 + 4 * bs, bs + 1234),           # the last full block and the tail fragment
            (size - 1, 1),
            (size - 10, 100),                   # short at the end
            (size, 10),                         # at the end: nothing
            (G4 // 2 + 99, 4096),               # a hole below 4 GiB
        ]
        with kernel_and_reader(img, d) as (kdir, fdir):
            compare_regions(kdir, fdir, "big", regions, expect)
            assert pread(fdir / "small", 0, 100) == (src / "small").read_bytes()
            ks, fs = stats(kdir), stats(fdir)
            assert fs == ks, (fs, ks)
            assert ks["big"][5] == size, ks
            # The holes are not counted (3 blocks and the tail hold data).
            assert 0 < ks["big"][6] < 5 * bs // 512, ks
            assert statvfs(fdir) == statvfs(kdir), (statvfs(fdir), statvfs(kdir))
    finally:
        shutil.rmtree(src)
        shutil.rmtree(d)


def fragment_positions(img):
    """Where the image's fragment blocks lie (its fragment table)."""
    with open(img, "rb") as f:
        fd = f.fileno()
        sb = os.pread(fd, 96, 0)
        count, table = struct.unpack_from("<I", sb, 16)[0], struct.unpack_from("<Q", sb, 80)[0]
        pos = []
        for i in range((count * 16 + 8191) // 8192):
            md = struct.unpack("<Q", os.pread(fd, 8, table + 8 * i))[0]
            hdr = struct.unpack("<H", os.pread(fd, 2, md))[0]
            raw = os.pread(fd, hdr & 0x7fff, md + 2)
            data = raw if hdr & 0x8000 else zlib.decompress(raw)
            pos += [struct.unpack_from("<Q", data, k)[0] for k in range(0, len(data), 16)]
    return pos[:count]


# The content of the image's files: 4 KiB pages, each its offset (8
# bytes, the seed in the top byte) then 4,088 bytes of filler: every page
# distinct, no zero block. Run by mksquashfs (a pseudo file command) and
# by the test for what to expect.
GENERATOR = r'''
import fcntl, random, struct, sys

def pages(first, last, seed):
    """Pages first..last-1 (their offsets / 4096)."""
    filler = random.Random(seed).randbytes(4088).replace(b"\0", b"\1")
    return b"".join(struct.pack("<Q", p * 4096 | seed << 56) + filler for p in range(first, last))

def content(off, n, size, seed):
    n = max(0, min(n, size - off))
    first, last = off // 4096, (off + n + 4095) // 4096
    return pages(first, last, seed)[off - first * 4096:][:n]

if __name__ == "__main__":
    size, seed = int(sys.argv[1]), int(sys.argv[2])
    try:
        fcntl.fcntl(1, 1031, 1 << 20)  # F_SETPIPE_SZ: 1 MiB writes in one go
    except OSError:
        pass
    for p in range(0, (size + 4095) // 4096, 256):
        sys.stdout.buffer.write(content(p * 4096, 256 * 4096, size, seed))
'''


@pytest.mark.host_release_only("an image over 4 GiB takes 14-60 s to make")
def test_an_image_over_4_gib_reads_as_through_the_kernel(cluster):
    d = cluster.workdir("root", "over4g-image")
    free = shutil.disk_usage(d).free
    assert free > 6 << 30, f"{d}: {free >> 20} MiB free, the image needs 6 GiB"
    gen = d / "gen.py"
    gen.write_text(GENERATOR)
    ns = {}
    exec(compile(GENERATOR, str(gen), "exec"), ns)
    # a.big: data stored as is (-noD) from byte 96 of the image, so the
    # image passes 2^32 inside one of its blocks (at a.big's offset 2^32 -
    # 96); the files after it in the image have their data there, past 4
    # GiB: b.small and c.tiny (pseudo files, written by the generator, like
    # a.big), d.frag and e.tail (real files: their tails go to a fragment
    # block, written at the end).
    files = {"a.big": (G4 + 3 * BS + 12345, 1), "b.small": (2 * BS + 999, 2), "c.tiny": (100, 3),
             "d.frag": (5000, 4), "e.tail": (BS + 777, 5)}
    src = d / "src"
    src.mkdir()
    pseudo = []
    for name, (size, seed) in files.items():
        if name in ("d.frag", "e.tail"):
            (src / name).write_bytes(ns["content"](0, size, size, seed))
        else:
            pseudo += ["-p", f"{name} f 0644 0 0 python3 {gen} {size} {seed}"]
    img = d / "image.sqfs"
    try:
        t0 = time.monotonic()
        run(["nice", "mksquashfs", src, img, "-noappend", "-quiet", "-no-progress",
             "-all-root", "-noD", "-no-duplicates", *pseudo], timeout=600)
        print(f"mksquashfs -noD of {sum(s for s, _ in files.values())} bytes: "
              f"{time.monotonic() - t0:.1f} s, image {img.stat().st_size} bytes")
        # The layout the test is about: b.small's first page stored as is
        # past 4 GiB (after a.big's end); every fragment block past 4 GiB.
        with open(img, "rb") as f:
            past = os.pread(f.fileno(), 3 * BS + 12345 + (1 << 20), G4)
        assert ns["content"](0, 64, *files["b.small"]) in past, "b.small's data not past 4 GiB"
        frags = fragment_positions(img)
        assert frags and min(frags) > G4, frags

        def expect_of(name):
            size, seed = files[name]
            return lambda off, n: ns["content"](off, n, size, seed)

        at = G4 - 96  # a.big's byte at image position 2^32
        big = files["a.big"][0]
        regions = [
            (0, 1 << 20),
            (at - BS, 2 * BS),                  # the image's 4 GiB position, one read
            (at - 5, 11),
            (G4 - BS - 1, 2 * BS + 2),          # a.big's 4 GiB boundary
            (G4 + 777777, 5000),                # odd offsets past 4 GiB
            (G4 + 2 * BS + 4093, 3 * 4096),
            (big - 12345 - 7, 12345 + 7 + 50),  # the last blocks, past the end
            (big - 1, 1),
        ]
        # and 8 KiB every 256 MiB (reading all of a.big through both
        # mounts took 39 s more, mostly the disk).
        regions += [(k * (256 << 20) + 4093, 8192) for k in range(big >> 28)]
        with kernel_and_reader(img, d) as (kdir, fdir):
            compare_regions(kdir, fdir, "a.big", regions, expect_of("a.big"))
            for name, (size, _) in list(files.items())[1:]:
                compare_regions(kdir, fdir, name, [(0, size + 10), (BS - 3, BS + 6), (size - 1, 1)],
                                expect_of(name))
            ks, fs = stats(kdir), stats(fdir)
            assert fs == ks, (fs, ks)
            assert {n: ks[n][5] for n in files} == {n: s for n, (s, _) in files.items()}, ks
            assert statvfs(fdir) == statvfs(kdir), (statvfs(fdir), statvfs(kdir))
            assert statvfs(kdir)[2] * BS > G4, statvfs(kdir)
    finally:
        shutil.rmtree(d)
