#!/usr/bin/env python3
"""squashd under a burst, two (or more) builds side by side: one one-node
cluster per build (tests/cluster/cluster.sh), N simultaneous mount requests
(tests/bench/burst, as N job prologs) in four cases (same image / distinct
images, kernel / FUSE), R rounds, the builds taking turns in each round.
Prints p50 and p99 of every burst, then min and median over the rounds.

  flock /tmp/squash-cluster-run.lock tests/bench/burst_ab.py N ROUNDS TMPFS LABEL=BUILD_DIR...

TMPFS 1 puts squashd's state_dir on a tmpfs (SQUASH_TEST_STATE_TMPFS), as
/run/squashd on a real node; 0 leaves it on /tmp. As root; each build
must hold tests/bench/burst (tests/bench/run.sh builds it). Part of the
benchmark, not of the product."""
import json, os, pwd, shutil, statistics, subprocess, sys, tempfile, time
from pathlib import Path
REPO = Path(__file__).resolve().parents[2]
CL = REPO / "tests/cluster/cluster.sh"
n, reps, tmpfs = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
builds = [a.split("=", 1) for a in sys.argv[4:]]
uid = pwd.getpwnam("squser1").pw_uid
def pct(v, p):
    v = sorted(v); k = (len(v) - 1) * p / 100; f = int(k); c = min(f + 1, len(v) - 1)
    return v[f] + (v[c] - v[f]) * (k - f)
results = {}
clusters = {}
try:
    for label, b in builds:
        d = Path(tempfile.mkdtemp(prefix="sqburst.", dir="/tmp")); os.chmod(d, 0o755)
        env = dict(os.environ, SQUASH_BUILD_DIR=b, SQUASH_TEST_STATE_TMPFS=tmpfs, SLURM_CONF=str(d / "slurm.conf"))
        subprocess.run([CL, "start", d], env=env, check=True, capture_output=True)
        src = d / "src"; src.mkdir(); (src / "hello.txt").write_text("hello\n")
        subprocess.run(["mksquashfs", src, d / "small.sqfs", "-noappend", "-quiet", "-no-progress", "-all-root"], check=True)
        kd, fd = d / "trusted/burst", d / "work/img/burst"
        for x in (kd, fd):
            x.mkdir(parents=True); os.chmod(x, 0o755); os.chmod(x.parent, 0o755)
        for i in range(n):
            for x, p in ((kd, "k"), (fd, "f")):
                shutil.copy(d / "small.sqfs", x / f"{p}{i}.sqfs"); os.chmod(x / f"{p}{i}.sqfs", 0o644)
        clusters[label] = (d, env, kd, fd, b)
    base = 1_000_000
    for rep in range(reps):
        for label, (d, env, kd, fd, b) in clusters.items():
            for name, x, p, distinct in (("same,kernel", kd, "k", False), ("same,fuse", fd, "f", False),
                                         ("distinct,kernel", kd, "k", True), ("distinct,fuse", fd, "f", True)):
                base += 10_000
                specs = [f"{x}/{p}{i}.sqfs:/squash/b" for i in range(n)] if distinct else [f"{x}/{p}0.sqfs:/squash/b"]
                r = subprocess.run([Path(b) / "tests/bench/burst", "--socket", d / "squashd.sock", "--munge-socket", d / "munge.sock",
                                    "--uid", str(uid), "--job-base", str(base), "--n", str(n), *specs], capture_output=True, text=True, timeout=600)
                recs = [json.loads(l) for l in r.stdout.splitlines() if l.startswith("{")]
                ok = [q["ms"] for q in recs if q["op"] == "mount" and q["status"] == "ok"]
                bad = [q for q in recs if q["op"] == "mount" and q["status"] != "ok"]
                results.setdefault((label, name), []).append((pct(ok, 50), pct(ok, 99), len(bad)))
                print(f"{rep} {label:8} {name:16} n={n} p50={pct(ok,50):6.1f} p99={pct(ok,99):6.1f} fail={len(bad)} {bad[:1]}", flush=True)
                for _ in range(600):
                    m = [l for l in open("/proc/self/mountinfo") if f"{d}/squashd/mnt/" in l]
                    if not m: break
                    time.sleep(0.1)
                time.sleep(1)
finally:
    for label, (d, env, *_ ) in clusters.items():
        subprocess.run([CL, "stop", d], env=env, capture_output=True)
        shutil.rmtree(d, ignore_errors=True)
print("\nsummary: min / median over reps of p50, p99")
for (label, name), v in sorted(results.items(), key=lambda kv: (kv[0][1], kv[0][0])):
    p50 = [x[0] for x in v]; p99 = [x[1] for x in v]
    print(f"{name:16} {label:8} p50 min {min(p50):6.1f} med {statistics.median(p50):6.1f}  p99 min {min(p99):6.1f} med {statistics.median(p99):6.1f}  fails {sum(x[2] for x in v)}")
