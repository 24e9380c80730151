"""squash-reader --serve run directly, as squashd runs it (no job): its
mounts share one set of worker threads (daemon/reader/serve_pool.c), so
these tests make the pool's hard moments happen while all mounts are read
at once: connections that go (unmounted, aborted) while workers are
inside them, and a killed reader's connections taken over by a new one.
tests/sanitizers/run.sh runs them with the reader built with ASan and
UBSan (SQUASH_READER)."""

import hashlib
import os
import shutil
import signal
import socket
import struct
import subprocess
import tempfile
import threading
import time
from pathlib import Path

import pytest

from conftest import run, wait_until
from reader_and_kernel import READER, fuse_mount, mounted
from test_reader_killed_under_a_running_job import KERNEL_RESENDS

MAGIC, RESUME = 0x73716d31, 1  # proto/reader_wire.h
MOUNTS = 64
DATA = os.urandom(1 << 20)


STARTED = []  # readers a test started, stopped after it whatever happened


@pytest.fixture
def where():
    d = Path(tempfile.mkdtemp(prefix="serve-load.", dir="/tmp"))
    (d / "src").mkdir()
    (d / "src" / "data").write_bytes(DATA)
    run(["mksquashfs", d / "src", d / "img.sqfs", "-noappend", "-quiet", "-no-progress",
         "-all-root", "-b", "64K"])
    try:
        yield d
    finally:
        for p in STARTED:
            if p.poll() is None:
                p.send_signal(signal.SIGCONT)
                p.kill()
                p.wait()
        STARTED.clear()
        for m in sorted(d.iterdir(), key=lambda m: -len(str(m))):
            if mounted(m):
                run(["umount", "-l", m], check=False)
        shutil.rmtree(d)


class Serving:
    """A --serve reader on a socket pair, and the mounts it was sent."""

    def __init__(self, where, tag, args=()):
        self.where, self.log = where, where / f"reader-{tag}.log"
        self.sock, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        with open(self.log, "wb") as out:
            self.proc = subprocess.Popen([READER, *args, "--serve", f"/dev/fd/{theirs.fileno()}"],
                                         pass_fds=[theirs.fileno()], stdout=out,
                                         stderr=subprocess.STDOUT)
        STARTED.append(self.proc)
        theirs.close()

    def send(self, rid, image_fd, fuse_fd, flags=0):
        self.sock.sendmsg([struct.pack("<3I", MAGIC, rid, flags)],
                          [(socket.SOL_SOCKET, socket.SCM_RIGHTS,
                            struct.pack("<2i", image_fd, fuse_fd))])
        if flags & RESUME:
            return  # not answered (reader_wire.h)
        _, got, err = struct.unpack("<IIi", self.sock.recv(256)[:12])
        assert (got, err) == (rid, 0), (rid, os.strerror(err) if err else got, self.log.read_text())

    def mount(self, n, keep=False, image=None, first=0):
        """n mounts of image (where/img.sqfs); with keep, their image and
        /dev/fuse descriptors too (what squashd keeps to hand a connection
        over)."""
        mounts, kept = [], []
        for i in range(first, first + n):
            m = self.where / f"m{i}"
            m.mkdir()
            fuse_fd = fuse_mount(m)
            image_fd = os.open(image or self.where / "img.sqfs", os.O_RDONLY | os.O_CLOEXEC)
            self.send(i, image_fd, fuse_fd)
            mounts.append(m)
            if keep:
                kept.append((image_fd, fuse_fd))
            else:
                os.close(image_fd)
                os.close(fuse_fd)
        return mounts, kept

    def threads(self):
        return len(os.listdir(f"/proc/{self.proc.pid}/task"))

    def end(self, mounts):
        """Lets go of the reader, unmounts what is left; its exit status."""
        self.sock.close()
        for m in mounts:
            if mounted(m):
                run(["umount", "-l", m], check=False)
        try:
            return self.proc.wait(20)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            return "hung"


