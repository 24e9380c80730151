"""Integration test fixtures: throwaway clusters (tests/cluster/cluster.sh),
helpers to build images and run jobs as the test users, and a per-test check
that nothing is left behind.

Two session fixtures, each started on first use:
  cluster    one node, the machine itself (most tests);
  cluster3   three nodes n1..n3, each in its own UTS + mount namespace with
             its own slurmd and squashd (cluster.nodes, cluster.node("n2")).
A test gets the leak check of every cluster it uses.

Environment:
  SQUASH_BUILD_DIR   build directory holding daemon/squashd, daemon/squashctl,
                     spank/.libs/spank_squash.so, tests/tools/squash_rawclient
                     (default: <repo>/build)
  SQUASH_KEEP_CLUSTER=1  keep the scratch directory after the session
  SQUASH_TEST_DEBUG=1    print what a test left at first look, even when it
                         goes away within the grace period
"""

import contextlib
import ctypes
import errno
import json
import os
import pwd
import grp
import re
import shutil
import signal
import subprocess
import tempfile
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
BUILD = Path(os.environ.get("SQUASH_BUILD_DIR", REPO / "build")).resolve()
CLUSTER_SH = REPO / "tests" / "cluster" / "cluster.sh"

SQUASHD = BUILD / "daemon" / "squashd"
SQUASHCTL = BUILD / "daemon" / "squashctl"
PLUGIN = BUILD / "spank" / ".libs" / "spank_squash.so"
RAWCLIENT = BUILD / "tests" / "tools" / "squash_rawclient"


def package_version():
    """configure's PACKAGE_VERSION (the build's config.h): the one
    definition of the version everything shows (NEWS.md)."""
    text = (BUILD / "config.h").read_text()
    return re.search(r'^#define PACKAGE_VERSION "([^"]+)"$', text, re.M).group(1)

USER1 = "squser1"
USER2 = "squser2"
SHARE_GROUP = "sqshare"

TERMINAL_STATES = {
    "COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "PREEMPTED",
    "BOOT_FAIL", "DEADLINE", "OUT_OF_MEMORY",
}
JOB_TIMEOUT = 90
SQUASH_FSTYPES = ("squashfs", "fuse.squashfuse", "fuse.squashfuse_ll", "fuse")
# What squashd runs for users' images (fuse_reader in squashd.conf).
FUSE_SERVER_NAMES = ("squash-reader", "squashfuse_ll")


# ------------------------------------------------------ the release matrix

def pytest_configure(config):
    config.addinivalue_line(
        "markers",
        "host_release_only(why): runs on the host release only, left out in "
        "the roots of tests/matrix (SQUASH_MATRIX_SUITE set)")


def pytest_collection_modifyitems(config, items):
    """In a root of the release matrix, the tests marked host_release_only
    are deselected: what they check is squashd's own code and the
    kernel's, the same whatever Slurm, libfuse and squashfuse the root
    has (or, for one, too slow for the matrix); the host runs them, and
    under the sanitizers. Each root's time counts against CI's."""
    if not os.environ.get("SQUASH_MATRIX_SUITE"):
        return
    kept, left_out = [], []
    for i in items:
        (left_out if i.get_closest_marker("host_release_only") else kept).append(i)
    if left_out:
        config.hook.pytest_deselected(items=left_out)
        items[:] = kept


# --------------------------------------------------------------- utilities

def run(cmd, check=True, timeout=120, **kw):
    """subprocess.run with text output captured; failures show the output.
    Bytes that are not UTF-8 read as U+FFFD: Slurm 26.05's `scontrol -o show
    job` prints the submit line's raw bytes."""
    kw.setdefault("stdout", subprocess.PIPE)
    kw.setdefault("stderr", subprocess.PIPE)
    kw.setdefault("errors", "replace")
    p = subprocess.run([str(c) for c in cmd], text=True, timeout=timeout, **kw)
    if check and p.returncode != 0:
        raise AssertionError(
            f"{' '.join(map(str, cmd))} exited {p.returncode}\n"
            f"stdout:\n{p.stdout}\nstderr:\n{p.stderr}")
    return p


def resume(pids):
    """SIGCONT to each stopped process a test stopped (gone ones skipped),
    so that what it held ends and cleanup can run."""
    for pid in pids:
        try:
            os.kill(pid, signal.SIGCONT)
        except ProcessLookupError:
            pass


_libc = ctypes.CDLL(None, use_errno=True)
_libc.ptrace.argtypes = [ctypes.c_long, ctypes.c_long, ctypes.c_void_p, ctypes.c_void_p]
_libc.ptrace.restype = ctypes.c_long
PTRACE_DETACH, PTRACE_SEIZE, PTRACE_INTERRUPT = 17, 0x4206, 0x4207
WALL = 0x40000000  # __WALL: wait for threads too


def ptrace(request, tid):
    """ptrace(request, tid, 0, 0); 0, or -errno."""
    r = _libc.ptrace(request, tid, None, None)
    return -ctypes.get_errno() if r < 0 else 0


