#!/usr/bin/env python3
"""The union of bundles in squash-reader against the other ways of
merging them, without squashd or a cluster (issue 31; docs/performance.md
section 13). For a dataset of dataset.py (hcp, 1m), as root:

    flock /tmp/squash-cluster.lock tests/bench/union_alone.py [--reps 3] [--dataset hcp]

Each repetition, in an order rotated every repetition, mounts the bundles
one way, drops the page cache, dentries and inodes, and times
`find . -print | wc -l` cold, then again warm:

  local    the unpacked tree on local disk
  kernel   overlayfs over the bundles loop-mounted by the kernel's squashfs
  fuse     overlayfs over one standalone squash-reader per bundle (today's
           product serves them from one reader process; the requests are
           the same)
  union    one squash-reader --union of all bundles
  serve    the same union served as squashd has it served: one
           squash-reader --serve on a socket pair, sent the bundles and a
           mounted /dev/fuse (SERVE_UNION, proto/reader_wire.h), so its
           pool of workers (serve_pool.c) answers, not libfuse's loop

then, after dropping the caches again, opens and reads 10,000 files
picked at random (a fixed seed: the same files in every mode), cold
("random"); the time from starting the union's reader until the last top-level
directory is stat'ed ("visible"); and the readers' PSS after the listings
("pss", MiB). Prints min and median per mode.

--readers OLD,NEW runs the union and serve modes once per reader binary
(named union@0, union@1, ...), interleaved, to compare two builds side
by side.

A mode with "/1cpu" after its name (kernel/1cpu, serve/1cpu) runs the
listing, the random reads and the readers on CPU 0 only: with the
requester and the reader on one CPU no FUSE request wakes another CPU,
the best any transport that answers on the asking CPU (FUSE over
io_uring's per-CPU queues) could do; "/reader1cpu" and "/find1cpu" put
only the readers, or only the listing and the random reads, there.
"/nopoll" turns the served reader's polling worker off (--poll-us 0),
which on one CPU only keeps the listing from running."""

import argparse
import ctypes
import os
import random
import socket
import statistics
import struct
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from dataset import Dataset  # noqa: E402
from serve_threads import fuse_mount  # noqa: E402

BUILD = Path(os.environ.get("SQUASH_BUILD_DIR", HERE.parents[1] / "build"))
READER = BUILD / "daemon" / "reader" / "squash-reader"
MAGIC = 0x73716d31      # proto/reader_wire.h
SERVE_UNION, SERVE_UNION_PART = 2, 248
libc = ctypes.CDLL(None, use_errno=True)


def sh(*cmd, **kw):
    return subprocess.run([str(c) for c in cmd], check=True, **kw)


DROP = True


def drop_caches():
    if DROP:
        os.sync()
        Path("/proc/sys/vm/drop_caches").write_text("3\n")


def random_files(tree, n=10_000, seed=31):
    """n files of the tree, relative paths, the same on every run."""
    files = sorted(os.path.relpath(os.path.join(r, f), tree) for r, _, fs in os.walk(tree) for f in fs)
    return random.Random(seed).sample(files, min(n, len(files)))


def pss_mib(procs):
    """The PSS of the readers, MiB."""
    kib = 0
    for p in procs:
        with open(f"/proc/{p.pid}/smaps_rollup") as f:
            kib += sum(int(line.split()[1]) for line in f if line.startswith("Pss:"))
    return kib / 1024


def read_all(d, paths):
    t0 = time.monotonic()
    for p in paths:
        with open(os.path.join(d, p), "rb") as f:
            f.read()
    return time.monotonic() - t0


def mounted(d):
    with open("/proc/self/mountinfo") as f:
        return any(line.split()[4] == str(d) for line in f)


def wait_mounted(d, proc, timeout=60):
    end = time.monotonic() + timeout
    while not mounted(d):
        if proc.poll() is not None or time.monotonic() > end:
            raise RuntimeError(f"no mount on {d}")
        time.sleep(0.01)


