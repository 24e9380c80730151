#!/usr/bin/env python3
"""What sending files unlinked in READDIRPLUS (squash-reader --plus dirs:
node id 0 for every entry but directories, so the kernel builds no inode
and no dentry for them) does to cold walks (issue 38 item 5;
docs/performance.md section 16). For a dataset of dataset.py, as root:

    flock /tmp/squash-cluster.lock tests/bench/listing_unlinked.py [--reps 5] [--dataset hcp]

Targets: "image", the whole tree as one image served by a standalone
squash-reader; "union", the bundles as one union served as squashd has it
served (squash-reader --serve, union_alone.serve_union). Each is mounted
with --plus all and --plus dirs. Walks, each on a fresh mount after
dropping the page cache, dentries and inodes:

  find    find . -print | wc -l      (names and types: d_type is enough)
  stat    find . -printf '%s\\n' | wc -l   (an lstat of every entry)
  ls      ls -lR . | wc -l           (lstat and ACL probes of every entry)
  xstat   find . -type f -print0 | xargs -0 stat -c %s | wc -l
          (listed by one process, stat'ed by others: --walks to run it)

Repetitions interleave every (target, plus, walk), in an order rotated
each time. Prints min and median seconds, then, from one more traced run
of each (a tracefs instance of its own on fuse:fuse_request_send, filtered
to the mount's connection), the FUSE requests by opcode and the kernel's
fuse_inode objects it added (/proc/slabinfo, 896 bytes each)."""

import argparse
import itertools
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from dataset import MKSQUASHFS_ARGS, Dataset  # noqa: E402
import union_alone  # noqa: E402
from union_alone import Mounts, READER, drop_caches, serve_union, wait_mounted  # noqa: E402

WALKS = {
    "find": "find . -print | wc -l",
    "stat": "find . -printf '%s\\n' | wc -l",
    "ls": "ls -lR . | wc -l",
    "xstat": "find . -type f -print0 | xargs -0 stat -c %s | wc -l",
}
TRACING = Path("/sys/kernel/tracing")
SERIAL = itertools.count()


def one_image(ds, cache):
    """The whole tree as one image (made once, next to the dataset)."""
    img = Path(cache) / "datasets" / f"{ds.name}-one.sqfs"
    if not img.exists() or img.stat().st_mtime < ds.stamp.stat().st_mtime:
        args = [a for a in MKSQUASHFS_ARGS if a != "-keep-as-directory"]
        args[args.index("-processors") + 1] = "2"
        subprocess.run(["mksquashfs", ds.tree, str(img) + ".tmp", *args], check=True)
        os.rename(str(img) + ".tmp", img)
    return img


def mount(target, plus, ds, bundles, image, m, reader):
    d = m.dir(f"{target}-{plus}-{next(SERIAL)}")
    if target == "image":
        p = subprocess.Popen([reader, "--plus", plus, image, d])
        m.procs.append(p)
        m.points.append(d)
        wait_mounted(d, p)
    else:
        serve_union(reader, bundles, d, m, ["--plus", plus])
    return d


class Trace:
    """Counts the FUSE requests sent on one connection, by opcode."""

    def __init__(self, name):
        self.dir = TRACING / "instances" / name
        self.dir.mkdir(exist_ok=True)

    def start(self, dev):
        ev = self.dir / "events" / "fuse" / "fuse_request_send"
        (ev / "filter").write_text(f"connection == {dev}\n")
        (self.dir / "trace").write_text("")
        (self.dir / "buffer_size_kb").write_text("65536\n")
        (ev / "enable").write_text("1\n")

    def stop(self):
        (self.dir / "events" / "fuse" / "fuse_request_send" / "enable").write_text("0\n")
        counts = {}
        for line in (self.dir / "trace").read_text().splitlines():
            if "opcode" in line and "(" in line:
                op = line.split("(", 1)[1].split(")", 1)[0].replace("FUSE_", "")
                counts[op] = counts.get(op, 0) + 1
        lost = sum(int(ln.split()[-1]) for cpu in (self.dir / "per_cpu").iterdir()
                   for ln in (cpu / "stats").read_text().splitlines() if ln.startswith("overrun"))
        return counts, lost

    def close(self):
        self.dir.rmdir()