@contextlib.contextmanager
def threads_stopped(tids):
    """Root's tracer stop (state t) of each thread tid for the block, as a
    user's debugger stops a thread of their own process: the process runs
    on. Detaches each at the end (the thread runs again), or reaps it when
    it died meanwhile (a traced thread stays a zombie until its tracer
    waits for it, and its process with it)."""
    held = []
    try:
        for tid in tids:
            r = ptrace(PTRACE_SEIZE, tid)
            if r == -errno.ESRCH:
                continue  # a worker that ended meanwhile (idle workers do)
            assert r == 0, f"PTRACE_SEIZE {tid}: {os.strerror(-r)}"
            held.append(tid)
            assert ptrace(PTRACE_INTERRUPT, tid) == 0, f"PTRACE_INTERRUPT {tid}"
            os.waitpid(tid, WALL)
        yield
    finally:
        for tid in held:
            if ptrace(PTRACE_DETACH, tid) == 0:
                continue
            for _ in range(100):
                try:
                    pid, _ = os.waitpid(tid, WALL | os.WNOHANG)
                except ChildProcessError:
                    break
                if pid:
                    continue
                time.sleep(0.05)


def thread_state(pid, tid):
    """Field 3 of /proc/pid/task/tid/stat ('' when gone)."""
    try:
        return Path(f"/proc/{pid}/task/{tid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return ""


def wait_until(pred, timeout=30.0, interval=0.1, what="condition"):
    """Polls pred() until it returns a truthy value; returns that value."""
    deadline = time.monotonic() + timeout
    while True:
        v = pred()
        if v:
            return v
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        time.sleep(interval)


def send_hup_and_wait(cluster, expect):
    """SIGHUP to the (one-node) cluster's squashd; waits until its log says
    expect and returns what it logged meanwhile."""
    offset = len(cluster.squashd_log())
    os.kill(cluster.squashd_pid(), signal.SIGHUP)
    wait_until(lambda: expect in cluster.squashd_log()[offset:], 10,
               what=f"squashd to log {expect!r}")
    return cluster.squashd_log()[offset:]


def setting(cluster, key):
    """A setting in force, as squashctl status shows it."""
    m = re.search(rf"^  {key} = (.*)$", cluster.squashctl("status").stdout, re.M)
    return m and m.group(1)


def mountinfo(pid="self"):
    """Mounts of a process's namespace as dicts: mount_point, fstype, source."""
    out = []
    with open(f"/proc/{pid}/mountinfo") as f:
        for line in f:
            left, right = line.rstrip("\n").split(" - ", 1)
            lf = left.split(" ")
            rf = right.split(" ")
            out.append({
                "mount_point": lf[4].replace("\\040", " "),
                "root": lf[3].replace("\\040", " "),
                "options": lf[5],
                "fstype": rf[0],
                "source": rf[1].replace("\\040", " ") if len(rf) > 1 else "",
            })
    return out


def private_roots(state_dir):
    """squashd's mount directories, each a private mount of its own while
    it runs (daemon/mount/private_roots.h): not strays."""
    return {str(Path(state_dir) / "mnt"), str(Path(state_dir) / "sessions")}


def is_squash_mount(m):
    return m["fstype"] in SQUASH_FSTYPES or m["fstype"].startswith("fuse.squashfuse")


def loop_backing_files():
    """{'/dev/loopN': backing file} for every attached loop device."""
    res = {}
    for bf in Path("/sys/block").glob("loop*/loop/backing_file"):
        try:
            res["/dev/" + bf.parent.parent.name] = bf.read_text().strip()
        except OSError:
            pass
    return res


def pids_named(name):
    res = []
    for p in Path("/proc").iterdir():
        if not p.name.isdigit():
            continue
        try:
            if (p / "comm").read_text().strip() == name:
                res.append(int(p.name))
        except OSError:
            pass
    return res


def proc_uids(pid):
    """Real, effective, saved and filesystem uid of a process."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("Uid:"):
            return [int(x) for x in line.split()[1:]]
    raise AssertionError(f"no Uid line for pid {pid}")


def uid_of(user):
    return pwd.getpwnam(user).pw_uid


def ns_inode(pid, kind):
    """Inode of a process's namespace of the given kind ("uts", "mnt"), or
    None when the process is gone."""
    try:
        return os.stat(f"/proc/{pid}/ns/{kind}").st_ino
    except OSError:
        return None


def pids_in_uts(inode):
    """{pid: comm} of the processes in the UTS namespace with that inode."""
    res = {}
    for p in Path("/proc").iterdir():
        if not p.name.isdigit():
            continue
        try:
            if os.stat(p / "ns" / "uts").st_ino == inode:
                res[int(p.name)] = (p / "comm").read_text().strip()
        except OSError:
            pass
    return res


# --------------------------------------------------------------- cluster

class Job:
    def __init__(self, cluster, job_id, out_path, submit):
        self.cluster = cluster
        self.id = job_id
        self.out_path = Path(out_path)
        self.submit = submit  # CompletedProcess of sbatch

    def info(self):
        return self.cluster.job_info(self.id)

    def wait(self, timeout=JOB_TIMEOUT):
        """Waits until the job is over, epilog included; returns its info."""
        def done():
            info = self.info()
            if info is None:
                return {"JobState": "GONE"}
            if info.get("JobState") in TERMINAL_STATES:
                return info
            # Slurm holds a job whose launch failed on the node (its own
            # plugins' faults, not ours): it would never end by itself.
            if info.get("Reason") == "launch_failed_requeued_held":
                raise AssertionError(f"job {self.id}: Slurm could not launch it and holds it "
                                     f"({info.get('Reason')}); see slurmd's log")
            return None
        self.final = wait_until(done, timeout, 0.2, f"job {self.id} to end")
        return self.final

    @property
    def state(self):
        return self.final.get("JobState")

    def output(self):
        try:
            return self.out_path.read_text()
        except FileNotFoundError:
            return ""


class Node:
    """One node of a test cluster: its slurmd and squashd and the namespaces
    they run in. On the one-node layout the node is the host itself; on a
    multi-node cluster it is a UTS + mount namespace kept by a holder
    process, and every command here runs inside it (nsenter)."""

    def __init__(self, cluster, name, namespaced):
        self.cluster = cluster
        self.name = name
        self.namespaced = namespaced
        d = cluster.dir
        if namespaced:
            # Paths as seen inside the node (its own tmpfs on node-run).
            self.socket = d / "node-run" / "squashd.sock"
            self.state_dir = d / "node-run" / "squashd"
            self._pid_file = d / "run" / f"squashd-{name}.pid"
            self._log_file = d / "log" / f"squashd-{name}.log"
        else:
            self.socket = d / "squashd.sock"
            self.state_dir = d / "squashd"
            self._pid_file = d / "run" / "squashd.pid"
            self._log_file = d / "log" / "squashd.log"

    def __repr__(self):
        return f"Node({self.name})"

    # ---- namespaces
    def holder_pid(self):
        """Pid of the process that keeps the node's namespaces (None on the
        host layout)."""
        if not self.namespaced:
            return None
        pid = int((self.cluster.dir / "run" / f"node-{self.name}.pid").read_text())
        assert Path(f"/proc/{pid}").exists(), f"node {self.name}: holder {pid} is gone"
        return pid

    @property
    def ns_pid(self):
        """A pid whose /proc entries show the node's mount namespace."""
        return self.holder_pid() if self.namespaced else "self"

    def uts_inode(self):
        return ns_inode(self.ns_pid, "uts")

    def wrap(self, cmd):
        """cmd, run inside the node."""
        cmd = [str(c) for c in cmd]
        if not self.namespaced:
            return cmd
        return ["nsenter", "-t", str(self.holder_pid()), "-m", "-u", "--", *cmd]

    def run(self, cmd, check=True, timeout=120, **kw):
        return run(self.wrap(cmd), check=check, timeout=timeout, **kw)

    def processes(self):
        """{pid: comm} of everything on the node: daemons, slurmstepd, job
        tasks, FUSE servers (a step's private mount namespace keeps the
        node's UTS namespace)."""
        if not self.namespaced:
            raise AssertionError("the host layout has no per-node process list")
        return pids_in_uts(self.uts_inode())

    # ---- squashd
    def squashd_pid(self):
        try:
            pid = int(self._pid_file.read_text())
        except (OSError, ValueError):
            return None
        return pid if Path(f"/proc/{pid}").exists() else None

    def squashd_log(self):
        try:
            return self._log_file.read_text()
        except OSError:
            return ""

    def slurmd_log(self):
        name = f"slurmd-{self.name}.log" if self.namespaced else "slurmd.log"
        try:
            return (self.cluster.dir / "log" / name).read_text(errors="replace")
        except OSError:
            return ""

    def squashd_stop(self):
        args = ["--node", self.name] if self.namespaced else []
        return self.cluster.cluster_sh("squashd-stop", *args)

    def squashd_start(self, check=True):
        args = ["--node", self.name] if self.namespaced else []
        return self.cluster.cluster_sh("squashd-start", *args, check=check)

    def squashctl(self, *args, check=True):
        return self.run([SQUASHCTL, "--socket", self.socket, "--munge-socket",
                         self.cluster.munge_socket, *args], check=check, timeout=60)

    def list_mounts(self):
        return json.loads(self.squashctl("list", "--json").stdout)["mounts"]

    def rawclient(self, *args, user=None, check=False, timeout=60):
        cmd = [RAWCLIENT, "--socket", self.socket, "--munge-socket",
               self.cluster.munge_socket, *args]
        if user:
            cmd = ["runuser", "-u", user, "--", self.cluster.for_user(user, RAWCLIENT), *cmd[1:]]
        return self.run(cmd, check=check, timeout=timeout)

    # ---- what the node holds
    def mountinfo(self):
        return mountinfo(self.ns_pid)

    def node_mounts(self):
        """squash mounts (kernel or FUSE) under squashd's state dir, in the
        node's mount namespace."""
        prefix = str(self.state_dir) + "/"
        return [m for m in self.mountinfo()
                if is_squash_mount(m) and m["mount_point"].startswith(prefix)]

    def stray_mounts(self):
        """Mounts that must not exist between tests, in the node's namespace:
        anything under the instance's directory but the node's own /run, and
        anything on /squash. (Another cluster's mounts may show up for a
        moment where the host propagates mounts to its slaves: not ours.)"""
        if not self.namespaced:
            return self.cluster.stray_mounts("self")
        prefix = str(self.cluster.dir) + "/"
        own = {str(self.cluster.dir / "node-run"), *private_roots(self.state_dir)}
        return [m for m in self.mountinfo()
                if (m["mount_point"].startswith(prefix) and m["mount_point"] not in own)
                or m["mount_point"] == "/squash" or m["mount_point"].startswith("/squash/")]

    def fuse_servers(self):
        """Pids of FUSE servers (squash-reader, squashfuse_ll) serving this node."""
        if not self.namespaced:
            return self.cluster.instance_fuse_servers()
        return sorted(p for p, comm in self.processes().items() if comm in FUSE_SERVER_NAMES)

    def stray_processes(self):
        """Processes on the node other than its holder, slurmd, squashd,
        squashd's spawner (daemon/process/spawner.c, while its squashd runs)
        and slurmstepd: job tasks or FUSE servers that outlived their job."""
        keep = {"slurmd", "squashd", "slurmstepd"}
        holder = self.holder_pid()
        procs = self.processes()

        def spawner_of_squashd(p):
            try:
                stat = Path(f"/proc/{p}/stat").read_text()
                ppid = int(stat[stat.rindex(")") + 2:].split()[1])
            except (OSError, ValueError, IndexError):
                return False
            return procs.get(ppid) == "squashd"
        return {p: c for p, c in procs.items()
                if p != holder and c not in keep
                and not (c == "squashd-spawner" and spawner_of_squashd(p))}

    # ---- Slurm's view
    def state(self):
        return run(["sinfo", "-h", "-N", "-n", self.name, "-o", "%T"],
                   env=self.cluster.env).stdout.strip()

    def info(self):
        return run(["scontrol", "-o", "show", "node", self.name],
                   env=self.cluster.env).stdout