def on_cpus(cpus):
    """A preexec_fn that keeps a child on cpus (None: anywhere)."""
    return (lambda: os.sched_setaffinity(0, cpus)) if cpus else None


def find_count(d, cpus=None):
    t0 = time.monotonic()
    out = subprocess.run(f"cd {d} && find . -print | wc -l", shell=True, check=True,
                         capture_output=True, text=True, preexec_fn=on_cpus(cpus)).stdout
    return time.monotonic() - t0, int(out)


class Mounts:
    """What one mode mounted, undone in reverse order whatever happens."""

    def __init__(self, where):
        self.where, self.points, self.procs, self.socks = where, [], [], []

    def dir(self, name):
        d = self.where / name
        d.mkdir()
        return d

    def close(self):
        for d in reversed(self.points):
            if mounted(d) and subprocess.run(["umount", d]).returncode != 0:
                subprocess.run(["umount", "-l", d])
        for s in self.socks:
            s.close()  # a --serve reader ends once squashd (we) let go and its mounts are gone
        for p in self.procs:
            try:
                p.wait(20)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()


def serve_union(reader, bundles, d, m, extra=(), cpus=None):
    """bundles as one union on d, served by a squash-reader --serve the
    way squashd asks for it: parts of SERVE_UNION_PART images, the last
    with the /dev/fuse descriptor after them. extra: more reader options."""
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    p = subprocess.Popen([reader, "--serve", f"/dev/fd/{theirs.fileno()}", *extra],
                         pass_fds=[theirs.fileno()], preexec_fn=on_cpus(cpus))
    theirs.close()
    m.procs.append(p)
    m.socks.append(ours)
    fuse_fd = fuse_mount(d)
    m.points.append(d)
    n = len(bundles)
    for first in range(0, n, SERVE_UNION_PART):
        part = bundles[first:first + SERVE_UNION_PART]
        fds = [os.open(b, os.O_RDONLY | os.O_CLOEXEC) for b in part]
        if first + len(part) == n:
            fds.append(fuse_fd)
        ours.sendmsg([struct.pack("<5I", MAGIC, 1, SERVE_UNION, n, first)],
                     [(socket.SOL_SOCKET, socket.SCM_RIGHTS, struct.pack(f"<{len(fds)}i", *fds))])
        for fd in fds[:len(part)]:
            os.close(fd)
    os.close(fuse_fd)
    _, rid, err = struct.unpack("<IIi", ours.recv(256)[:12])
    if (rid, err) != (1, 0):
        raise RuntimeError(f"the union was refused: {os.strerror(err)}")


