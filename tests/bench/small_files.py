#!/usr/bin/env python3
"""Many small files read through the product (issue 38; docs/performance.md
section 14): a job reads every file of a tree of 24,000 files of 1-8 KiB
from the user's image, which squashd mounts with squash-reader, and from
the same image as a trusted image, which squashd mounts with the kernel's
squashfs; cold (caches dropped before each job), the two interleaved in an
order rotated every repetition, on a throwaway cluster
(tests/cluster/cluster.sh). As root, through run.sh or alone:

    tests/bench/run.sh --small-files [--reps 5] [--lock /tmp/squash-cluster.lock]
    flock /tmp/squash-cluster.lock tests/bench/small_files.py [--reps 5]

Workloads, each timed inside the job:

  md5       find . -type f -print0 | xargs -0 md5sum: a listing and a READ
            per file (the bench's md5sum workload)
  md5-list  xargs -0 md5sum < LIST (the paths made beforehand): a LOOKUP
            and a READ per file, from one process
  stat      find . -type f -printf '%s': the stat walk, for comparison

each with the job's task bound to one CPU (--binds 0: taskset, as a
site's task binding binds a job's tasks; the reader follows such a
requester to its CPU, daemon/reader/worker_cpu.c) and free ("none").
Prints per workload and binding the median (min) of each mount and the
reader's median over the kernel's; --out FILE also writes every time as
CSV. The tree and its image (zstd, 128 KiB blocks; files half random, half
text, a fixed seed) are made once into $BENCH_CACHE/small-files."""

import argparse
import csv
import fcntl
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
CLUSTER_SH = REPO / "tests" / "cluster" / "cluster.sh"
CACHE = Path(os.environ.get("BENCH_CACHE", "/var/tmp/squash-bench")) / "small-files"
USER = "squser1"
TARGET = "/squash/small"
# 20 x 30 directories of 40 files: 24,000 files, 1-8 KiB each.
SHAPE, SEED, VERSION = (20, 30, 40), 38, 1

WORKLOADS = {
    "md5": "find . -type f -print0 | xargs -0 md5sum > /dev/null",
    "md5-list": "xargs -0 md5sum < {list} > /dev/null",
    "stat": "find . -type f -printf '%s\\n' > /dev/null",
}


def log(msg):
    print(f"small_files: {msg}", file=sys.stderr, flush=True)