class Cluster:
    """A running test cluster. The node-level helpers (squashctl,
    list_mounts, node_mounts, squashd_pid, squashd_log, rawclient, node)
    answer for the first node: on the one-node layout that is the host; on a
    multi-node cluster n1, where batch scripts run (use node("n2") or
    nodes for the others)."""

    def __init__(self, root, nodes=0):
        self.dir = Path(root)
        self.slurm_conf = self.dir / "slurm.conf"
        self.munge_socket = self.dir / "munge.sock"
        self.targets = self.dir / "targets"
        self.trusted = self.dir / "trusted"
        self.work = self.dir / "work"
        if nodes:
            self.nodes = [Node(self, f"n{k}", True) for k in range(1, nodes + 1)]
        else:
            host = subprocess.run(["hostname", "-s"], text=True,
                                  stdout=subprocess.PIPE).stdout.strip()
            self.nodes = [Node(self, host, False)]
        self.multinode = bool(nodes)
        self.node = self.nodes[0].name
        self.socket = self.nodes[0].socket
        self.state_dir = self.nodes[0].state_dir
        self.env = dict(os.environ, SLURM_CONF=str(self.slurm_conf))
        self._n = 0

    def node_named(self, name):
        for n in self.nodes:
            if n.name == name:
                return n
        raise KeyError(f"no node {name} in {[n.name for n in self.nodes]}")

    # ---- daemons
    def cluster_sh(self, *args, check=True):
        return run([CLUSTER_SH, *args, self.dir], check=check, timeout=180)

    @contextlib.contextmanager
    def plugin_retry(self, seconds):
        """The plugin's retry= (how long a job's requests retry an
        unreachable squashd) set to seconds in plugstack.conf for the
        block: every slurmstepd reads the file at its start. For tests of
        a squashd that stays down, which would otherwise wait out the
        cluster's retry (SQUASH_TEST_RETRY) once in the prolog and again
        in each step."""
        plugstack = self.dir / "plugstack.conf"
        original = plugstack.read_text()
        changed = re.sub(r"\bretry=\d+", f"retry={seconds}", original)
        assert changed != original or f"retry={seconds}" in original, original

        def replace(text):  # never an empty file for a slurmstepd starting
            tmp = plugstack.with_name(plugstack.name + ".new")
            tmp.write_text(text)
            tmp.chmod(0o644)
            os.replace(tmp, plugstack)
        replace(changed)
        try:
            yield
        finally:
            replace(original)

    def squashd_pid(self):
        return self.nodes[0].squashd_pid()

    def squashd_log(self):
        return self.nodes[0].squashd_log()

    # ---- users and files
    def workdir(self, user, name="w"):
        """A fresh directory owned by user, readable by all (0755)."""
        self._n += 1
        d = self.work / f"{name}-{self._n}"
        d.mkdir()
        pw = pwd.getpwnam(user)
        os.chown(d, pw.pw_uid, pw.pw_gid)
        d.chmod(0o755)
        return d

    def make_image(self, path, files, owner="root", group=None, mode=0o644):
        """Builds a squashfs image at path from {relative name: text}."""
        path = Path(path)
        src = Path(tempfile.mkdtemp(prefix="imgsrc.", dir=self.dir))
        src.chmod(0o755)  # the image's root directory
        try:
            for rel, text in files.items():
                f = src / rel
                f.parent.mkdir(mode=0o755, parents=True, exist_ok=True)
                f.write_text(text)
                f.chmod(0o755 if rel.endswith(".sh") else 0o644)
            run(["mksquashfs", src, path, "-noappend", "-quiet", "-no-progress",
                 "-all-root"])
        finally:
            shutil.rmtree(src)
        pw = pwd.getpwnam(owner)
        gid = grp.getgrnam(group).gr_gid if group else pw.pw_gid
        os.chown(path, pw.pw_uid, gid)
        path.chmod(mode)
        return path

    # ---- running things as users
    def for_user(self, user, path):
        """path, or a copy of it in the cluster's bin/ when user cannot run
        it where it is: a checkout under /root (mode 0700) must work as
        well as one anywhere else (cluster.sh does the same for the plugin
        and squashctl)."""
        p = Path(path)
        if not p.is_absolute() or not p.is_file():
            return path
        key = (user, str(p))
        cache = self.__dict__.setdefault("_for_user", {})
        if key not in cache:
            ok = run(["runuser", "-u", user, "--", "test", "-x", p], check=False).returncode == 0
            if ok:
                cache[key] = p
            else:
                d = self.dir / "bin"
                d.mkdir(mode=0o755, exist_ok=True)
                dest = d / p.name
                shutil.copy2(p, dest)
                dest.chmod(0o755)
                cache[key] = dest
        return cache[key]

    def as_user(self, user, cmd, check=False, timeout=120, cwd=None, **kw):
        cmd = [self.for_user(user, cmd[0]), *cmd[1:]]
        full = ["runuser", "-u", user, "--", "env", f"SLURM_CONF={self.slurm_conf}",
                *[str(c) for c in cmd]]
        return run(full, check=check, timeout=timeout, cwd=cwd, env=self.env, **kw)

    def write_script(self, d, body, name="job.sh"):
        script = Path(d) / name
        script.write_text("#!/bin/bash\n" + body)
        script.chmod(0o755)
        return script

    def sbatch(self, user, script, args=(), cwd=None, out=None):
        """Submits script as user. Returns a Job, or the failed
        CompletedProcess when sbatch refused it."""
        cwd = Path(cwd or Path(script).parent)
        out = out or cwd / f"{Path(script).stem}.out"
        p = self.as_user(user, ["sbatch", "--parsable", "-o", out, *args, script],
                         cwd=cwd, timeout=60)
        if p.returncode != 0:
            return p
        job_id = int(p.stdout.strip().split(";")[0])
        return Job(self, job_id, out, p)

    def run_job(self, user, body, args=(), cwd=None):
        """Submits a batch job and waits for it to end."""
        cwd = cwd or self.workdir(user, "job")
        job = self.sbatch(user, self.write_script(cwd, body), args, cwd=cwd)
        assert isinstance(job, Job), f"sbatch refused the job:\n{job.stderr}"
        job.wait()
        return job

    def sbatch_refuses(self, user, image_arg):
        """Submits a job with --squash-image=image_arg (one argument) as user,
        checks that sbatch refuses it and queues nothing, and returns
        sbatch's stderr."""
        d = self.workdir(user, "sub")
        p = self.sbatch(user, self.write_script(d, "echo should not run\n"),
                        [f"--squash-image={image_arg}"], cwd=d)
        if isinstance(p, Job):
            p.wait()
            raise AssertionError(f"sbatch accepted job {p.id}; its output:\n{p.output()}")
        assert p.returncode != 0
        assert self.squeue_ids() == []
        return p.stderr

    def refused_at_submit(self, user, image_arg, image_shown, reason=None):
        """sbatch_refuses, and the refusal reads "squash: IMAGE_SHOWN: REASON"
        (reason: a regex). Returns sbatch's stderr."""
        err = self.sbatch_refuses(user, image_arg)
        assert re.search(r"^(sbatch: error: )?squash: " + re.escape(f"{image_shown}: "),
                         err, re.M), err
        if reason:
            assert re.search(reason, err, re.I), err
        return err

    def job_info(self, job_id):
        p = run(["scontrol", "-o", "show", "job", job_id], check=False, env=self.env)
        if p.returncode != 0 or not p.stdout.strip():
            return None
        info = {}
        for tok in p.stdout.split():
            if "=" in tok:
                k, v = tok.split("=", 1)
                info.setdefault(k, v)
        return info

    def squeue_ids(self):
        # %A: a plain job id, also for array tasks (%i shows "12_[1-3]")
        p = run(["squeue", "-h", "-o", "%A"], env=self.env)
        return [int(x) for x in p.stdout.split()]

    def node_state(self):
        """The nodes' state ("idle", ...); on a multi-node cluster the states
        of all nodes, comma-separated, when they differ."""
        states = self.node_states()
        distinct = sorted(set(states.values()))
        if len(distinct) == 1:
            return distinct[0]
        return ",".join(f"{n}={s}" for n, s in sorted(states.items()))

    def node_states(self):
        """{node name: state} from sinfo."""
        out = run(["sinfo", "-h", "-N", "-o", "%N %T"], env=self.env).stdout
        return dict(line.split() for line in out.splitlines() if line.strip())

    def job_nodes(self, job_id):
        """Names of the nodes a job got (or asked for, while pending)."""
        info = self.job_info(job_id) or {}
        nodelist = info.get("NodeList") or ""
        if not nodelist or nodelist == "(null)":
            return []
        return run(["scontrol", "show", "hostnames", nodelist], env=self.env).stdout.split()

    # ---- squashd views
    def squashctl(self, *args, check=True):
        return self.nodes[0].squashctl(*args, check=check)

    def list_mounts(self):
        return self.nodes[0].list_mounts()

    def rawclient(self, *args, user=None, check=False, timeout=60):
        if self.multinode:
            return self.nodes[0].rawclient(*args, user=user, check=check, timeout=timeout)
        cmd = [RAWCLIENT, "--socket", self.socket, "--munge-socket",
               self.munge_socket, *args]
        if user:
            return self.as_user(user, cmd, check=check, timeout=timeout)
        return run(cmd, check=check, timeout=timeout)

    def node_mounts(self, pid=None):
        """squash mounts (kernel or FUSE) under squashd's state dir, as seen
        by pid (default: the first node's mount namespace; the host on the
        one-node layout)."""
        if pid is None:
            pid = self.nodes[0].ns_pid
        prefix = str(self.state_dir) + "/"
        return [m for m in mountinfo(pid)
                if is_squash_mount(m) and m["mount_point"].startswith(prefix)]

    def shared_mount(self, image, blocking_jobs):
        """squashd's one mount of image, checked to be held by exactly the
        given jobs."""
        mounts = [m for m in self.list_mounts() if m["image"] == str(image)]
        assert len(mounts) == 1, self.list_mounts()
        m = mounts[0]
        assert m["refcount"] == len(blocking_jobs), m
        assert sorted(m["jobs"]) == sorted(b.job.id for b in blocking_jobs), m
        return m

    def stray_mounts(self, pid="self"):
        """Mounts that must not exist between tests: anything under the
        instance's directory or on /squash in the host's namespace."""
        prefix = str(self.dir) + "/"
        own = private_roots(self.state_dir)
        return [m for m in mountinfo(pid)
                if (m["mount_point"].startswith(prefix) and m["mount_point"] not in own)
                or m["mount_point"] == "/squash" or m["mount_point"].startswith("/squash/")]

    def instance_fuse_servers(self):
        """squashfuse_ll processes serving an image of this instance (their
        image descriptor points below the instance's directory) or running
        on one of its nodes, so that other clusters on the same machine are
        not counted."""
        prefix = str(self.dir) + "/"
        node_uts = {n.uts_inode() for n in self.nodes if n.namespaced}
        res = []
        for pid in [p for name in FUSE_SERVER_NAMES for p in pids_named(name)]:
            try:
                fds = os.listdir(f"/proc/{pid}/fd")
                if (any(os.readlink(f"/proc/{pid}/fd/{fd}").startswith(prefix) for fd in fds)
                        or ns_inode(pid, "uts") in node_uts):
                    res.append(pid)
            except OSError:
                continue
        return res

    def instance_loops(self):
        prefix = str(self.dir) + "/"
        return {d: f for d, f in loop_backing_files().items()
                if f.startswith(prefix)}