def read_uncached(path):
    """The file's content from the reader, not from the page cache."""
    fd = os.open(path, os.O_RDONLY)
    try:
        return read_fd_uncached(fd)
    finally:
        os.close(fd)


def read_fd_uncached(fd):
    os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    return hashlib.md5(os.pread(fd, len(DATA) + 1, 0)).hexdigest()


WANT = hashlib.md5(DATA).hexdigest()


def stop_readers(stop, threads, errors):
    """Stops the reading threads; none may hang, none may have failed."""
    stop.set()
    for t in threads:
        t.join(30)
    assert not any(t.is_alive() for t in threads), "a read hung"
    assert not errors, errors[:5]


def abort_connection(m):
    """The connection ends at once (the reader's read answers ENODEV),
    however many requests are in flight: a forced unmount aborts it
    (fuse_umount_begin), as writing to fusectl's abort file would."""
    run(["umount", "-f", "-l", m])


def test_mounts_that_go_while_read_end_and_the_others_serve_on(where):
    """All mounts read over and over, 32 at a time; meanwhile a quarter are
    aborted and a quarter unmounted (lazily: they go when their readers
    let go). The others read right all along, every mount gone ends in
    the reader, and it exits 0 once let go, its threads never past its
    bound."""
    r = Serving(where, "a")
    mounts, _ = r.mount(MOUNTS)
    aborted, unmounted = mounts[0::4], mounts[1::4]
    stop, errors, reads, seen = threading.Event(), [], {}, []

    def read_on(ms):
        fds = {m: os.open(m / "data", os.O_RDONLY) for m in ms}
        try:
            while not stop.is_set():
                for m, fd in list(fds.items()):
                    try:
                        got = read_fd_uncached(fd)
                    except OSError as e:
                        if m not in aborted:
                            errors.append((m, e))
                        del fds[m]  # ENOTCONN: it went
                        continue
                    if got != WANT and m in aborted:
                        del fds[m]  # a short read as the connection went
                        continue
                    if got != WANT:
                        errors.append((m, got))
                    reads[m] = reads.get(m, 0) + 1
        finally:
            for fd in fds.values():
                os.close(fd)

    threads = [threading.Thread(target=read_on, args=(mounts[i::32],)) for i in range(32)]
    try:
        for t in threads:
            t.start()
        time.sleep(0.3)
        for m in aborted:
            abort_connection(m)
        for m in unmounted:
            run(["umount", "-l", m])
        deadline = time.monotonic() + 0.7
        while time.monotonic() < deadline:
            seen.append(r.threads())
            time.sleep(0.01)
    finally:
        stop_readers(stop, threads, errors)
    assert all(reads.get(m, 0) >= 2 for m in mounts if m not in aborted), reads
    # The main thread, the idle sweep's, the workers.
    assert max(seen) <= 2 + max(8, min(64, 2 * len(os.sched_getaffinity(r.proc.pid))))
    # The unmounted ones went with their last reader; the rest serve on.
    wait_until(lambda: not any(mounted(m) for m in unmounted), 10, what="the lazy unmounts")
    for m in mounts[2::4] + mounts[3::4]:
        assert read_uncached(m / "data") == WANT
    assert r.end(mounts) == 0, r.log.read_text()
    assert "squash-reader:" not in r.log.read_text(), r.log.read_text()