def fuse_inodes():
    """fuse_inode objects in use on the machine (/proc/slabinfo)."""
    for line in open("/proc/slabinfo"):
        if line.startswith("fuse_inode "):
            return int(line.split()[1])
    return 0


def run_walk(d, walk):
    t0 = time.monotonic()
    r = subprocess.run(f"cd {d} && {WALKS[walk]}", shell=True, check=True,
                       capture_output=True, text=True)
    if r.stderr:
        print(f"{walk} on {d}: {r.stderr[:500]}", file=sys.stderr)
    return time.monotonic() - t0, int(r.stdout)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--dataset", default="hcp")
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--cache", default=os.environ.get("BENCH_CACHE", "/var/tmp/squash-bench"))
    ap.add_argument("--targets", default="image,union")
    ap.add_argument("--walks", default="find,stat,ls")
    ap.add_argument("--plus", default="all,dirs,auto", help="the reader's --plus modes to compare")
    ap.add_argument("--reader", default=str(READER))
    ap.add_argument("--no-count", action="store_true", help="skip the traced runs")
    a = ap.parse_args()
    if os.geteuid() != 0:
        raise SystemExit("run as root (mounts, drop_caches, tracefs)")
    ds = Dataset(a.cache, a.dataset)
    ds.ensure()
    bundles = sorted(ds.bundles_dir.glob("b*.sqfs"))
    image = one_image(ds, a.cache)
    targets, walks = a.targets.split(","), a.walks.split(",")
    cases = [(t, p, w) for t in targets for w in walks for p in a.plus.split(",")]
    times = {c: [] for c in cases}
    entries = {}
    with tempfile.TemporaryDirectory(prefix="listing-unlinked.") as tmp:
        for rep in range(a.reps):
            k = rep % len(cases)
            for c in cases[k:] + cases[:k]:
                m = Mounts(Path(tmp))
                try:
                    d = mount(c[0], c[1], ds, bundles, image, m, a.reader)
                    drop_caches()
                    t, n = run_walk(d, c[2])
                finally:
                    m.close()
                times[c].append(t)
                entries.setdefault(c, n)
                print(f"rep {rep} {c[0]:5} {c[1]:4} {c[2]:4} {t:6.2f} s ({n} lines)", flush=True)
        print(f"\n{'target':6} {'walk':5} {'plus':5} {'min':>7} {'median':>7}")
        for c in sorted(cases):
            v = times[c]
            print(f"{c[0]:6} {c[2]:5} {c[1]:5} {min(v):7.2f} {statistics.median(v):7.2f}")
        if a.no_count:
            return
        tr = Trace(f"listing-unlinked-{os.getpid()}")
        try:
            print("\nFUSE requests of one cold walk, by opcode:")
            for c in sorted(cases):
                m = Mounts(Path(tmp))
                try:
                    d = mount(c[0], c[1], ds, bundles, image, m, a.reader)
                    drop_caches()
                    dev = os.stat(d).st_dev
                    tr.start(os.major(dev) << 20 | os.minor(dev))  # the kernel's dev_t
                    inodes = fuse_inodes()
                    run_walk(d, c[2])
                    inodes = fuse_inodes() - inodes
                    counts, lost = tr.stop()
                finally:
                    m.close()
                total = sum(counts.values())
                ops = " ".join(f"{op}={n}" for op, n in sorted(counts.items(), key=lambda x: -x[1]))
                print(f"{c[0]:6} {c[2]:5} {c[1]:5} fuse_inodes+{inodes} total={total} {ops}"
                      + (f" ({lost} events lost)" if lost else ""))
        finally:
            tr.close()


if __name__ == "__main__":
    union_alone.DROP = True
    main()