# --------------------------------------------------------------- gates

class BlockingJob:
    """A batch job that signals it runs (writes its pid) and then waits for a
    go file, so tests can look at the node while the job holds its mounts."""

    def __init__(self, cluster, user, image_arg, after="", extra_args=(), before=""):
        self.cluster = cluster
        self.dir = cluster.workdir(user, "blk")
        self.ready = self.dir / "ready"
        self.go = self.dir / "go"
        body = f"""
{before}
echo "$$" > {self.ready}.tmp && mv {self.ready}.tmp {self.ready}
for i in $(seq 1 1200); do [ -e {self.go} ] && break; sleep 0.1; done
{after}
"""
        script = cluster.write_script(self.dir, body)
        self.job = cluster.sbatch(user, script, [f"--squash-image={image_arg}", *extra_args])
        assert isinstance(self.job, Job), f"sbatch refused the job:\n{self.job.stderr}"

    def wait_ready(self, timeout=60):
        def ready():
            if self.ready.exists():
                return True
            info = self.job.info()
            if info and info.get("JobState") in TERMINAL_STATES:
                raise AssertionError(
                    f"job {self.job.id} ended ({info.get('JobState')}) before it was ready:\n"
                    f"{self.job.output()}")
            return False
        wait_until(ready, timeout, 0.1, f"job {self.job.id} to start")
        self.pid = int(self.ready.read_text().strip())
        return self.pid

    def release(self):
        self.go.touch()
        return self.job.wait()


