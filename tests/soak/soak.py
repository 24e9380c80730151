#!/usr/bin/env python3
"""Soak driver for slurm-squash (issue 6, item 9); started by tests/soak/run.sh,
which owns the cluster's start and stop. Standard library only.

Drives waves of mixed jobs through the throwaway cluster in --dir while a
chaos thread SIGKILLs squashd (and restarts it) and SIGKILLs FUSE servers of
this instance at random moments, then writes a Markdown report: jobs per
final state and per scenario, every failed job's message classified as
expected (the scenario made it fail) or not, leftovers after a final
`squashctl gc`, and squashd's answer times from its --debug log.
"""

import argparse
import collections
import json
import os
import pwd
import random
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

USERS = ("squser1", "squser2")
TERMINAL = {"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "PREEMPTED",
            "BOOT_FAIL", "DEADLINE", "OUT_OF_MEMORY"}
FSTYPES = ("squashfs", "fuse.squashfuse", "fuse.squashfuse_ll", "fuse")

# What each scenario may end in without anyone being at fault.
EXPECTED_STATES = {
    "completed": {"COMPLETED"},
    "srun-steps": {"COMPLETED"},
    "kernel": {"COMPLETED"},
    "exit1": {"FAILED"},
    "deleted-image": {"FAILED"},
    "scancel-prolog": {"CANCELLED", "COMPLETED"},
    "scancel-run": {"CANCELLED", "COMPLETED"},
    "scancel-epilog": {"CANCELLED", "COMPLETED"},
    "timeout": {"TIMEOUT"},
    "requeue": {"COMPLETED"},
    "array-100": {"COMPLETED"},
    "burst-128-one-image": {"COMPLETED"},
    "burst-64-distinct": {"COMPLETED"},
}


def log(msg):
    print(time.strftime("%H:%M:%S ") + msg, file=sys.stderr, flush=True)


def run(cmd, timeout=120, env=None, check=False, **kw):
    kw.setdefault("stdout", subprocess.PIPE)
    kw.setdefault("stderr", subprocess.PIPE)
    try:
        p = subprocess.run([str(c) for c in cmd], text=True, timeout=timeout, env=env, **kw)
    except subprocess.TimeoutExpired as e:
        return subprocess.CompletedProcess(cmd, 124, e.stdout or "", (e.stderr or "") + "\ntimed out")
    if check and p.returncode != 0:
        raise RuntimeError(f"{' '.join(map(str, cmd))} exited {p.returncode}: {p.stderr.strip()}")
    return p


class Job:
    def __init__(self, key, scenario, user, image, kernel, out, expect_text):
        self.key = key              # "123" or "123_7" (array task)
        self.scenario = scenario
        self.user = user
        self.image = str(image)
        self.kernel = kernel
        self.out = Path(out)
        self.expect_text = expect_text
        self.submitted = time.time()
        self.first_seen = None
        self.started = None          # first seen RUNNING
        self.ended = None
        self.state = "SUBMITTED"
        self.reason = ""
        self.states_seen = []
        self.missing_polls = 0
        self.note = ""               # what the scenario did (e.g. "scancel at RUNNING")
        self.requeued = False

    @property
    def done(self):
        return self.ended is not None