def make_image():
    """The tree and its image, made once; returns (image, the list of paths)."""
    img, paths = CACHE / "small.sqfs", CACHE / "paths0"
    stamp = CACHE / "stamp"
    want = f"{VERSION} {SHAPE} {SEED}\n"
    if img.exists() and paths.exists() and stamp.exists() and stamp.read_text() == want:
        return img, paths
    shutil.rmtree(CACHE, ignore_errors=True)
    CACHE.mkdir(parents=True)
    tree = CACHE / "tree"
    rng = random.Random(SEED)
    names = []
    for a in range(SHAPE[0]):
        for b in range(SHAPE[1]):
            d = tree / f"d{a:02d}" / f"e{b:02d}"
            d.mkdir(parents=True)
            for c in range(SHAPE[2]):
                size = rng.randint(1024, 8192)
                text = (b"lorem ipsum dolor sit amet %d\n" % c) * (size // 56 + 1)
                (d / f"f{c:03d}.dat").write_bytes((rng.randbytes(size // 2) + text)[:size])
                names.append(f"./d{a:02d}/e{b:02d}/f{c:03d}.dat")
    log(f"packing {len(names)} files")
    subprocess.run(["mksquashfs", tree, img, "-comp", "zstd", "-b", "128K", "-all-root",
                    "-noappend", "-quiet", "-no-progress"], check=True)
    shutil.rmtree(tree)
    paths.write_bytes(b"".join(n.encode() + b"\0" for n in names))
    stamp.write_text(want)
    return img, paths


def drop_caches():
    os.sync()
    Path("/proc/sys/vm/drop_caches").write_text("3\n")


class Cluster:
    """One throwaway cluster, the image linked as trusted (kernel) and as
    the user's (FUSE)."""

    def __init__(self, img, paths):
        self.dir = Path(tempfile.mkdtemp(prefix="squash-small-files.", dir="/tmp"))
        os.chmod(self.dir, 0o755)
        self.env = dict(os.environ, SLURM_CONF=str(self.dir / "slurm.conf"),
                        SQUASH_TEST_STATE_TMPFS="1")
        p = subprocess.run([CLUSTER_SH, "start", self.dir], env=self.env, text=True,
                           capture_output=True, timeout=300)
        if p.returncode != 0:
            self.stop()
            raise SystemExit(f"cluster.sh start failed:\n{p.stdout[-2000:]}\n{p.stderr[-2000:]}")
        work = self.dir / "work" / "small"
        work.mkdir(parents=True)
        os.chmod(work, 0o755)
        self.images = {"kernel": self.dir / "trusted" / "small.sqfs", "reader": work / "small.sqfs"}
        for dst in self.images.values():
            try:
                os.link(img, dst)
            except OSError:
                shutil.copy(img, dst)
            os.chmod(dst, 0o644)
        self.list = work / "paths0"
        shutil.copy(paths, self.list)
        os.chmod(self.list, 0o644)
        self.work = work

    def job(self, mode, workload, bind):
        """Seconds the workload took inside one job, cold."""
        cmd = WORKLOADS[workload].format(list=self.list)
        script = (f"cd {TARGET} && t0=$(date +%s%N) && {cmd} && t1=$(date +%s%N) && "
                  "echo TIME $(( (t1 - t0) / 1000 ))")
        task = ["taskset", "-c", bind] if bind != "none" else []
        drop_caches()
        p = subprocess.run(["runuser", "-u", USER, "--", "env", f"SLURM_CONF={self.dir / 'slurm.conf'}",
                            "srun", "-Q", "-n1", f"--squash-image={self.images[mode]}:{TARGET}",
                            *task, "/bin/sh", "-c", script],
                           env=self.env, cwd=self.work, text=True, capture_output=True, timeout=600)
        times = [line.split()[1] for line in p.stdout.splitlines() if line.startswith("TIME ")]
        if p.returncode != 0 or not times:
            raise RuntimeError(f"{mode} {workload} job failed ({p.returncode}): {p.stderr[-2000:]}")
        self.wait_released()
        return int(times[0]) / 1e6

    def wait_released(self, timeout=60):
        """Until the epilog has released the image: the next job mounts afresh."""
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            with open("/proc/self/mountinfo") as f:
                if not any(line.split()[4].startswith(f"{self.dir}/squashd/mnt/") for line in f):
                    return
            time.sleep(0.05)
        raise RuntimeError("the previous job's image was not released")

    def stop(self):
        subprocess.run([CLUSTER_SH, "stop", self.dir], env=self.env, capture_output=True, timeout=300)
        with open("/proc/self/mountinfo") as f:
            if not any(line.split()[4].startswith(f"{self.dir}/") for line in f):
                shutil.rmtree(self.dir, ignore_errors=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--workloads", default="md5,md5-list,stat")
    ap.add_argument("--binds", default="0,none",
                    help="the job's task bound to this CPU (taskset), or none; comma-separated")
    ap.add_argument("--lock", metavar="FILE", help="hold flock(FILE) while the cluster runs")
    ap.add_argument("--out", metavar="FILE", help="every time as CSV")
    a = ap.parse_args()
    if os.geteuid() != 0:
        raise SystemExit("small_files.py: run as root (a Slurm cluster, drop_caches)")
    workloads, binds = a.workloads.split(","), a.binds.split(",")
    for w in workloads:
        if w not in WORKLOADS:
            raise SystemExit(f"small_files.py: no workload {w} (one of {', '.join(WORKLOADS)})")
    img, paths = make_image()
    lock = open(a.lock, "a") if a.lock else None
    if lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
    modes = ["kernel", "reader"]
    rows, res = [], {}
    c = Cluster(img, paths)
    try:
        for rep in range(a.reps):
            order = modes[rep % 2:] + modes[:rep % 2]
            for w in workloads:
                for bind in binds:
                    for mode in order:
                        s = c.job(mode, w, bind)
                        res.setdefault((w, bind, mode), []).append(s)
                        rows.append({"rep": rep + 1, "workload": w, "bind": bind, "mode": mode,
                                     "seconds": round(s, 4)})
                        log(f"rep {rep + 1} {w:8} bind {bind:4} {mode:6} {s:.3f} s")
    finally:
        c.stop()
        if lock:
            lock.close()
    if a.out:
        with open(a.out, "w", newline="") as f:
            wr = csv.DictWriter(f, fieldnames=list(rows[0]))
            wr.writeheader()
            wr.writerows(rows)
    print(f"\n24,000 files of 1-8 KiB, zstd 128K, cold, through a job; median (min) of {a.reps}")
    print(f"{'workload':9} {'bind':5} {'kernel':>16} {'squash-reader':>16} {'reader/kernel':>14}")
    for w in workloads:
        for bind in binds:
            k, r = res[(w, bind, "kernel")], res[(w, bind, "reader")]
            print(f"{w:9} {bind:5} {statistics.median(k):7.3f} ({min(k):5.3f}) "
                  f"{statistics.median(r):7.3f} ({min(r):5.3f}) "
                  f"{statistics.median(r) / statistics.median(k):13.2f}x")


if __name__ == "__main__":
    main()