@contextlib.contextmanager
def blocking_jobs(cluster, *specs):
    """Starts one BlockingJob per (user, image_arg, after) and waits until all
    run; lets them all go on the way out, whatever happened."""
    jobs = []
    try:
        for user, image_arg, after in specs:
            jobs.append(BlockingJob(cluster, user, image_arg, after=after))
        for b in jobs:
            b.wait_ready()
        yield jobs
    finally:
        for b in jobs:
            b.go.touch()
        # A test that failed inside leaves its jobs ending: wait for them
        # here, so the failure is reported alone, not also as a leftover.
        for b in jobs:
            try:
                b.job.wait(timeout=60)
            except Exception:
                pass


# --------------------------------------------------------------- fixtures

def _require_build():
    missing = [str(p) for p in (SQUASHD, SQUASHCTL, PLUGIN) if not p.exists()]
    if missing:
        pytest.exit("not built: " + ", ".join(missing) +
                    f" (build into {BUILD} or set SQUASH_BUILD_DIR)", returncode=2)
    if not RAWCLIENT.exists():
        run(["make", "-C", BUILD / "tests", "tools/squash_rawclient"], timeout=300)


# Clusters with a job namespace plugin live here: each job gets a private
# /tmp, which would hide a cluster directory under /tmp from the jobs, and
# targets may not lie under /var or /srv (system directories).
JOB_NS_CLUSTER_PARENT = Path("/home/.squash-tests")