class Soak:
    def __init__(self, a):
        self.a = a
        self.dir = Path(a.dir).resolve()
        self.build = Path(a.build)
        self.env = dict(os.environ, SLURM_CONF=str(self.dir / "slurm.conf"))
        self.squashctl_cmd = [str(self.build / "daemon" / "squashctl"), "--socket",
                              str(self.dir / "squashd.sock"), "--munge-socket",
                              str(self.dir / "munge.sock")]
        self.rng = random.Random(a.seed)
        self.jobs = {}
        self.lock = threading.Lock()
        self.stop = threading.Event()
        self.chaos_lock = threading.Lock()
        self.events = []             # (time, kind, detail)
        self.fuse_kills = []         # (time, image, pid)
        self.squashd_kills = []      # (time killed, time back, downtime)
        self.node_problems = []
        self.threads = []
        self.n = 0
        self.node = run(["hostname", "-s"]).stdout.strip()
        self.t0 = time.time()

    # ------------------------------------------------------------ helpers
    def event(self, kind, detail):
        with self.lock:
            self.events.append((time.time(), kind, detail))
        log(f"{kind}: {detail}")

    def slurm(self, *cmd, timeout=60):
        return run(cmd, env=self.env, timeout=timeout)

    def as_user(self, user, cmd, cwd=None, timeout=120):
        full = ["runuser", "-u", user, "--", "env", f"SLURM_CONF={self.dir / 'slurm.conf'}", *cmd]
        return run(full, env=self.env, cwd=cwd, timeout=timeout)

    def squashctl(self, *args, timeout=60):
        return run([*self.squashctl_cmd, *args], timeout=timeout)

    def workdir(self, user, name):
        self.n += 1
        d = self.dir / "work" / f"{name}-{self.n}"
        d.mkdir()
        pw = pwd.getpwnam(user)
        os.chown(d, pw.pw_uid, pw.pw_gid)
        d.chmod(0o755)
        return d

    def make_image(self, path, text, owner):
        src = Path(tempfile.mkdtemp(prefix="imgsrc.", dir=self.dir))
        src.chmod(0o755)
        try:
            (src / "hello.txt").write_text(text)
            (src / "hello.txt").chmod(0o644)
            run(["mksquashfs", src, path, "-noappend", "-quiet", "-no-progress", "-all-root"],
                check=True)
        finally:
            shutil.rmtree(src)
        pw = pwd.getpwnam(owner)
        os.chown(path, pw.pw_uid, pw.pw_gid)
        os.chmod(path, 0o644)
        return Path(path)

    def new_image(self, user, name, kernel=False):
        """A fresh image: a user's (FUSE) or a trusted root one (kernel)."""
        self.n += 1
        name = f"{name}-{self.n}"
        if kernel:
            path = self.dir / "trusted" / f"{name}.sqfs"
            owner = "root"
        else:
            d = self.workdir(user, "img")
            path = d / f"{name}.sqfs"
            owner = user
        text = f"soak image {name}\n"
        self.make_image(path, text, owner)
        return path, text

    # ------------------------------------------------------------ submitting
    def script(self, d, body):
        s = d / "job.sh"
        s.write_text("#!/bin/bash\n" + body)
        s.chmod(0o755)
        return s

    def sbatch(self, scenario, user, image, kernel, text, body, args=(), held=False,
               array=None):
        d = self.workdir(user, scenario)
        s = self.script(d, body)
        out = d / ("job-%A_%a.out" if array else "job.out")
        cmd = ["sbatch", "--parsable", "-o", str(out), f"--squash-image={image}",
               "-J", f"soak-{scenario}", *args]
        if held:
            cmd.append("-H")
        if array:
            cmd.append(f"--array={array}")
        cmd.append(str(s))
        for attempt in range(5):
            p = self.as_user(user, cmd, cwd=d, timeout=90)
            if p.returncode == 0:
                break
            self.event("sbatch-retry", f"{scenario}: {p.stderr.strip()[:300]}")
            time.sleep(2)
        else:
            self.event("sbatch-refused", f"{scenario} as {user}: {p.stderr.strip()[:500]}")
            return []
        jid = p.stdout.strip().split(";")[0]
        jobs = []
        with self.lock:
            if array:
                lo, hi = map(int, array.split("-"))
                for i in range(lo, hi + 1):
                    j = Job(f"{jid}_{i}", scenario, user, image, kernel,
                            d / f"job-{jid}_{i}.out", text)
                    self.jobs[j.key] = j
                    jobs.append(j)
            else:
                j = Job(jid, scenario, user, image, kernel, out, text)
                j.dir = d
                self.jobs[j.key] = j
                jobs.append(j)
        return jobs

    def release(self, jobs):
        ids = [j.key for j in jobs]
        for i in range(0, len(ids), 64):
            p = self.slurm("scontrol", "release", ",".join(ids[i:i + 64]))
            if p.returncode != 0:
                self.event("release-failed", p.stderr.strip()[:300])

    # ------------------------------------------------------------ polling
    def poller(self):
        while not self.stop.is_set():
            self.poll_once()
            self.stop.wait(1.5)

    def poll_once(self):
        p = self.slurm("squeue", "-h", "-r", "-t", "all", "-o", "%i|%T|%r")
        if p.returncode != 0:
            return
        seen = {}
        for line in p.stdout.splitlines():
            parts = line.strip().split("|")
            if len(parts) < 3 or "[" in parts[0]:
                continue
            seen[parts[0]] = (parts[1], parts[2])
        now = time.time()
        with self.lock:
            for key, j in self.jobs.items():
                if j.done:
                    continue
                if key in seen:
                    st, reason = seen[key]
                    j.missing_polls = 0
                    if j.first_seen is None:
                        j.first_seen = now
                    if not j.states_seen or j.states_seen[-1] != st:
                        j.states_seen.append(st)
                    if st == "RUNNING" and j.started is None:
                        j.started = now
                    j.state, j.reason = st, reason
                    if st in TERMINAL:
                        j.ended = now
                elif j.first_seen is not None:
                    j.missing_polls += 1
                    if j.missing_polls >= 3:
                        j.state = "GONE"
                        j.ended = now
        # The node must stay in service.
        p = self.slurm("sinfo", "-h", "-N", "-o", "%T|%E")
        st = p.stdout.strip()
        if p.returncode == 0 and st and not st.split("|")[0].startswith(("idle", "mixed", "alloc", "completing")):
            self.event("node-state", st)
            with self.lock:
                self.node_problems.append((now, st))
            if "drain" in st or "down" in st:
                self.slurm("scontrol", "update", f"nodename={self.node}", "state=resume")

    def active(self):
        with self.lock:
            return sum(1 for j in self.jobs.values() if not j.done)

    def wait_jobs(self, jobs, timeout):
        deadline = time.time() + timeout
        while time.time() < deadline:
            if all(j.done for j in jobs):
                return True
            time.sleep(1)
        return False

    def wait_active_below(self, n, timeout=900):
        deadline = time.time() + timeout
        while self.active() > n and time.time() < deadline:
            time.sleep(1)

    # ------------------------------------------------------------ chaos
    def fuse_servers(self):
        """{pid: image} of squashfuse_ll processes serving this instance."""
        prefix = str(self.dir) + "/"
        res = {}
        for p in Path("/proc").iterdir():
            if not p.name.isdigit():
                continue
            try:
                if (p / "comm").read_text().strip() != "squashfuse_ll":
                    continue
                for fd in os.listdir(p / "fd"):
                    t = os.readlink(p / "fd" / fd)
                    if t.startswith(prefix) and t.endswith(".sqfs"):
                        res[int(p.name)] = t
                        break
            except OSError:
                continue
        return res

    def kill_fuse(self):
        servers = self.fuse_servers()
        if not servers:
            return
        pid = self.rng.choice(sorted(servers))
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            return
        with self.lock:
            self.fuse_kills.append((time.time(), servers[pid], pid))
        self.event("chaos", f"SIGKILL FUSE server {pid} of {servers[pid]}")

    def squashd_pid(self):
        try:
            pid = int((self.dir / "run" / "squashd.pid").read_text())
        except (OSError, ValueError):
            return None
        return pid if Path(f"/proc/{pid}").exists() else None

    def kill_squashd(self):
        with self.chaos_lock:
            pid = self.squashd_pid()
            if not pid:
                return
            t = time.time()
            os.kill(pid, signal.SIGKILL)
            for _ in range(100):
                if not Path(f"/proc/{pid}").exists():
                    break
                time.sleep(0.05)
            time.sleep(self.rng.uniform(0.1, 2.0))
            p = run([self.a.cluster_sh, "squashd-start", self.dir], timeout=120)
            back = time.time()
            with self.lock:
                self.squashd_kills.append((t, back, back - t))
            self.event("chaos", f"SIGKILL squashd {pid}; restarted after {back - t:.1f} s"
                       + ("" if p.returncode == 0 else f" (squashd-start FAILED: {p.stderr.strip()[-300:]})"))

    def chaos(self):
        while not self.stop.wait(self.rng.uniform(10, 35)):
            if self.rng.random() < 0.3:
                self.kill_squashd()
            else:
                self.kill_fuse()

    def later(self, delay, fn):
        def go():
            if not self.stop.wait(delay):
                fn()
        t = threading.Thread(target=go, daemon=True)
        t.start()
        self.threads.append(t)

    # ------------------------------------------------------------ watchers
    def watch_file(self, path, job, timeout):
        deadline = time.time() + timeout
        while time.time() < deadline and not self.stop.is_set():
            if Path(path).exists():
                return True
            if job.done:
                return False
            time.sleep(0.05)
        return False

    def scancel(self, job, note):
        p = self.slurm("scancel", job.key)
        job.note = note + ("" if p.returncode == 0 else f" (scancel: {p.stderr.strip()[:200]})")

    def spawn(self, fn, *args):
        t = threading.Thread(target=fn, args=args, daemon=True)
        t.start()
        self.threads.append(t)

    def w_scancel_prolog(self, job):
        # Released just now: cancel while the prolog (squashd's mount) runs.
        time.sleep(self.rng.uniform(0.0, 1.5))
        with self.lock:
            st = job.state
        self.scancel(job, f"scancel while {st}")

    def w_scancel_run(self, job):
        if self.watch_file(job.dir / "ready", job, 300):
            time.sleep(self.rng.uniform(0, 2))
            self.scancel(job, "scancel while running")

    def w_scancel_epilog(self, job):
        if self.watch_file(job.dir / "done", job, 300):
            time.sleep(self.rng.uniform(0, 0.3))
            with self.lock:
                st = job.state
            self.scancel(job, f"scancel after the script ended ({st})")

    def w_requeue(self, job):
        if self.watch_file(job.dir / "ready", job, 300):
            time.sleep(self.rng.uniform(0, 1))
            p = self.slurm("scontrol", "requeue", job.key)
            job.requeued = p.returncode == 0
            job.note = "requeued while running" if job.requeued else f"requeue failed: {p.stderr.strip()[:200]}"

    # ------------------------------------------------------------ waves
    def pick_image(self, user):
        """An image of the shared pool for user: own FUSE image or a kernel one."""
        if self.rng.random() < 0.3:
            return self.rng.choice(self.kernel_pool) + (True,)
        return self.rng.choice(self.user_pool[user]) + (False,)

    CAT = 'cat "$SQUASH_MOUNT/hello.txt" || exit 3\n'

    def mixed_wave(self, size):
        """size jobs of the mixed scenarios, submitted at once."""
        weights = [("completed", 30), ("srun-steps", 10), ("kernel", 10), ("exit1", 7),
                   ("deleted-image", 4), ("scancel-prolog", 8), ("scancel-run", 8),
                   ("scancel-epilog", 7), ("timeout", 4), ("requeue", 6)]
        names = [n for n, w in weights for _ in range(w)]
        submitted = []
        for _ in range(size):
            sc = self.rng.choice(names)
            user = self.rng.choice(USERS)
            img, text, kernel = self.pick_image(user)
            if sc == "kernel":
                img, text = self.rng.choice(self.kernel_pool)
                kernel = True
            if sc == "deleted-image":
                img, text = self.new_image(user, "del", kernel=kernel)
            short = self.rng.uniform(0.2, 3)
            ready = 'touch "$PWD/ready"\n'
            done = 'touch "$PWD/done"\n'
            args = []
            held = False
            body = {
                "completed": self.CAT + f"sleep {short:.1f}\n",
                "kernel": self.CAT + f"sleep {short:.1f}\nsrun cat \"$SQUASH_MOUNT/hello.txt\" || exit 4\n",
                "srun-steps": self.CAT + 'srun cat "$SQUASH_MOUNT/hello.txt" || exit 4\n'
                              f'sleep {short:.1f}\nsrun -n2 bash -c \'cat "$SQUASH_MOUNT/hello.txt" >/dev/null\' || exit 5\n',
                "exit1": self.CAT + "exit 1\n",
                "deleted-image": self.CAT,
                "scancel-prolog": self.CAT + "sleep 20\n",
                "scancel-run": self.CAT + ready + "sleep 60\n",
                "scancel-epilog": self.CAT + f"sleep {short:.1f}\n" + done,
                "timeout": self.CAT + "sleep 600\n",
                "requeue": self.CAT + 'if [ "${SLURM_RESTART_COUNT:-0}" = 0 ]; then touch "$PWD/ready"; sleep 60; fi\n'
                           'srun cat "$SQUASH_MOUNT/hello.txt" || exit 4\n',
            }[sc]
            if sc == "timeout":
                args = ["--time=0:02"]
            if sc == "requeue":
                args = ["--requeue"]
            if sc == "srun-steps":
                args = ["-n2"]
            if sc in ("deleted-image", "scancel-prolog"):
                held = True
            jobs = self.sbatch(sc, user, img, kernel, text, body, args, held=held)
            if not jobs:
                continue
            job = jobs[0]
            if sc == "deleted-image":
                os.unlink(img)
                job.note = "image deleted after submit"
                self.release([job])
            elif sc == "scancel-prolog":
                self.release([job])
                self.spawn(self.w_scancel_prolog, job)
            elif sc == "scancel-run":
                self.spawn(self.w_scancel_run, job)
            elif sc == "scancel-epilog":
                self.spawn(self.w_scancel_epilog, job)
            elif sc == "requeue":
                self.spawn(self.w_requeue, job)
            submitted.append(job)
        return submitted

    def array_wave(self, n):
        user = self.rng.choice(USERS)
        img, text, kernel = self.pick_image(user)
        body = self.CAT + f"sleep $(( RANDOM % 3 ))\n"
        jobs = self.sbatch("array-100", user, img, kernel, text, body, array=f"0-{n - 1}")
        self.event("wave", f"array of {n} on {img} ({'kernel' if kernel else 'FUSE'})")
        return jobs

    def burst_one(self, n):
        user = self.rng.choice(USERS)
        kernel = self.rng.random() < 0.4
        img, text = self.new_image(user, "burst", kernel=kernel)
        body = self.CAT + 'sleep 2\nsrun cat "$SQUASH_MOUNT/hello.txt" || exit 4\n'
        jobs = []
        for _ in range(n):
            jobs += self.sbatch("burst-128-one-image", user, img, kernel, text, body, held=True)
        self.event("wave", f"releasing {len(jobs)} held jobs on one image {img} "
                   f"({'kernel' if kernel else 'FUSE'})")
        self.chaos_during_burst()
        self.release(jobs)
        return jobs

    def burst_distinct(self, n):
        jobs = []
        for i in range(n):
            user = USERS[i % 2]
            kernel = i % 4 == 3
            img, text = self.new_image(user, "dist", kernel=kernel)
            jobs += self.sbatch("burst-64-distinct", user, img, kernel, text,
                                self.CAT + "sleep 2\n", held=True)
        self.event("wave", f"releasing {len(jobs)} held jobs on distinct images")
        self.chaos_during_burst()
        self.release(jobs)
        return jobs

    def chaos_during_burst(self):
        """Random moments inside the burst: a FUSE server, and sometimes squashd."""
        self.later(self.rng.uniform(1, 8), self.kill_fuse)
        if self.rng.random() < 0.5:
            self.later(self.rng.uniform(0.2, 4), self.kill_squashd)

    def plan(self, total):
        if total < 400:   # --quick
            unit = [("mixed", 40), ("array", 30), ("one", 32), ("distinct", 16), ("mixed", 40)]
        else:
            unit = [("mixed", 60), ("array", 100), ("one", 128), ("mixed", 60),
                    ("distinct", 64), ("mixed", 60)]
        plan, n = [], 0
        while n < total:
            for kind, k in unit:
                plan.append((kind, k))
                n += k
                if n >= total:
                    break
        return plan

    # ------------------------------------------------------------ main
    def setup_pools(self):
        self.user_pool = {u: [self.new_image(u, f"{u}-pool{i}") for i in range(5)] for u in USERS}
        self.kernel_pool = [self.new_image("root", f"trusted{i}", kernel=True) for i in range(3)]

    def drive(self):
        self.setup_pools()
        self.spawn(self.poller)
        chaos = threading.Thread(target=self.chaos, daemon=True)
        chaos.start()
        plan = self.plan(self.a.jobs)
        log(f"plan: {plan} (seed {self.a.seed})")
        for i, (kind, k) in enumerate(plan):
            if kind in ("one", "distinct"):
                # Room for the whole burst to start at once (200 CPUs).
                self.wait_active_below(40)
            else:
                self.wait_active_below(80)
            log(f"wave {i + 1}/{len(plan)}: {kind} {k} ({len(self.jobs)} jobs so far, "
                f"{self.active()} active)")
            if kind == "mixed":
                self.mixed_wave(k)
            elif kind == "array":
                self.array_wave(k)
            elif kind == "one":
                self.burst_one(k)
            else:
                self.burst_distinct(k)
        log(f"all {len(self.jobs)} jobs submitted; waiting for them to end")
        deadline = time.time() + 1200
        while self.active() and time.time() < deadline:
            time.sleep(2)
        self.stop.set()        # no more chaos from here on
        chaos.join(timeout=130)
        with self.chaos_lock:
            if not self.squashd_pid():
                run([self.a.cluster_sh, "squashd-start", self.dir], timeout=120)
        for j in self.jobs.values():
            if not j.done:
                j.state = "STUCK(" + j.state + ")"
        # Queued leftovers would hold mounts: cancel them (reported as stuck).
        left = self.slurm("squeue", "-h", "-o", "%i").stdout.split()
        if left:
            self.event("stuck", f"jobs still queued at the end: {left}")
            self.slurm("scancel", *left)
            time.sleep(15)
        self.poll_once()

    # ------------------------------------------------------------ leftovers
    def leftovers(self):
        prefix = str(self.dir) + "/"
        res = {}
        p = self.squashctl("list", "--json")
        try:
            res["registry entries"] = json.loads(p.stdout)["mounts"]
        except (ValueError, KeyError):
            res["registry entries"] = [f"squashctl list failed ({p.returncode}): {p.stderr.strip()}"]
        mounts = []
        for pid in ("self", "1"):
            with open(f"/proc/{pid}/mountinfo") as f:
                for line in f:
                    mp = line.split(" ")[4].replace("\\040", " ")
                    if mp.startswith(prefix):
                        mounts.append(f"/proc/{pid}: {mp} ({line.split(' - ')[1].split(' ')[0]})")
        res["mounts"] = mounts
        loops = []
        for bf in Path("/sys/block").glob("loop*/loop/backing_file"):
            try:
                t = bf.read_text().strip()
            except OSError:
                continue
            if t.startswith(prefix):
                loops.append(f"/dev/{bf.parent.parent.name} -> {t}")
        res["loop devices"] = loops
        res["FUSE servers"] = [f"pid {p} serving {img}" for p, img in self.fuse_servers().items()]
        return res

    def final_gc(self):
        time.sleep(5)
        first = self.leftovers()
        p = self.squashctl("gc", timeout=120)
        self.gc_output = (p.stdout + p.stderr).strip()
        deadline = time.time() + 30
        while True:
            left = self.leftovers()
            if not any(left.values()) or time.time() > deadline:
                break
            time.sleep(1)
        p = self.squashctl("health")
        self.health = f"exit {p.returncode}: {(p.stdout + p.stderr).strip()}"
        return first, left

    # ------------------------------------------------------------ report
    def message(self, j):
        try:
            text = j.out.read_text(errors="replace")
        except OSError:
            text = ""
        lines = [l for l in text.splitlines() if l.startswith("squash: ")]
        if lines:
            return lines[-1], text
        tail = [l for l in text.splitlines() if l.strip()][-2:]
        return ("(no squash: line) " + " | ".join(tail) if tail else "(empty output)"), text

    def fuse_killed_during(self, j):
        start = j.submitted
        end = (j.ended or time.time()) + 2
        return any(img == j.image and start <= t <= end for t, img, _ in self.fuse_kills)

    def squashd_down_during(self, j):
        start = j.submitted
        end = (j.ended or time.time()) + 2
        return any(t <= end and back >= start for t, back, _ in self.squashd_kills)

    def classify(self, j):
        """(ok, expected-cause or None, message). ok means nothing to report."""
        msg, text = self.message(j)
        st = j.state
        exp = EXPECTED_STATES[j.scenario]
        if st == "COMPLETED":
            if j.expect_text not in text or "squash: " in text:
                return False, None, "COMPLETED but wrong output: " + msg
            return True, None, msg
        if st in exp:
            cause = {"exit1": "job script exits 1", "deleted-image": "image deleted after submit",
                     "timeout": "time limit"}.get(j.scenario, "scancel")
            if j.scenario == "exit1" and "squash: " in text:
                cause = None
            if j.scenario == "deleted-image" and "squash: " not in text:
                cause = None
            return cause is not None, cause, msg
        if self.fuse_killed_during(j):
            return True, "its FUSE server was SIGKILLed", msg
        if j.scenario.startswith("scancel") and st == "CANCELLED":
            return True, "scancel", msg
        return False, None, msg

    def latencies(self):
        try:
            logtext = (self.dir / "log" / "squashd.log").read_text(errors="replace")
        except OSError:
            logtext = ""
        rx = re.compile(r"(\S+) from uid (\d+) pid (-?\d+): (.+?) in (\d+) ms")
        per = collections.defaultdict(list)
        for m in rx.finditer(logtext):
            per[m.group(1)].append(int(m.group(5)))
            per["(all)"].append(int(m.group(5)))
        return per, logtext

    @staticmethod
    def pct(vals, q):
        if not vals:
            return None
        s = sorted(vals)
        return s[min(len(s) - 1, max(0, int(round(q / 100 * len(s) + 0.5)) - 1))]

    def report(self, first_left, left, elapsed):
        jobs = list(self.jobs.values())
        by_state = collections.Counter(j.state for j in jobs)
        by_sc = collections.defaultdict(collections.Counter)
        for j in jobs:
            by_sc[j.scenario][j.state] += 1
        states = sorted(by_state, key=lambda s: -by_state[s])
        expected_groups = collections.defaultdict(list)
        unexpected = []
        for j in sorted(jobs, key=lambda j: j.submitted):
            ok, cause, msg = self.classify(j)
            if j.state == "COMPLETED" and ok:
                continue
            if ok:
                expected_groups[(cause, j.state, self.norm(msg))].append(j)
            else:
                unexpected.append((j, msg))
        per, logtext = self.latencies()
        out = []
        w = out.append
        w(f"# slurm-squash soak report\n")
        w(f"- started {time.strftime('%Y-%m-%d %H:%M:%S', time.localtime(self.t0))}, "
          f"took {elapsed / 60:.1f} min; seed {self.a.seed}; instance {self.dir}")
        w(f"- plugin retry={self.a.retry} s, squashd gc_interval={self.a.gc_interval} s, "
          f"node CPUs 200 (config_overrides), machine: {os.cpu_count()} cores")
        w(f"- jobs: {len(jobs)}; squashd SIGKILLed and restarted {len(self.squashd_kills)} times "
          f"(downtime {', '.join(f'{d:.1f}' for _, _, d in self.squashd_kills) or '-'} s); "
          f"FUSE servers SIGKILLed: {len(self.fuse_kills)}")
        n_unexp = len(unexpected)
        n_left = sum(len(v) for v in left.values())
        goal = n_unexp == 0 and n_left == 0
        w(f"- **goal (0 leftovers, 0 jobs failed by the node's own fault): "
          f"{'MET' if goal else 'NOT MET'}** — {n_unexp} unexpected outcome(s), {n_left} leftover(s)\n")

        w("## Jobs per final state\n")
        w("| state | jobs |\n|---|---|")
        for s in states:
            w(f"| {s} | {by_state[s]} |")
        w("\n## Jobs per scenario\n")
        w("| scenario | jobs | " + " | ".join(states) + " |")
        w("|---|---|" + "---|" * len(states))
        for sc in EXPECTED_STATES:
            if sc in by_sc:
                c = by_sc[sc]
                w(f"| {sc} | {sum(c.values())} | " + " | ".join(str(c.get(s, 0) or "") for s in states) + " |")

        w("\n## Jobs that did not complete, expected (the scenario made them fail)\n")
        w("| cause | state | jobs | message (normalised) | example job ids |\n|---|---|---|---|---|")
        for (cause, st, msg), js in sorted(expected_groups.items(), key=lambda kv: -len(kv[1])):
            ids = ", ".join(j.key for j in js[:6]) + (" ..." if len(js) > 6 else "")
            w(f"| {cause} | {st} | {len(js)} | `{msg}` | {ids} |")

        w(f"\n## NOT expected (the node's own fault, or wrong output): {n_unexp}\n")
        if unexpected:
            w("| job | scenario | user | mount | state | reason | squashd down during job | message |")
            w("|---|---|---|---|---|---|---|---|")
            for j, msg in unexpected:
                w(f"| {j.key} | {j.scenario} | {j.user} | {'kernel' if j.kernel else 'FUSE'} | {j.state} "
                  f"| {j.reason} | {'yes' if self.squashd_down_during(j) else 'no'} | `{msg}` |")
            w("\nImages and notes of those jobs:\n")
            for j, msg in unexpected[:50]:
                w(f"- {j.key}: image {j.image}; states seen {'>'.join(j.states_seen)}; {j.note}")

        w("\n## Leftovers after all jobs ended and a final `squashctl gc`\n")
        w(f"`squashctl gc` said: `{self.gc_output or '(nothing)'}`; `squashctl health`: `{self.health}`\n")
        w("| kind | before gc | after gc (+30 s) |\n|---|---|---|")
        for k in ("mounts", "loop devices", "FUSE servers", "registry entries"):
            w(f"| {k} | {len(first_left.get(k, []))} | {len(left.get(k, []))} |")
        for k, v in left.items():
            for item in v[:20]:
                w(f"- {k}: `{json.dumps(item) if not isinstance(item, str) else item}`")

        w("\n## squashd answer times (its --debug log, every request)\n")
        w("| request | count | p50 ms | p99 ms | max ms |\n|---|---|---|---|---|")
        for op in sorted(per, key=lambda o: (o != "(all)", o)):
            v = per[op]
            w(f"| {op} | {len(v)} | {self.pct(v, 50)} | {self.pct(v, 99)} | {max(v)} |")
        statuses = collections.Counter(m.group(1) for m in re.finditer(r": (\S+(?: \S+)?) in \d+ ms", logtext))
        w("\nAnswer statuses: " + ", ".join(f"{k} {v}" for k, v in statuses.most_common()))

        warn = [l for l in logtext.splitlines()
                if re.search(r"\b(error|warning|killing|did not exit|dead|exited)\b", l, re.I)
                and " ms" not in l[-12:]]
        kinds = collections.Counter(self.norm(re.sub(r"^\S+ \S+ ", "", l))[:140] for l in warn)
        w(f"\n## squashd warnings and errors ({len(warn)} lines, grouped)\n")
        for k, v in kinds.most_common(25):
            w(f"- {v} x `{k}`")
        if self.node_problems:
            w("\n## Node state problems\n")
            for t, st in self.node_problems[:20]:
                w(f"- {time.strftime('%H:%M:%S', time.localtime(t))}: {st}")
        other = [e for e in self.events if e[1] in ("sbatch-refused", "release-failed", "stuck")]
        if other:
            w("\n## Driver problems\n")
            for t, k, d in other[:30]:
                w(f"- {time.strftime('%H:%M:%S', time.localtime(t))} {k}: {d}")
        w("\n## Chaos timeline\n")
        for t, k, d in self.events:
            if k == "chaos":
                w(f"- +{t - self.t0:.0f} s: {d}")
        return "\n".join(out) + "\n", goal

    def norm(self, msg):
        msg = re.sub(r"\b(job|JOB) \d+\b", r"\1 N", msg)
        msg = re.sub(r"soak image \S+", "soak image X", msg)
        msg = msg.replace(f"node {self.node} ", "node H ").replace(f"ON {self.node} ", "ON H ")
        msg = msg.replace(f"slurmstepd-{self.node}:", "slurmstepd-H:").replace(f"error: {self.node}:", "error: H:")
        msg = re.sub(r"pid \d+", "pid N", msg)
        msg = re.sub(r"/tmp/sqsoak\.\w+/work/[^ :]+/", "DIR/work/.../", msg)
        msg = re.sub(r"/tmp/sqsoak\.\w+/", "DIR/", msg)
        msg = re.sub(r"\d+(-\d+)?\.sqfs", "N.sqfs", msg)
        msg = re.sub(r"\(at [0-9T:-]+\)", "(at T)", msg)
        msg = re.sub(r"\d{4}-\d\d-\d\dT[\d:.]+", "T", msg)
        return msg.replace("|", "\\|")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--dir", required=True)
    ap.add_argument("--jobs", type=int, default=1000)
    ap.add_argument("--report", default="soak-report.md")
    ap.add_argument("--cluster-sh", required=True)
    ap.add_argument("--build", required=True)
    ap.add_argument("--retry", default="5")
    ap.add_argument("--gc-interval", default="10")
    ap.add_argument("--seed", type=int, default=int(time.time()))
    a = ap.parse_args()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    s = Soak(a)
    t0 = time.time()
    try:
        s.drive()
    finally:
        s.stop.set()
    first, left = s.final_gc()
    text, goal = s.report(first, left, time.time() - t0)
    Path(a.report).write_text(text)
    print(text)
    log(f"report written to {a.report}")
    return 0 if goal else 1


if __name__ == "__main__":
    sys.exit(main())
