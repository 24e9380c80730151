"""Mounting one image twice, by the kernel's squashfs (loop) and by
squash-reader run directly on a directory (no cluster, no job), and what
the comparison tests read through both; a /dev/fuse descriptor mounted as
squashd mounts one for squash-reader --serve.

SQUASH_READER names another squash-reader for the tests that run it
directly (tests/sanitizers/run.sh: the one built with ASan and UBSan)."""

import collections
import contextlib
import ctypes
import hashlib
import os
import re
import shutil
import subprocess
import tempfile
from pathlib import Path

from conftest import BUILD, mountinfo, run, wait_until

READER = Path(os.environ.get("SQUASH_READER") or BUILD / "daemon" / "reader" / "squash-reader")
TRACING = Path("/sys/kernel/tracing")


class FuseRequests:
    """Counts the FUSE requests the kernel sends on the connection of a
    mount, by opcode, with the kernel's fuse_request_send tracepoint in a
    tracefs instance of its own (a connection is the dev_t: major << 20 |
    minor)."""

    def __init__(self, mount, name):
        dev = os.stat(mount).st_dev
        self.dir = TRACING / "instances" / f"{name}-{os.getpid()}"
        self.dir.mkdir()
        self.ev = self.dir / "events" / "fuse" / "fuse_request_send"
        (self.ev / "filter").write_text(f"connection == {os.major(dev) << 20 | os.minor(dev)}\n")
        (self.ev / "enable").write_text("1\n")

    @staticmethod
    def available():
        return (TRACING / "events" / "fuse").is_dir()

    def take(self):
        """{opcode name without FUSE_: requests} since the last take."""
        text = (self.dir / "trace").read_text()
        (self.dir / "trace").write_text("")
        return collections.Counter(re.findall(r"\(FUSE_([A-Z_]+)\)", text))

    def close(self):
        (self.ev / "enable").write_text("0\n")
        self.dir.rmdir()


@contextlib.contextmanager
def kernel_and_reader(img, where, reader_args=()):
    """Yields (kernel mount, squash-reader mount) of img under where
    (reader_args: more squash-reader options).
    Unmounts both (the loop device goes with the kernel's: autoclear) and
    stops the reader whatever the test did; when it passed, the reader
    must have exited 0 on its unmount."""
    kdir, fdir = where / "kernel", where / "reader"
    kdir.mkdir()
    fdir.mkdir()
    log = where / "reader.log"
    reader = None

    try:
        run(["mount", "-t", "squashfs", "-o", "loop,ro", img, kdir])
        with open(log, "wb") as out:
            reader = subprocess.Popen([READER, *reader_args, img, fdir], stdout=out, stderr=subprocess.STDOUT)
        wait_until(lambda: reader.poll() is not None or mounted(fdir), 10,
                   what="squash-reader's mount")
        assert reader.poll() is None, log.read_text()
        yield kdir, fdir
    finally:
        rc = unmount_and_wait(reader, [fdir, kdir])
    assert rc == 0, f"squash-reader exited {rc} on its unmount: {log.read_text()}"
    assert not mounted(kdir) and not mounted(fdir), mountinfo()


@contextlib.contextmanager
def packed(prefix, fill):
    """Yields a zstd image of the tree fill(src) makes in a new directory
    under /dev/shm; removes both."""
    src = Path(tempfile.mkdtemp(prefix=prefix, dir="/dev/shm"))
    img = src.with_suffix(".sqfs")
    try:
        fill(src)
        run(["mksquashfs", src, img, "-noappend", "-quiet", "-no-progress", "-comp", "zstd"])
        yield img
    finally:
        shutil.rmtree(src)
        img.unlink(missing_ok=True)


def fuse_mount(target):
    """A /dev/fuse descriptor mounted read-only on target, as squashd
    mounts one for a reader (mount(2) with fd=)."""
    libc = ctypes.CDLL(None, use_errno=True)
    fd = os.open("/dev/fuse", os.O_RDWR | os.O_CLOEXEC)
    opts = f"fd={fd},rootmode=40000,user_id=0,group_id=0,default_permissions".encode()
    if libc.mount(b"squash-reader", str(target).encode(), b"fuse.squashfs",
                  1 | 2 | 4, opts) != 0:  # MS_RDONLY | MS_NOSUID | MS_NODEV
        e = ctypes.get_errno()
        os.close(fd)
        raise OSError(e, os.strerror(e))
    return fd


def mounted(d):
    return any(m["mount_point"] == str(d) for m in mountinfo())


def unmount_and_wait(reader, dirs):
    """Unmounts dirs (lazily when busy) and returns the reader's exit
    status (None when there was no reader; killed after 10 s)."""
    for d in dirs:
        if mounted(d) and run(["umount", d], check=False).returncode != 0:
            run(["umount", "-l", d], check=False)
    if not reader:
        return None
    try:
        return reader.wait(10)
    except subprocess.TimeoutExpired:
        reader.kill()
        reader.wait(10)
        return None


def stats(root):
    """{relative path: lstat fields} of every entry under root; st_dev
    differs by nature, st_blksize by choice (see the docstring)."""
    out = {}
    for dp, dns, fns in os.walk(root):
        for n in [""] + sorted(dns + fns):
            p = os.path.join(dp, n) if n else dp
            st = os.lstat(p)
            out[os.path.relpath(p, root)] = (
                st.st_mode, st.st_ino, st.st_nlink, st.st_uid, st.st_gid, st.st_size,
                st.st_blocks, st.st_mtime_ns, st.st_ctime_ns)
    return out


def statvfs(root):
    v = os.statvfs(root)
    return (v.f_bsize, v.f_frsize, v.f_blocks, v.f_bfree, v.f_bavail, v.f_files, v.f_ffree,
            v.f_namemax)


def pread(path, off, n):
    with open(path, "rb") as f:
        return os.pread(f.fileno(), n, off)


def digest(b):
    return f"{len(b)} bytes sha256 {hashlib.sha256(b).hexdigest()[:16]}"