@pytest.mark.skipif(not KERNEL_RESENDS, reason="the kernel predates FUSE_NOTIFY_RESEND")
def test_a_killed_readers_mounts_read_on_through_the_reader_taking_them_over(where):
    """The reader is killed while its mounts are read; a new one is handed
    every connection (SERVE_RESUME, as squashd does) and the reads go on:
    none fails, none hangs, every byte right."""
    old = Serving(where, "old")
    mounts, kept = old.mount(MOUNTS, keep=True)
    stop, errors, reads = threading.Event(), [], []

    def read_on(m):
        k = 0
        while not stop.is_set():
            try:
                got = read_uncached(m / "data")
            except OSError as e:
                errors.append((m, e))
                return
            if got != WANT:
                errors.append((m, got))
            k += 1
        reads.append(k)

    readers = [threading.Thread(target=read_on, args=(m,)) for m in mounts[:32]]
    try:
        for t in readers:
            t.start()
        time.sleep(0.3)
        # Started before the kill: the child closes the files it inherits
        # on the mounts before it execs, and a close is a FLUSH request
        # that only a reader of the connection answers.
        new = Serving(where, "new")
        os.kill(old.proc.pid, signal.SIGKILL)
        old.proc.wait()
        old.sock.close()
        for i, (image_fd, fuse_fd) in enumerate(kept):
            new.send(100 + i, image_fd, fuse_fd, RESUME)
        time.sleep(1.0)
    finally:
        stop_readers(stop, readers, errors)
    assert len(reads) == 32 and min(reads) > 0, reads
    for m in mounts:
        assert read_uncached(m / "data") == WANT
    for image_fd, fuse_fd in kept:
        os.close(image_fd)
        os.close(fuse_fd)
    assert new.end(mounts) == 0, new.log.read_text()
    wait_until(lambda: not any(mounted(m) for m in mounts), 10, what="the mounts to go")


def test_a_mount_whose_image_stopped_answering_leaves_the_others_a_worker(where):
    """The image of one mount lies on a FUSE file system whose server is
    stopped, so every request of that mount that reads the image hangs in a
    worker; reads of another mount of the same reader go on meanwhile
    (one mount holds all workers but one at most), and the hung ones end
    right once the file system answers again."""
    inner_src, outer_src = where / "inner", where / "outer"
    inner_src.mkdir()
    outer_src.mkdir()
    files = {f"f{i}": os.urandom(256 * 1024) for i in range(16)}
    for name, data in files.items():
        (inner_src / name).write_bytes(data)
    run(["mksquashfs", inner_src, outer_src / "inner.sqfs", "-noappend", "-quiet", "-no-progress",
         "-all-root", "-b", "64K"])
    run(["mksquashfs", outer_src, where / "outer.sqfs", "-noappend", "-quiet", "-no-progress",
         "-all-root"])
    outer_dir = where / "outer_mnt"
    outer_dir.mkdir()
    outer = subprocess.Popen([READER, where / "outer.sqfs", outer_dir])
    STARTED.append(outer)
    wait_until(lambda: mounted(outer_dir), 10, what="the outer image's mount")
    r = Serving(where, "hung", ["--threads", "4"])
    (hung,), _ = r.mount(1, image=outer_dir / "inner.sqfs")
    (fine,), _ = r.mount(1, first=1)
    results, answered = {}, threading.Event()

    def read_hung(name):
        try:
            results[name] = (hung / name).read_bytes() == files[name]
        except OSError as e:
            results[name] = e

    def read_fine():
        results["fine"] = read_uncached(fine / "data") == WANT
        answered.set()

    try:
        # Nothing of the inner image in the page cache: the reader's
        # preads go to the outer reader, which is stopped.
        fd = os.open(outer_dir / "inner.sqfs", os.O_RDONLY)
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        os.close(fd)
        os.kill(outer.pid, signal.SIGSTOP)
        hung_readers = [threading.Thread(target=read_hung, args=(n,), daemon=True) for n in files]
        for t in hung_readers:
            t.start()
        # The main thread, the idle sweep's and the 4 workers.
        wait_until(lambda: r.threads() >= 6, 10, what="the reader's 4 workers to start")
        time.sleep(0.5)
        assert not results, results  # they hang
        threading.Thread(target=read_fine, daemon=True).start()
        assert answered.wait(10), "the other mount's read waited for the stopped file system"
        assert results["fine"] is True
    finally:
        os.kill(outer.pid, signal.SIGCONT)
    for t in hung_readers:
        t.join(30)
    assert all(results[n] is True for n in files), results
    assert r.end([hung, fine]) == 0, r.log.read_text()
    run(["umount", outer_dir])
    assert outer.wait(10) == 0