def setup(mode, ds, bundles, m, reader=READER, cpus=None, extra=()):
    """Mounts mode's view; returns (its directory, seconds to visible or None).
    cpus: where the readers run (None: anywhere); extra: more options for
    a served union's reader."""
    if mode == "local":
        return ds.tree, None
    if mode in ("union", "serve"):
        d = m.dir(mode)
        t0 = time.monotonic()
        if mode == "union":
            p = subprocess.Popen([reader, "--union", *bundles, d], preexec_fn=on_cpus(cpus))
            m.procs.append(p)
            m.points.append(d)
            wait_mounted(d, p)
        else:
            serve_union(reader, bundles, d, m, extra, cpus)
        os.stat(d / ds.tops()[-1])
        return d, time.monotonic() - t0
    lowers = []
    for i, b in enumerate(bundles):
        d = m.dir(f"l{i}")
        if mode == "kernel":
            sh("mount", "-t", "squashfs", "-o", "loop,ro", b, d)
            m.points.append(d)
        else:
            p = subprocess.Popen([READER, b, d], preexec_fn=on_cpus(cpus))
            m.procs.append(p)
            m.points.append(d)
            wait_mounted(d, p)
            os.stat(d)  # a fresh FUSE root's mode is known after its first GETATTR
        lowers.append(d)
    o = m.dir("overlay")
    sh("mount", "-t", "overlay", "overlay", "-o",
       "ro,lowerdir=" + ":".join(str(d) for d in reversed(lowers)), o)
    m.points.append(o)
    return o, None


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dataset", default="hcp")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--cache", default=os.environ.get("BENCH_CACHE", "/var/tmp/squash-bench"))
    ap.add_argument("--modes", default="local,kernel,fuse,union")
    ap.add_argument("--readers", help="OLD,NEW: squash-reader binaries to compare in the union and serve modes")
    ap.add_argument("--no-drop", action="store_true", help="keep the caches (a dry run of the script)")
    a = ap.parse_args()
    global DROP
    DROP = not a.no_drop
    ds = Dataset(a.cache, a.dataset)
    s = ds.ensure()
    bundles = sorted(ds.bundles_dir.glob("*.sqfs"))
    readers = [Path(r) for r in a.readers.split(",")] if a.readers else [READER]
    modes = []
    for mode in a.modes.split(","):
        if mode.partition("/")[0] in ("union", "serve") and a.readers:
            modes += [f"{mode}@{i}" for i in range(len(readers))]
        else:
            modes.append(mode)
    if a.readers:
        for i, r in enumerate(readers):
            print(f"@{i}: {r}")
    res = {m: {"cold": [], "warm": [], "random": [], "visible": [], "pss": []} for m in modes}
    picks = random_files(ds.tree)
    for rep in range(a.reps):
        order = modes[rep % len(modes):] + modes[:rep % len(modes)]
        for mode in order:
            where = Path(tempfile.mkdtemp(prefix=f"union-bench-{mode.replace('/', '-')}.", dir="/tmp"))
            m = Mounts(where)
            try:
                drop_caches()
                kind, _, i = mode.partition("@")
                kind, *flags = kind.split("/")
                cpus = {0} if "1cpu" in flags else None
                reader_cpus = {0} if "reader1cpu" in flags else cpus
                cpus = {0} if "find1cpu" in flags else cpus
                d, visible = setup(kind, ds, bundles, m, readers[int(i or 0)], reader_cpus,
                                   ["--poll-us", "0"] if "nopoll" in flags else [])
                drop_caches()
                mine = os.sched_getaffinity(0)
                if cpus:
                    os.sched_setaffinity(0, cpus)
                try:
                    rnd = read_all(d, picks)
                finally:
                    os.sched_setaffinity(0, mine)
                res[mode]["random"].append(rnd)
                drop_caches()
                cold, n = find_count(d, cpus)
                warm, n2 = find_count(d, cpus)
                assert n == n2 == s["entries"] + 1, (mode, n, n2, s["entries"])
                res[mode]["cold"].append(cold)
                res[mode]["warm"].append(warm)
                if m.procs:
                    res[mode]["pss"].append(pss_mib(m.procs))
                if visible is not None:
                    res[mode]["visible"].append(visible)
                print(f"rep {rep + 1} {mode}: cold {cold:.2f} s, warm {warm:.2f} s, random {rnd:.2f} s"
                      + (f", visible {visible:.3f} s" if visible is not None else ""), flush=True)
            finally:
                m.close()
                for p in sorted(where.iterdir(), reverse=True):
                    p.rmdir()
                where.rmdir()
    print(f"\n{a.dataset}: {s['entries']} entries, {s['bundles']} bundles, {a.reps} repetitions; "
          "median (min)")
    local = statistics.median(res["local"]["cold"]) if "local" in res else None
    for mode in modes:
        line = f"{mode:12s}"
        for k in ("cold", "warm", "random", "visible", "pss"):
            v = res[mode][k]
            if v:
                med = statistics.median(v)
                unit = " MiB" if k == "pss" else " s"
                line += f"  {k} {med:.2f}{unit} ({min(v):.2f}{unit})"
                if k == "cold" and local:
                    line += f" {med / local:.2f}x local"
        print(line)


if __name__ == "__main__":
    main()
