#!/usr/bin/env python3
"""The threads and memory of one squash-reader --serve against its number
of mounts, without squashd or a cluster (issue 31; docs/performance.md
section 6). As root:

    tests/bench/serve_threads.py [--mounts 256] [--image IMG] [READER ...]

For each READER (default: the build's squash-reader), starts it on a
socket pair as squashd does, mounts one small image (or IMG) that many
times (mount(2) with fd=, each mount sent with its image over the socket
and answered), and prints its threads and PSS at rest (2.5 s after the
last mount), the most threads seen while every file of every mount is
read (32 mounts at a time, page cache dropped first), its PSS just after
and its threads and PSS at rest again (--rest-s later: the reader gives
its caches back after 5-10 s idle, daemon/reader/idle_trim.h); then
unmounts everything and checks that the reader exits 0."""

import argparse
import ctypes
import hashlib
import os
import shutil
import socket
import struct
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

HERE = Path(__file__).resolve().parent
BUILD = Path(os.environ.get("SQUASH_BUILD_DIR", HERE.parents[1] / "build"))
MAGIC = 0x73716d31  # proto/reader_wire.h
libc = ctypes.CDLL(None, use_errno=True)


def fuse_mount(target):
    """A /dev/fuse descriptor mounted read-only on target, as squashd
    mounts one for a reader."""
    fd = os.open("/dev/fuse", os.O_RDWR | os.O_CLOEXEC)
    opts = f"fd={fd},rootmode=40000,user_id=0,group_id=0,default_permissions".encode()
    if libc.mount(b"squash-reader", str(target).encode(), b"fuse.squashfs", 1 | 2 | 4, opts) != 0:
        e = ctypes.get_errno()
        os.close(fd)
        raise OSError(e, os.strerror(e))
    return fd


def threads(pid):
    return len(os.listdir(f"/proc/{pid}/task"))


def pss_kib(pid):
    for line in open(f"/proc/{pid}/smaps_rollup"):
        if line.startswith("Pss:"):
            return int(line.split()[1])
    return 0


def read_all(top):
    """A digest of every file under top (names and contents), in order."""
    h = hashlib.md5()
    for d, dirs, files in os.walk(top):
        dirs.sort()
        for name in sorted(files):
            path = os.path.join(d, name)
            if os.path.islink(path):
                continue
            h.update(os.path.relpath(path, top).encode())
            with open(path, "rb") as f:
                while chunk := f.read(1 << 20):
                    h.update(chunk)
    return h.hexdigest()


def measure(reader, image, n, where, rest_s):
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    with open(where / "reader.log", "wb") as log:
        r = subprocess.Popen([reader, "--serve", f"/dev/fd/{theirs.fileno()}"],
                             pass_fds=[theirs.fileno()], stdout=log, stderr=subprocess.STDOUT)
    theirs.close()
    mounts = []
    try:
        for i in range(n):
            m = where / f"m{i}"
            m.mkdir()
            fuse_fd = fuse_mount(m)
            mounts.append(m)
            image_fd = os.open(image, os.O_RDONLY | os.O_CLOEXEC)
            ours.sendmsg([struct.pack("<3I", MAGIC, i, 0)],
                         [(socket.SOL_SOCKET, socket.SCM_RIGHTS,
                           struct.pack("<2i", image_fd, fuse_fd))])
            os.close(image_fd)
            os.close(fuse_fd)
            _, rid, err = struct.unpack("<IIi", ours.recv(256)[:12])
            if (rid, err) != (i, 0):
                raise RuntimeError(f"mount {i}: {os.strerror(err)}")
        time.sleep(2.5)
        rest, pss = threads(r.pid), pss_kib(r.pid)
        peak = [0]

        def read(m):
            peak[0] = max(peak[0], threads(r.pid))
            return read_all(m)

        os.sync()
        Path("/proc/sys/vm/drop_caches").write_text("3\n")
        with ThreadPoolExecutor(32) as ex:
            got = list(ex.map(read, mounts))
        if len(set(got)) != 1:
            raise RuntimeError("the mounts of one image read differently")
        read_pss = pss_kib(r.pid)
        time.sleep(rest_s)
        again, again_pss = threads(r.pid), pss_kib(r.pid)
    finally:
        ours.close()
        for m in reversed(mounts):
            subprocess.run(["umount", "-l", m], check=False)
        try:
            rc = r.wait(30)
        except subprocess.TimeoutExpired:
            r.kill()
            rc = r.wait()
    if rc != 0:
        raise RuntimeError(f"{reader} exited {rc}: {(where / 'reader.log').read_text()}")
    return rest, pss, peak[0], read_pss, again, again_pss


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--mounts", type=int, default=256)
    ap.add_argument("--image", help="the image to mount (default: one small file)")
    ap.add_argument("--rest-s", type=float, default=12.0,
                    help="seconds at rest after the reads before the last figures (default 12)")
    ap.add_argument("readers", nargs="*", default=[str(BUILD / "daemon" / "reader" / "squash-reader")])
    args = ap.parse_args()
    where = Path(tempfile.mkdtemp(prefix="serve-threads.", dir="/tmp"))
    try:
        image = args.image
        if not image:
            (where / "src").mkdir()
            (where / "src" / "f.txt").write_text("x\n")
            image = where / "one.sqfs"
            subprocess.run(["mksquashfs", where / "src", image, "-noappend", "-quiet",
                            "-no-progress", "-all-root"], check=True)
        print(f"{'reader':40} {'mounts':>6} {'threads at rest':>15} {'PSS at rest':>12} "
              f"{'most threads reading':>20} {'PSS read':>12} {'at rest again':>13} "
              f"{'PSS':>12}")
        for reader in args.readers:
            run_dir = Path(tempfile.mkdtemp(prefix="run.", dir=where))
            rest, pss, peak, read_pss, again, again_pss = measure(reader, image, args.mounts,
                                                                  run_dir, args.rest_s)
            print(f"{reader:40} {args.mounts:>6} {rest:>15} {pss / 1024:>8.1f} MiB {peak:>20} "
                  f"{read_pss / 1024:>8.1f} MiB {again:>13} {again_pss / 1024:>8.1f} MiB",
                  flush=True)
    finally:
        shutil.rmtree(where, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