def slurm_release():
    """The installed Slurm as major*100+minor (22.05 -> 2205)."""
    v = run(["slurmd", "-V"]).stdout.split()[1]
    major, minor = v.split(".")[:2]
    return int(major) * 100 + int(minor)


def _session_cluster(request, nodes=0, job_ns=None, site=False, run_in_job=True, auth="munge"):
    """Starts a cluster (nodes=0: one node, the host; job_ns: a job
    namespace plugin, see SQUASH_TEST_JOB_NS in cluster.sh; site: cgroups
    and PrologFlags as sites set them, SQUASH_TEST_SITE, with RunInJob
    where Slurm has it unless not run_in_job; auth: munge or slurm,
    SQUASH_TEST_AUTH) for the session and stops it at the end."""
    if os.geteuid() != 0:
        pytest.exit("the integration tests must run as root", returncode=2)
    _require_build()
    parent = None
    if job_ns:
        JOB_NS_CLUSTER_PARENT.mkdir(mode=0o755, exist_ok=True)
        parent = JOB_NS_CLUSTER_PARENT
    root = tempfile.mkdtemp(prefix="sqtest.", dir=parent)
    os.chmod(root, 0o755)
    c = Cluster(root, nodes)
    c.job_ns = job_ns

    def stop():
        run([CLUSTER_SH, "stop", root], check=False, timeout=300)
        leftover = [m for m in mountinfo() if m["mount_point"].startswith(root + "/")]
        if os.environ.get("SQUASH_KEEP_CLUSTER") == "1" or leftover:
            print(f"\nkeeping {root}" + (f" (mounts left: {leftover})" if leftover else ""))
        else:
            shutil.rmtree(root, ignore_errors=True)
            if parent:
                try:
                    parent.rmdir()  # made here; another cluster's root may still be in it
                except OSError:
                    pass
    request.addfinalizer(stop)
    args = ["--nodes", str(nodes)] if nodes else []
    env = dict(os.environ, SQUASH_TEST_JOB_NS=job_ns or "", SQUASH_TEST_SITE="1" if site else "0",
               SQUASH_TEST_RUN_IN_JOB="1" if run_in_job else "0", SQUASH_TEST_AUTH=auth)
    if site and run_in_job:
        # Under RunInJob no SPANK epilog runs: squashd releases a job when
        # its extern step ends (core/job_end_watch.h). gc is kept out of
        # the way, so a job it would have to release is a leftover.
        env.setdefault("SQUASH_TEST_GC_INTERVAL", "3600")
    p = run([CLUSTER_SH, "start", *args, root], check=False, timeout=300, env=env)
    if p.returncode != 0:
        stop()
        pytest.exit(f"cluster did not start:\n{p.stdout}\n{p.stderr}", returncode=3)
    return c


