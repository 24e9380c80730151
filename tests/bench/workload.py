#!/usr/bin/env python3
"""One benchmark workload against one tree, timed from inside (so the same
code measures a bare mount and a Slurm job step alike). Standard library
only: it runs under the system python3, also as a test user inside a job.

    workload.py WORKLOAD ROOT [--times K] [--n N] [--imports a,b,c]

ROOT holds site-packages/ (the Python stack) and big/data.bin (the large
file). WORKLOAD is one of:

  import  a fresh python3 importing --imports from ROOT/site-packages
  start   N fresh python3 processes doing the same import, all started at
          once; the time until the last one is done
  stat    lstat() of every entry below ROOT/site-packages
  md5     md5sum of every file below ROOT/site-packages (find | xargs)
  read    one sequential read of ROOT/big/data.bin in 1 MiB pieces
  find    `find . -print | wc -l` in ROOT (a dataset tree: the --datasets
          mode); files is the count it printed
  random  open and read every file that --list FILE names (one path
          relative to ROOT a line: the dataset's fixed random sample), in
          that order; files and bytes are what it read

For the --datasets mode, in a job: --sync DIR makes the job wait at two
points for the caller (a file DIR/mounted, then DIR/go-scan before the runs; DIR/scanned,
then DIR/go-end after them), so that the node's memory can be read while
the job holds its mounts. --then-random FILE (with --sync): after the
runs, a third point (DIR/scanned, then DIR/go-random: the caller drops the
caches meanwhile), one run of the random workload over FILE, then DIR/randomed
and DIR/go-end.

Runs the workload K times in a row (the caller makes the first one cold)
and prints one JSON object per run on stdout: {"workload", "run",
"seconds", "n", "bytes", "files", "busy_cpu_s", "own_cpu_s"}: busy_cpu_s
is the CPU time the whole machine spent during the run (/proc/stat),
own_cpu_s that of this process and its children; on a shared machine the
difference is the others' (plus FUSE servers and kernel threads).
Exits non-zero when a run fails.
"""

import argparse
import json
import os
import resource
import subprocess
import sys
import time

PYTHON = "/usr/bin/python3"


def child_env(root):
    env = dict(os.environ)
    env["PYTHONPATH"] = os.path.join(root, "site-packages")
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    env["PYTHONNOUSERSITE"] = "1"
    env["MPLBACKEND"] = "Agg"
    # matplotlib and fontconfig must not spend the run building caches in a
    # home directory that may not exist (test users, read-only images).
    env["MPLCONFIGDIR"] = env.get("BENCH_MPLCONFIGDIR", "/tmp/squash-bench-mpl-%d" % os.getuid())
    env["OMP_NUM_THREADS"] = "1"
    env["OPENBLAS_NUM_THREADS"] = "1"
    return env


def import_code(imports):
    return "import " + ", ".join(imports)


def run_start(root, n, imports):
    env = child_env(root)
    code = import_code(imports)
    t0 = time.perf_counter()
    procs = [subprocess.Popen([PYTHON, "-c", code], env=env,
                              stdin=subprocess.DEVNULL) for _ in range(n)]
    rcs = [p.wait() for p in procs]
    dt = time.perf_counter() - t0
    bad = [rc for rc in rcs if rc != 0]
    if bad:
        raise RuntimeError(f"{len(bad)} of {n} imports failed (exit {bad[0]})")
    return dt, {}


def run_stat(root):
    top = os.path.join(root, "site-packages")
    t0 = time.perf_counter()
    n = 0
    stack = [top]
    while stack:
        d = stack.pop()
        with os.scandir(d) as it:
            for e in it:
                st = os.lstat(e.path)
                n += 1
                if e.is_dir(follow_symlinks=False):
                    stack.append(e.path)
    dt = time.perf_counter() - t0
    return dt, {"files": n}


def run_md5(root):
    top = os.path.join(root, "site-packages")
    t0 = time.perf_counter()
    find = subprocess.Popen(["find", top, "-type", "f", "-print0"],
                            stdout=subprocess.PIPE)
    xargs = subprocess.run(["xargs", "-0", "md5sum"], stdin=find.stdout,
                           stdout=subprocess.DEVNULL)
    find.stdout.close()
    frc = find.wait()
    dt = time.perf_counter() - t0
    if frc != 0 or xargs.returncode != 0:
        raise RuntimeError(f"find exited {frc}, xargs md5sum exited {xargs.returncode}")
    return dt, {}