@pytest.fixture(scope="session")
def cluster(request):
    """The one-node cluster most tests use, configured as sites run Slurm:
    cgroups, PrologFlags=Alloc,Contain and job_container/tmpfs or
    namespace/tmpfs (see cluster_site), without RunInJob, under which Slurm
    runs no SPANK prolog or epilog (cluster_site's tests have it)."""
    return _site_cluster(request, "tmpfs", run_in_job=False)


@pytest.fixture(scope="session")
def cluster3(request):
    """Three nodes n1..n3 (see tests/cluster/cluster.sh)."""
    return _session_cluster(request, nodes=3)


def job_ns_kinds():
    """The job namespace configurations this Slurm offers (cluster.sh's
    SQUASH_TEST_JOB_NS)."""
    rel = slurm_release()
    return (["tmpfs"] + (["tmpfs-entire"] if rel >= 2411 else []) +
            (["linux"] if rel >= 2511 else []))


def _plain_job_failure(c):
    """Why the cluster cannot run plain jobs (no image), from slurmd's log;
    None when two in a row complete."""
    d = c.workdir(USER1, "jobns-probe")
    script = c.write_script(d, "true\n")
    for _ in range(2):
        job = c.sbatch(USER1, script, ["--no-requeue"])
        if not isinstance(job, Job):
            return f"sbatch refused a plain job: {job.stderr.strip()}"
        try:
            job.wait(timeout=60)
        except AssertionError as e:
            job.final = {"JobState": f"not ended ({e})"}
        if job.state != "COMPLETED":
            run(["scancel", job.id], check=False, env=c.env)
            wait_until(lambda: not c.squeue_ids(), 60, 0.2, "the probe job to go")
            errors = [line for line in c.nodes[0].slurmd_log().splitlines()
                      if "error" in line and ("_ns" in line or "container" in line)]
            return f"a plain job ended {job.state}; slurmd: " + " | ".join(errors[-3:])
    return None


def _site_cluster(request, job_ns, run_in_job=True):
    """A site-like one-node cluster with job namespace kind job_ns. Plain
    jobs (no image) run first: where they fail, the tests error with
    Slurm's own message, telling a broken test cluster from a fault of
    ours."""
    c = _session_cluster(request, job_ns=job_ns, site=True, run_in_job=run_in_job)
    why = _plain_job_failure(c)
    if why:
        _cleanup(c)
        pytest.fail(f"the site-like test cluster ({job_ns}) cannot run plain jobs, "
                    f"without any image: {why}")
    return c


def _skip_before(release, what):
    """Skips the test where the installed Slurm predates release (2311)."""
    rel = slurm_release()
    if rel < release:
        pytest.skip(f"{what} is new in Slurm {release // 100}.{release % 100:02d}; "
                    f"this is {rel // 100}.{rel % 100:02d}")


@pytest.fixture(scope="module", params=job_ns_kinds())
def cluster_site(request):
    """One node configured as sites run Slurm: proctrack/cgroup,
    task/cgroup,task/affinity, PrologFlags=Contain (RunInJob from 24.05 on)
    and a job namespace plugin (job_container/tmpfs or namespace/tmpfs, with
    EntireStepInNS where Slurm has it): one cluster per namespace
    configuration, started for the module that uses it."""
    return _site_cluster(request, request.param)


@pytest.fixture(scope="module")
def cluster_userns(request):
    """One site-like node whose jobs get a user namespace of their own
    (namespace/linux with CLONE_NEWUSER, Slurm 25.11 on): started for the
    module that uses it."""
    _skip_before(2511, "namespace/linux")
    return _site_cluster(request, "linux-user")


@pytest.fixture(scope="module")
def cluster_auth_slurm(request):
    """One node on AuthType=auth/slurm with no munged (Slurm 23.11 on;
    cluster.sh's SQUASH_TEST_AUTH=slurm): started for the module that
    uses it."""
    _skip_before(2311, "auth/slurm")
    return _session_cluster(request, auth="slurm")


def _leftovers(c):
    problems = []
    for node in c.nodes:
        where = f" on {node.name}" if c.multinode else ""
        if node.squashd_pid():
            try:
                mounts = node.list_mounts()
            except AssertionError as e:
                mounts = []
                problems.append(f"squashctl list{where} failed: {e}")
            if mounts:
                problems.append(f"squashd{where} still lists mounts: {mounts}")
        if node.namespaced:
            ms = node.stray_mounts()
            if ms:
                problems.append(f"mounts left on {node.name}: {ms}")
            procs = node.stray_processes()
            if procs:
                problems.append(f"processes left on {node.name}: {procs}")
    for pid in ("self", "1"):
        ms = c.stray_mounts(pid)
        if ms:
            problems.append(f"mounts left in /proc/{pid}/mountinfo: {ms}")
    loops = c.instance_loops()
    if loops:
        problems.append(f"loop devices left: {loops}")
    fuse = c.instance_fuse_servers()
    if fuse:
        problems.append(f"FUSE servers left: {fuse}")
    return problems


def _cleanup(c):
    """Brings the nodes back to a clean state whatever a test left."""
    ids = c.squeue_ids()
    if ids:
        run(["scancel", *ids], check=False, env=c.env)
        wait_until(lambda: not c.squeue_ids(), 60, 0.2, "cancelled jobs to end")
    for node in c.nodes:
        if not node.squashd_pid():
            node.squashd_start(check=False)
        try:
            for m in node.list_mounts():
                for j in m.get("jobs", []):
                    node.squashctl("release", j, check=False)
                # A job's release drops its steps' own images too.
                for s in m.get("steps", []):
                    node.squashctl("release", s.split(".")[0], check=False)
                # A squash-shell session ends with its process.
                for pid in m.get("sessions", []):
                    run(["kill", "-KILL", pid], check=False)
        except AssertionError:
            pass
        if node.namespaced:
            for m in sorted(node.stray_mounts(), key=lambda m: -len(m["mount_point"])):
                node.run(["umount", "-l", m["mount_point"]], check=False)
            for pid in node.stray_processes():
                run(["kill", "-KILL", pid], check=False)
    for m in sorted(c.stray_mounts(), key=lambda m: -len(m["mount_point"])):
        run(["umount", "-l", m["mount_point"]], check=False)
    for dev in c.instance_loops():
        run(["losetup", "-d", dev], check=False)
    for pid in c.instance_fuse_servers():
        run(["kill", "-KILL", pid], check=False)
    for name, state in c.node_states().items():
        # "planned": idle, with a pending job the backfill scheduler has
        # placed there (Slurm 23.02+ shows it while a job is about to
        # start); nothing of a test's is left in it.
        if state not in ("idle", "mixed", "allocated", "planned"):
            run(["scontrol", "update", f"nodename={name}", "state=resume"],
                check=False, env=c.env)


def _check_cluster(c):
    """Problems a test left on cluster c (after a grace period for
    asynchronous teardown); cleans them up."""
    problems = []
    ids = c.squeue_ids()
    if ids:
        problems.append(f"jobs still queued or running: {ids}")
        _cleanup(c)
    # Teardown is asynchronous (epilog, lazy unmount, FUSE server exit):
    # give it a few seconds before calling anything a leftover.
    deadline = time.monotonic() + 10
    left = _leftovers(c)
    if left and os.environ.get("SQUASH_TEST_DEBUG"):
        print("\nleftovers at first look (may still go away):\n  " + "\n  ".join(left))
    while left and time.monotonic() < deadline:
        time.sleep(0.2)
        left = _leftovers(c)
    problems += left
    for name, state in sorted(c.node_states().items()):
        # "planned": idle, with a pending job the backfill scheduler has
        # placed there (Slurm 23.02+ shows it while a job is about to
        # start); nothing of a test's is left in it.
        if state not in ("idle", "mixed", "allocated", "planned"):
            where = f"node {name}" if c.multinode else "node"
            problems.append(f"{where} state is {state!r}, not idle")
    for node in c.nodes:
        if not node.squashd_pid():
            problems.append("squashd is not running" +
                            (f" on {node.name}" if c.multinode else ""))
    if problems:
        _cleanup(c)
    return problems


@pytest.fixture(autouse=True)
def no_leftovers(request):
    """After each test: no job, mount, loop device, FUSE server or (on a
    multi-node cluster) stray process is left on any node of the clusters the
    test used, no node is drained and every squashd runs. Cleans up (so later
    tests start clean) and fails the test's teardown when something was
    left. Tests that name no cluster get the one-node cluster's check."""
    names = [n for n in ("cluster", "cluster3", "cluster_site", "cluster_userns",
                         "cluster_auth_slurm")
             if n in request.fixturenames] or ["cluster"]
    clusters = [request.getfixturevalue(n) for n in names]
    yield
    problems = []
    for name, c in zip(names, clusters):
        prefix = f"{name}: " if len(clusters) > 1 else ""
        problems += [prefix + p for p in _check_cluster(c)]
    if problems:
        pytest.fail("left behind by this test:\n  " + "\n  ".join(problems), pytrace=False)