def run_read(root):
    path = os.path.join(root, "big", "data.bin")
    buf = bytearray(1 << 20)
    mv = memoryview(buf)
    total = 0
    t0 = time.perf_counter()
    fd = os.open(path, os.O_RDONLY)
    try:
        while True:
            n = os.readv(fd, [mv])
            if n == 0:
                break
            total += n
    finally:
        os.close(fd)
    dt = time.perf_counter() - t0
    return dt, {"bytes": total}


def run_find(root):
    t0 = time.perf_counter()
    p = subprocess.run("find . -print | wc -l", shell=True, cwd=root, stdout=subprocess.PIPE,
                       text=True)
    dt = time.perf_counter() - t0
    if p.returncode != 0:
        raise RuntimeError(f"find | wc exited {p.returncode}")
    return dt, {"files": int(p.stdout.strip())}


def run_random(root, listing):
    with open(listing) as f:
        paths = [line.rstrip("\n") for line in f if line.strip()]
    total = 0
    t0 = time.perf_counter()
    for p in paths:
        fd = os.open(os.path.join(root, p), os.O_RDONLY)
        try:
            while True:
                b = os.read(fd, 1 << 20)
                if not b:
                    break
                total += len(b)
        finally:
            os.close(fd)
    dt = time.perf_counter() - t0
    return dt, {"files": len(paths), "bytes": total}


def sync_point(d, mine, theirs, timeout=1800):
    if not d:
        return
    open(os.path.join(d, mine), "w").close()
    deadline = time.monotonic() + timeout
    while not os.path.exists(os.path.join(d, theirs)):
        if time.monotonic() > deadline:
            raise RuntimeError(f"no {theirs} in {d} after {timeout} s")
        time.sleep(0.05)


def machine_busy_s():
    """CPU seconds the machine has been busy (all CPUs, not idle/iowait)."""
    with open("/proc/stat") as f:
        v = [int(x) for x in f.readline().split()[1:]]
    total = sum(v[:8])  # user nice system idle iowait irq softirq steal
    return (total - v[3] - v[4]) / os.sysconf("SC_CLK_TCK")


def own_cpu_s():
    s = resource.getrusage(resource.RUSAGE_SELF)
    c = resource.getrusage(resource.RUSAGE_CHILDREN)
    return s.ru_utime + s.ru_stime + c.ru_utime + c.ru_stime


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("workload", choices=["import", "start", "stat", "md5", "read", "find", "random"])
    ap.add_argument("root")
    ap.add_argument("--times", type=int, default=1)
    ap.add_argument("--n", type=int, default=1)
    ap.add_argument("--imports", default="numpy")
    ap.add_argument("--sync")
    ap.add_argument("--list", help="the random workload's files")
    ap.add_argument("--then-random", metavar="FILE", help="after the runs, one random run over FILE")
    a = ap.parse_args()
    sync_point(a.sync, "mounted", "go-scan")
    imports = [m for m in a.imports.split(",") if m]
    if a.workload == "import":
        a.n = 1
    for i in range(a.times):
        busy0, own0 = machine_busy_s(), own_cpu_s()
        if a.workload in ("import", "start"):
            dt, extra = run_start(a.root, a.n, imports)
        elif a.workload == "stat":
            dt, extra = run_stat(a.root)
        elif a.workload == "md5":
            dt, extra = run_md5(a.root)
        elif a.workload == "find":
            dt, extra = run_find(a.root)
        elif a.workload == "random":
            dt, extra = run_random(a.root, a.list)
        else:
            dt, extra = run_read(a.root)
        rec = {"workload": a.workload, "run": i, "seconds": round(dt, 6), "n": a.n}
        rec.update(extra)
        rec["busy_cpu_s"] = round(machine_busy_s() - busy0, 2)
        rec["own_cpu_s"] = round(own_cpu_s() - own0, 2)
        print(json.dumps(rec), flush=True)
    if a.then_random:
        sync_point(a.sync, "scanned", "go-random")
        busy0, own0 = machine_busy_s(), own_cpu_s()
        dt, extra = run_random(a.root, a.then_random)
        rec = {"workload": "random", "run": 0, "seconds": round(dt, 6), "n": 1}
        rec.update(extra)
        rec["busy_cpu_s"] = round(machine_busy_s() - busy0, 2)
        rec["own_cpu_s"] = round(own_cpu_s() - own0, 2)
        print(json.dumps(rec), flush=True)
        sync_point(a.sync, "randomed", "go-end")
    else:
        sync_point(a.sync, "scanned", "go-end")
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except Exception as e:  # noqa: BLE001 - report any failure as one line
        print(f"workload.py: {e}", file=sys.stderr)
        sys.exit(1)
