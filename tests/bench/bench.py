#!/usr/bin/env python3
"""The slurm-squash benchmark driver (started by tests/bench/run.sh, which
builds its tools and venv first; run as root).

Part 1, workloads x modes. Workloads (tests/bench/workload.py): import of
the stack in a fresh python, stat of every file, md5sum of every file, a
large sequential read, and N processes importing the stack at once. Modes:

  local         the tree on local disk
  slowfs        the tree behind slowfs (a FUSE passthrough adding a delay to
                every metadata request: the parallel-filesystem stand-in)
  kernel:FMT    the image, kernel squashfs on a loop device
  fuse:FMT      the image, squashfuse_ll
  reader:FMT    the image, squash-reader (the project's own FUSE reader,
                daemon/reader/, from SQUASH_BUILD_DIR)
  reader-uring:FMT  the same squash-reader over FUSE io_uring: the fuse
                module's enable_uring is set to Y for each of its mounts and
                back when it is unmounted (the reader mode then mounts with
                N); needs a reader built against a libfuse >= 3.18 that was
                itself built with liburing (Debian sid's 3.18.3 is not: it
                falls back to /dev/fuse) and a kernel with CONFIG_FUSE_IO_URING
  slow-kernel:FMT, slow-fuse:FMT, slow-reader:FMT  the same three with the
                image file itself behind slowfs (every read request delayed
                too: --read-delay-us, --bw-mib), as a site keeps images on
                Lustre or GPFS; the run's slowfs requests and bytes recorded
  kernel-VARIANT:FMT, slow-kernel-VARIANT:FMT  kernel:FMT, slow-kernel:FMT
                with the loop device attached (LOOP_CONFIGURE) with other
                settings: VARIANT joins 'dio' (direct I/O to the image file),
                'raN' (the loop device's read_ahead_kb), 'bsN' (its logical
                block size), 'seq' (posix_fadvise SEQUENTIAL on the image's
                descriptor) with '-', e.g. slow-kernel-dio-ra1024
  kernel-profiled:FMT, fuse-profiled:FMT, reader-profiled:FMT and their
                slow- forms  the same over an image of FMT with a start
                profile: contrib/squash-pack --profile, recording the import
                workload, packs the files it read first and the record in
                /.squash/start-profile, which squash-reader reads ahead as
                soon as it opens the image (made once per tree and format,
                with the plain image's compression, level and block size;
                the profile's files and bytes recorded with every run)
  reader-learned:FMT, slow-reader-learned:FMT  squash-reader over the plain
                image with --profile-cache (squashd.conf's start_profile_cache):
                the first cold run learns the start's profile, the later ones
                prefetch and walk it (learned_profile_files in each row)
  job-kernel    the product path: a job (srun --squash-image) on a throwaway
  job-fuse      cluster; a trusted image (kernel mount by squashd) or a
                user's image (squashfuse_ll as the user), seen through the
                step's bind mount at /squash/stack

Every measurement starts cold (page cache dropped, the mount fresh) and is
repeated at once warm. Modes run interleaved, their order rotated in every
repetition; the report gives the median and the minimum.

Part 2, the product's own cost: srun with and without an image (first mount
and shared mount, kernel and FUSE) as the user sees it; allocation to task
start, prolog and epilog from slurmd's and slurmctld's debug logs, also on a
cluster without the plugin; squashd's answer time to N simultaneous mount
requests (same image, distinct images; kernel, FUSE); memory of squashd and
of the FUSE servers with many images mounted.

Output: report.md, results.csv (every raw number), meta.json, *.png.
"""

import argparse
import contextlib
import csv
import datetime as dt
import errno
import fcntl
import hashlib
import json
import os
import platform
import pwd
import re
import shutil
import signal
import statistics
import struct
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent
CLUSTER_SH = REPO / "tests" / "cluster" / "cluster.sh"
PYTHON = "/usr/bin/python3"
USER = "squser1"

FULL_IMPORTS = "numpy,scipy.stats,pandas,matplotlib.pyplot,sympy,PIL.Image"
QUICK_IMPORTS = "numpy,sympy"


def log(msg):
    print(f"bench: {msg}", file=sys.stderr, flush=True)


def run(cmd, check=True, timeout=600, quiet=False, **kw):
    kw.setdefault("stdout", subprocess.PIPE)
    kw.setdefault("stderr", subprocess.PIPE)
    p = subprocess.run([str(c) for c in cmd], text=True, timeout=timeout, **kw)
    if check and p.returncode != 0:
        raise RuntimeError(f"{' '.join(map(str, cmd))} exited {p.returncode}\n"
                           f"{(p.stdout or '')[-2000:]}\n{(p.stderr or '')[-2000:]}")
    return p


def drop_caches():
    os.sync()
    with open("/proc/sys/vm/drop_caches", "w") as f:
        f.write("3\n")


def mountpoints():
    res = []
    with open("/proc/self/mountinfo") as f:
        for line in f:
            left, right = line.split(" - ", 1)
            res.append((left.split()[4].replace("\\040", " "), right.split()[0]))
    return res


def is_mounted(path):
    return any(mp == str(path) for mp, _ in mountpoints())


def wait_for(pred, timeout, what, interval=0.02):
    deadline = time.monotonic() + timeout
    while True:
        v = pred()
        if v:
            return v
        if time.monotonic() > deadline:
            raise RuntimeError(f"timed out after {timeout} s waiting for {what}")
        time.sleep(interval)


def pct(values, p):
    """p-th percentile, linear interpolation (p in 0..100)."""
    v = sorted(values)
    if not v:
        return float("nan")
    k = (len(v) - 1) * p / 100.0
    lo = int(k)
    hi = min(lo + 1, len(v) - 1)
    return v[lo] + (v[hi] - v[lo]) * (k - lo)


def pss_kb(pid):
    """(Rss, Pss) in KiB of a process, from smaps_rollup."""
    rss = pss = 0
    try:
        with open(f"/proc/{pid}/smaps_rollup") as f:
            for line in f:
                if line.startswith("Rss:"):
                    rss = int(line.split()[1])
                elif line.startswith("Pss:"):
                    pss = int(line.split()[1])
    except OSError:
        pass
    return rss, pss


# ====================================================================== setup

class Formats:
    """'gzip:128K' -> name 'gzip-128k', mksquashfs arguments; an optional
    third part is the compression level: 'zstd:128K:9' -> 'zstd9-128k'.
    'none:128K' stores everything uncompressed, to tell what decompressing
    costs from what the rest of a reader's path costs."""

    def __init__(self, spec):
        comp, _, rest = spec.partition(":")
        bs, _, level = rest.partition(":")
        bs = bs or "128K"
        self.spec = spec
        self.comp = comp
        self.bs = bs
        self.level = level
        self.name = f"{comp}{level}-{bs.lower()}"
        if comp == "none":
            self.args = ["-noI", "-noId", "-noD", "-noF", "-noX", "-b", bs]
        else:
            self.args = ["-comp", comp, "-b", bs] + (["-Xcompression-level", level] if level else [])


class Stack:
    """The pinned tree (site-packages + big/data.bin) and its images."""

    def __init__(self, cache, kind, bigfile_mib):
        self.cache = cache
        self.kind = kind
        self.req = HERE / f"stack-{kind}.txt"
        self.bigfile_mib = bigfile_mib
        self.tree = cache / "trees" / f"{kind}-{bigfile_mib}m"
        self.imports = FULL_IMPORTS if kind == "full" else QUICK_IMPORTS
        self.images = {}
        self.image_info = {}
        self.profiled = {}       # the same with a start profile (squash-pack --profile)
        self.profiled_info = {}

    def ensure_tree(self):
        pins = self.req.read_text()
        stamp = self.tree / ".stamp"
        want = hashlib.sha256(f"{pins}\n{self.bigfile_mib}".encode()).hexdigest()
        if stamp.exists() and stamp.read_text() == want:
            return
        log(f"building the tree {self.tree} (pip install --target, {self.bigfile_mib} MiB file)")
        if self.tree.exists():
            shutil.rmtree(self.tree)
        site = self.tree / "site-packages"
        site.mkdir(parents=True)
        env = dict(os.environ)
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        run([self.cache / "venv" / "bin" / "pip", "install", "--quiet", "--disable-pip-version-check",
             "--no-index", "--find-links", self.cache / "wheels", "--no-deps",
             "--only-binary=:all:", "--target", site, "-r", self.req], timeout=1800, env=env)
        # pip compiles the .pyc files with the venv's python, which is the
        # system python3 the workloads run (run.sh makes the venv from it).
        self._make_bigfile(site, self.tree / "big" / "data.bin")
        for root, dirs, files in os.walk(self.tree):
            for d in dirs:
                os.chmod(os.path.join(root, d), 0o755)
            for f in files:
                p = os.path.join(root, f)
                os.chmod(p, 0o755 if os.access(p, os.X_OK) else 0o644)
        os.chmod(self.tree, 0o755)
        stamp.write_text(want)
        for img in (self.cache / "images").glob(f"{self.tree.name}.*.sqfs"):
            img.unlink()

    def _make_bigfile(self, site, out):
        """A large file of realistic content: the stack's own files (shared
        libraries, bytecode, sources) concatenated in a fixed order until the
        size is reached. Compresses like software, not like zeros or noise."""
        out.parent.mkdir(parents=True, exist_ok=True)
        files = sorted(str(p) for p in site.rglob("*") if p.is_file())
        want = self.bigfile_mib << 20
        done = 0
        with open(out, "wb") as o:
            while done < want:
                for p in files:
                    data = Path(p).read_bytes()[: want - done]
                    o.write(data)
                    done += len(data)
                    if done >= want:
                        break

    def ensure_image(self, fmt):
        imgdir = self.cache / "images"
        imgdir.mkdir(exist_ok=True)
        os.chmod(imgdir, 0o755)
        img = imgdir / f"{self.tree.name}.{fmt.name}.sqfs"
        info = imgdir / f"{self.tree.name}.{fmt.name}.json"
        if not (img.exists() and info.exists()):
            log(f"making {img.name} (mksquashfs {' '.join(fmt.args)})")
            t0 = time.perf_counter()
            run(["mksquashfs", self.tree, img, *fmt.args, "-noappend", "-no-progress",
                 "-quiet", "-all-root"], timeout=3600)
            secs = time.perf_counter() - t0
            os.chmod(img, 0o644)
            info.write_text(json.dumps({"build_seconds": round(secs, 1),
                                        "bytes": img.stat().st_size}))
        self.images[fmt.name] = img
        self.image_info[fmt.name] = json.loads(info.read_text())
        return img

    # mksquashfs's own default levels: what the plain image of a format
    # without one was packed with.
    MKSQUASHFS_LEVEL = {"zstd": "15", "gzip": "9"}

    def ensure_profiled_image(self, fmt, env, reader):
        """The tree packed by contrib/squash-pack --profile with the plain
        image's compression, level and block size (--no-meta --no-relocate):
        squash-pack mounts its first image with a recording squash-reader,
        runs the import workload there (workload.py, the same code and
        --imports the import workload runs), then packs again with the
        files the import read first (mksquashfs -sort) and the record in
        /.squash/start-profile. Only the order and the profile differ."""
        imgdir = self.cache / "images"
        img = imgdir / f"{self.tree.name}.{fmt.name}.profiled.sqfs"
        info = imgdir / f"{self.tree.name}.{fmt.name}.profiled.json"
        cmd = (f"{PYTHON} {HERE / 'workload.py'} import \"$SQUASH_PROFILE_ROOT\" --times 1 "
               f"--imports {self.imports}")
        # Made again for other imports or another squash-pack (its order is
        # what is measured), not for another checkout's workload.py.
        packer = hashlib.sha256((REPO / "contrib" / "squash-pack").read_bytes()).hexdigest()[:16]
        made = json.loads(info.read_text()) if img.exists() and info.exists() else {}
        if made.get("imports") != self.imports or made.get("squash_pack_sha256") != packer:
            level = fmt.level or self.MKSQUASHFS_LEVEL.get(fmt.comp, "")
            pack = [REPO / "contrib" / "squash-pack", "-q", "-f", "--no-meta", "--no-relocate",
                    "-c", fmt.comp, "-b", fmt.bs, *(["-l", level] if level else []),
                    "--profile", cmd, self.tree, img]
            log(f"making {img.name} (squash-pack -c {fmt.comp} -b {fmt.bs}"
                f"{' -l ' + level if level else ''} --profile: the import workload)")
            t0 = time.perf_counter()
            # Its temporary mount under CACHE/mnt: cleanup_only finds it.
            run(pack, timeout=7200, env=dict(env, SQUASH_READER=str(reader),
                                             TMPDIR=str(self.cache / "mnt")))
            secs = time.perf_counter() - t0
            os.chmod(img, 0o644)
            prof = run(["unsquashfs", "-cat", img, ".squash/start-profile"]).stdout
            lines = [l.split(" ", 2) for l in prof.splitlines()[1:] if l and not l.startswith("#")]
            info.write_text(json.dumps({
                "build_seconds": round(secs, 1), "bytes": img.stat().st_size,
                "profile_files": len(lines),
                "profile_bytes": sum(int(t) - int(f) for f, t, _ in lines),
                "profile_cmd": cmd, "imports": self.imports, "squash_pack_sha256": packer,
                "squash_pack": " ".join(str(c) for c in pack[1:-2]) + " DIR IMAGE"}))
        self.profiled[fmt.name] = img
        self.profiled_info[fmt.name] = json.loads(info.read_text())
        return img

    def tree_stats(self):
        site = self.tree / "site-packages"
        n = size = 0
        for p in site.rglob("*"):
            if p.is_file():
                n += 1
                size += p.stat().st_size
        return n, size


# ====================================================================== modes

class Mode:
    name = "?"
    fmt = ""
    kind = ""
    profiled = False  # the image with a start profile (Stack.profiled)

    def __init__(self, bench):
        self.b = bench

    def local_image(self):
        """The image file the mode serves, on local disk."""
        return (self.b.stack.profiled if self.profiled else self.b.stack.images)[self.fmt]

    def profile_info(self):
        """The start profile's size, for every run of a profiled mode."""
        if not self.profiled:
            return {}
        i = self.b.stack.profiled_info[self.fmt]
        return {"profile_files": i["profile_files"], "profile_bytes": i["profile_bytes"]}

    def prepare_cold(self):
        """Drops caches and (re)mounts; the next run is cold."""
        drop_caches()

    def root(self):
        raise NotImplementedError

    def run_workload(self, workload, times, n):
        args = [PYTHON, self.b.workload_py, workload, self.root(), "--times", times,
                "--n", n, "--imports", self.b.stack.imports]
        p = run(args, timeout=1800, env=self.b.workload_env())
        return [json.loads(line) for line in p.stdout.splitlines() if line.startswith("{")]

    def after_run(self):
        """Extra numbers about the mode after a run (e.g. server memory)."""
        return {}

    def stop(self):
        pass


# kernel-profiled, slow-reader-profiled, ...: the image with a start profile.
PROFILED = re.compile(r"(slow-)?(kernel|fuse|reader)-profiled")


class LocalMode(Mode):
    kind = "local"

    def __init__(self, bench):
        super().__init__(bench)
        self.name = "local"

    def root(self):
        return str(self.b.stack.tree)


def wait_or_kill(proc, timeout):
    """Waits for proc to end, killing it after timeout seconds."""
    try:
        proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


class MountedMode(Mode):
    """A mode with a mount point under CACHE/mnt that is made fresh for
    every cold run."""

    def __init__(self, bench, name):
        super().__init__(bench)
        self.name = name
        self.mnt = bench.cache / "mnt" / name.replace(":", "-")
        self.mnt.mkdir(parents=True, exist_ok=True)
        self.proc = None

    def root(self):
        return str(self.mnt)

    def prepare_cold(self):
        self.stop()
        drop_caches()
        self.mount()

    def mount(self):
        raise NotImplementedError

    def stop(self):
        if is_mounted(self.mnt):
            p = run(["umount", self.mnt], check=False)
            if p.returncode != 0:
                run(["umount", "-l", self.mnt], check=False)
        if self.proc:
            wait_or_kill(self.proc, 10)
            self.proc = None

    def start_server(self, cmd):
        self.proc = subprocess.Popen([str(c) for c in cmd], stdin=subprocess.DEVNULL,
                                     stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                     start_new_session=True)
        self.b.children.append(self.proc)

        def up():
            if self.proc.poll() is not None:
                raise RuntimeError(f"{cmd[0]} exited {self.proc.returncode}: "
                                   f"{self.proc.stderr.read().decode(errors='replace')}")
            return is_mounted(self.mnt)
        wait_for(up, 20, f"{cmd[0]} to mount {self.mnt}")


class SlowFSMode(MountedMode):
    kind = "slowfs"

    def __init__(self, bench, name="slowfs", source=None):
        super().__init__(bench, name)
        self.stats = bench.cache / "mnt" / f"{name.replace(':', '-')}.stats"
        self.requests = None
        self.served = {}  # the stats file: delayed_requests, read_requests, read_bytes
        self.source = source  # default: the stack's tree

    def mount(self):
        self.stats.unlink(missing_ok=True)
        a = self.b.args
        self.start_server([self.b.build / "tests" / "bench" / "slowfs", self.source or self.b.stack.tree,
                           self.mnt, "-f",
                           "-o", f"ro,allow_other,delay_us={a.delay_us},stats={self.stats}",
                           "-o", f"read_delay_us={a.read_delay_us},bw_mib={a.bw_mib}",
                           "-o", "entry_timeout={0},attr_timeout={0},negative_timeout={0}".format(
                               a.slowfs_cache_s)])

    def stop(self):
        super().stop()
        try:
            self.served = {k: int(v) for k, v in
                           (l.split() for l in self.stats.read_text().splitlines() if l.strip())}
        except (OSError, ValueError):
            self.served = {}
        self.requests = self.served.get("delayed_requests")


class SlowImageMode(Mode):
    """The image file itself on the slow FS (a site's Lustre or GPFS): a
    slowfs over the images directory, the image served from there by the
    kernel (squashfs on a loop device), squashfuse_ll or squash-reader.
    Both are fresh for every cold run, so the slowfs's counts are the run's
    (cold and warm: the warm run reads from the page cache)."""

    def __init__(self, bench, inner):
        super().__init__(bench)
        fmt = self.fmt = inner.fmt
        self.inner = inner
        src = inner.local_image()
        self.slow = SlowFSMode(bench, f"slowimg-{inner.kind}-{fmt}", src.parent)
        # Its own mount point: the plain mode's may be mounted meanwhile.
        self.inner.mnt = bench.cache / "mnt" / f"slow-{self.inner.kind}-{fmt}"
        self.inner.mnt.mkdir(parents=True, exist_ok=True)
        self.kind = f"slow-{self.inner.kind}"
        self.name = f"slow-{self.inner.name}"
        self.inner.image_path = lambda: self.slow.mnt / src.name

    def root(self):
        return self.inner.root()

    def prepare_cold(self):
        self.stop()
        drop_caches()
        self.slow.mount()
        self.inner.mount()

    def after_run(self):
        return self.inner.after_run()

    def stop(self):
        self.inner.stop()
        self.slow.stop()


def loop_settings(dev):
    """What the kernel set for a loop device (/dev/loopN): direct I/O,
    read-ahead, logical block size."""
    sysfs = Path("/sys/block") / Path(dev).name
    return {"loop_dio": int((sysfs / "loop" / "dio").read_text()),
            "loop_read_ahead_kb": int((sysfs / "queue" / "read_ahead_kb").read_text()),
            "loop_block_size": int((sysfs / "queue" / "logical_block_size").read_text())}


class KernelMode(MountedMode):
    kind = "kernel"

    def __init__(self, bench, fmt, profiled=False):
        self.kind = "kernel-profiled" if profiled else "kernel"
        super().__init__(bench, f"{self.kind}:{fmt}")
        self.fmt = fmt
        self.profiled = profiled
        self.took = {}  # loop_settings() of its loop device
        self.prefetch = None

    def mount(self):
        run(["mount", "-t", "squashfs", "-o", "ro,loop,nosuid,nodev", self.image_path(), self.mnt])
        self.took = loop_settings(run(["findmnt", "-no", "SOURCE", self.mnt]).stdout.strip())
        if self.profiled:
            # What squashd starts after a kernel mount of a profiled image
            # (daemon/mount/kernel_prefetch.c), not waited for.
            self.prefetch = subprocess.Popen([str(self.b.reader), "--prefetch", str(self.image_path()),
                                              "--walk", str(self.mnt)], stdin=subprocess.DEVNULL,
                                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    def stop(self):
        if self.prefetch:
            wait_or_kill(self.prefetch, 60)
            self.prefetch = None
        super().stop()

    def image_path(self):
        return self.local_image()

    def after_run(self):
        return {**self.took, **self.profile_info()}


class LoopKernelMode(KernelMode):
    """kernel-VARIANT:FMT: the kernel's squashfs on a loop device attached
    the way squashd could attach it (LOOP_CONFIGURE on its descriptor of the
    image). VARIANT is settings joined by '-': 'dio' (direct I/O to the
    image file), 'raN' (the loop device's read_ahead_kb = N), 'bsN' (its
    logical block size), 'seq' (posix_fadvise SEQUENTIAL on the image
    descriptor: the image file's own read-ahead doubled), e.g.
    'dio-ra1024'. What the kernel took is recorded with every run
    (loop_dio, loop_read_ahead_kb, loop_block_size)."""

    VARIANT = re.compile(r"(?:dio|seq|ra\d+|bs\d+)(?:-(?:dio|seq|ra\d+|bs\d+))*")
    LOOP_CTL_GET_FREE, LOOP_CONFIGURE, LOOP_CLR_FD = 0x4C82, 0x4C0A, 0x4C01
    LO_FLAGS_READ_ONLY, LO_FLAGS_DIRECT_IO = 1, 16

    def __init__(self, bench, fmt, variant):
        super().__init__(bench, fmt)
        self.kind = f"kernel-{variant}"
        self.name = f"{self.kind}:{fmt}"
        self.mnt = bench.cache / "mnt" / self.name.replace(":", "-")
        self.mnt.mkdir(parents=True, exist_ok=True)
        parts = variant.split("-")
        self.dio = "dio" in parts
        self.seq = "seq" in parts
        self.read_ahead_kb = next((p[2:] for p in parts if p.startswith("ra")), None)
        self.block_size = int(next((p[2:] for p in parts if p.startswith("bs")), 0))
        self.dev = self.ra_before = None

    def attach(self, image_fd):
        """LOOP_CONFIGURE, as daemon/mount/mount_loop.c does; retried while
        another process takes the free device first."""
        flags = self.LO_FLAGS_READ_ONLY | (self.LO_FLAGS_DIRECT_IO if self.dio else 0)
        # struct loop_config: fd, block_size, loop_info64 (lo_flags at 52), reserved
        cfg = bytearray(304)
        cfg[0:8] = struct.pack("II", image_fd, self.block_size)
        cfg[8 + 52:8 + 56] = struct.pack("I", flags)
        ctl = os.open("/dev/loop-control", os.O_RDWR)
        try:
            for _ in range(20):
                dev = f"/dev/loop{fcntl.ioctl(ctl, self.LOOP_CTL_GET_FREE)}"
                fd = os.open(dev, os.O_RDONLY)
                try:
                    fcntl.ioctl(fd, self.LOOP_CONFIGURE, bytes(cfg))
                    return dev
                except OSError as e:
                    if e.errno != errno.EBUSY:
                        raise
                finally:
                    os.close(fd)
            raise RuntimeError("no loop device could be attached")
        finally:
            os.close(ctl)

    def mount(self):
        fd = os.open(self.image_path(), os.O_RDONLY)
        try:
            if self.seq:
                os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_SEQUENTIAL)
            self.dev = self.attach(fd)
        finally:
            os.close(fd)
        self.took = loop_settings(self.dev)
        if self.read_ahead_kb:
            # The device keeps it after the detach: put it back in stop().
            self.ra_before = self.took["loop_read_ahead_kb"]
            self.ra_file().write_text(self.read_ahead_kb + "\n")
            self.took = loop_settings(self.dev)
        run(["mount", "-t", "squashfs", "-o", "ro,nosuid,nodev", self.dev, self.mnt])

    def ra_file(self):
        return Path("/sys/block") / Path(self.dev).name / "queue" / "read_ahead_kb"

    def stop(self):
        super().stop()
        if self.dev:
            run(["losetup", "-d", self.dev], check=False)
            if self.ra_before is not None:
                self.ra_file().write_text(f"{self.ra_before}\n")
            self.dev = self.ra_before = None


class FuseMode(MountedMode):
    """squashfuse_ll (the system's, or another build given with
    --extra-fuse NAME=PATH: mode NAME:FMT) serving the image."""

    def __init__(self, bench, fmt, kind="fuse", binary=None, profiled=False):
        kind += "-profiled" if profiled else ""
        super().__init__(bench, f"{kind}:{fmt}")
        self.kind = kind
        self.fmt = fmt
        self.profiled = profiled
        self.binary = binary or shutil.which("squashfuse_ll") or "/usr/bin/squashfuse_ll"

    def mount(self):
        self.start_server([self.binary, "-f", self.image_path(), self.mnt])

    def image_path(self):
        return self.local_image()

    def after_run(self):
        extra = self.profile_info()
        if self.proc and self.proc.poll() is None:
            rss, pss = pss_kb(self.proc.pid)
            extra["server_pss_kib"] = pss
        return extra


# The fuse module's switch for FUSE over io_uring (Linux 6.14+). It is
# machine-wide; the kernel offers io_uring to a connection only if it is Y
# when the connection starts (FUSE_INIT) and its rings register.
ENABLE_URING = Path("/sys/module/fuse/parameters/enable_uring")


def set_enable_uring(value):
    ENABLE_URING.write_text(value)


def io_uring_fds(pid):
    """How many io_uring instances the process holds (libfuse makes one per
    queue when the kernel accepted io_uring for the connection)."""
    n = 0
    with contextlib.suppress(OSError):
        for fd in Path(f"/proc/{pid}/fd").iterdir():
            with contextlib.suppress(OSError):
                if os.readlink(fd) == "anon_inode:[io_uring]":
                    n += 1
    return n


class ReaderMode(FuseMode):
    """squash-reader serving the image, mounting the directory itself as
    squashfuse_ll does (squashd passes it a mounted /dev/fuse instead: the
    same requests either way). With a reader-uring mode in the run, it
    mounts with enable_uring=N: /dev/fuse read and written."""

    uring = "N"

    def __init__(self, bench, fmt, kind="reader", profiled=False):
        super().__init__(bench, fmt, kind, bench.reader, profiled)

    def mount(self):
        if self.b.uring_saved is not None:
            set_enable_uring(self.uring)
        super().mount()

    def after_run(self):
        extra = super().after_run()
        if self.proc and self.proc.poll() is None:
            extra["io_uring_fds"] = io_uring_fds(self.proc.pid)
        return extra


class ReaderUringMode(ReaderMode):
    """squash-reader with enable_uring=Y from before its mount until it is
    unmounted (a connection whose rings are registered keeps them, but one
    made with N never gets any); each repetition's io_uring_fds says whether
    libfuse did start its rings."""

    uring = "Y"

    def __init__(self, bench, fmt):
        super().__init__(bench, fmt, "reader-uring")

    def stop(self):
        super().stop()
        if self.b.uring_saved is not None and ENABLE_URING.exists():
            set_enable_uring("N")


class ReaderLearnedMode(ReaderMode):
    """squash-reader over the plain image with --profile-cache (squashd.conf's
    start_profile_cache): the first cold run records the start and writes
    its profile into CACHE/learned-profiles (emptied when the run begins),
    every later one prefetches and walks it. Each run records how many
    files the learned profile holds (0: the run that learned it)."""

    def __init__(self, bench, fmt):
        super().__init__(bench, fmt, "reader-learned")
        self.dir = bench.cache / "learned-profiles"
        shutil.rmtree(self.dir, ignore_errors=True)

    def mount(self):
        self.files = sum(len(p.read_text().splitlines()) - 1 for p in self.dir.glob("[0-9a-f]" * 16)) \
            if self.dir.is_dir() else 0
        self.start_server([self.binary, "--profile-cache", self.dir, "-f", self.image_path(), self.mnt])

    def after_run(self):
        extra = super().after_run()
        extra["learned_profile_files"] = self.files
        return extra


class JobMode(Mode):
    """The product path: one srun job per measurement. Caches are dropped
    before the job; squashd mounts the image in the prolog (no other job
    holds it, so the mount is fresh), the step binds it at /squash/stack,
    workload.py runs cold then warm inside the step, the epilog releases."""

    def __init__(self, bench, kind, fmt):
        super().__init__(bench)
        self.kind = f"job-{kind}"
        self.name = f"job-{kind}:{fmt}"
        self.fmt = fmt
        self.image = bench.cluster.image_path(kind, fmt)

    def root(self):
        return "/squash/stack"

    def prepare_cold(self):
        self.b.cluster.wait_no_mounts()
        drop_caches()

    def run_workload(self, workload, times, n):
        c = self.b.cluster
        args = ["srun", "-Q", "-n1", f"--squash-image={self.image}:/squash/stack",
                PYTHON, c.workload_py, workload, self.root(), "--times", times, "--n", n,
                "--imports", self.b.stack.imports]
        p = c.as_user(args, timeout=1800)
        if p.returncode != 0:
            raise RuntimeError(f"job failed ({p.returncode}): {p.stdout[-2000:]} {p.stderr[-2000:]}")
        return [json.loads(line) for line in p.stdout.splitlines() if line.startswith("{")]


# ====================================================================== cluster

class Cluster:
    """A throwaway cluster from tests/cluster/cluster.sh in its own scratch
    dir under /tmp, with debug logs for the timing of prolog and launch."""

    def __init__(self, bench, slurm_only=False):
        self.b = bench
        self.slurm_only = slurm_only
        self.dir = Path(tempfile.mkdtemp(prefix="squash-bench-cluster.", dir="/tmp"))
        os.chmod(self.dir, 0o755)
        with open(bench.cache / "clusters.txt", "a") as f:
            f.write(f"{self.dir}\n")
        self.env = dict(os.environ, SLURM_CONF=str(self.dir / "slurm.conf"),
                        SQUASH_BUILD_DIR=str(bench.build))
        # squashd's state_dir on a tmpfs, as /run/squashd on a real node
        # (cluster.sh); --state-dir-disk leaves it on the scratch directory's
        # file system, where every registry save pays an fsync.
        if not bench.args.state_dir_disk:
            self.env["SQUASH_TEST_STATE_TMPFS"] = "1"
        if slurm_only:
            self.env["SQUASH_SLURM_ONLY"] = "1"
        self.started = False

    def start(self):
        log(f"starting a {'plugin-less ' if self.slurm_only else ''}cluster in {self.dir}")
        p = run([CLUSTER_SH, "start", self.dir], check=False, timeout=300, env=self.env)
        if p.returncode != 0:
            raise RuntimeError(f"cluster.sh start failed:\n{p.stdout}\n{p.stderr}")
        self.started = True
        conf = self.dir / "slurm.conf"
        text = conf.read_text()
        text = re.sub(r"^SlurmdDebug=.*$", "SlurmdDebug=debug", text, flags=re.M)
        text = re.sub(r"^SlurmctldDebug=.*$", "SlurmctldDebug=debug", text, flags=re.M)
        conf.write_text(text)
        run(["scontrol", "reconfigure"], env=self.env)
        fuse = self.b.args.product_squashfuse
        if fuse and not self.slurm_only:
            # squashd runs this FUSE server for the job-fuse mode and part 2.
            sconf = self.dir / "squashd.conf"
            sconf.write_text(re.sub(r"^squashfuse = .*$", f"squashfuse = {fuse}", sconf.read_text(),
                                    flags=re.M))
            run([CLUSTER_SH, "squashd-stop", self.dir], env=self.env, timeout=120)
            run([CLUSTER_SH, "squashd-start", self.dir], env=self.env, timeout=120)
        if not self.slurm_only:
            served = re.findall(r"FUSE mounts are served by (.*)",
                                (self.dir / "log" / "squashd.log").read_text(errors="replace"))
            self.b.meta["product_fuse_reader"] = served[-1] if served else "unknown"
            self.b.meta["state_dir"] = "disk" if self.b.args.state_dir_disk else "tmpfs"
        time.sleep(1.0)
        wait_for(lambda: self.node_state() == "idle", 60, "the node to be idle after reconfigure", 0.2)
        self.work = self.dir / "work" / "bench"
        self.work.mkdir()
        os.chmod(self.work, 0o755)
        self.workload_py = self.work / "workload.py"
        shutil.copy(HERE / "workload.py", self.workload_py)
        os.chmod(self.workload_py, 0o755)
        self.imgdir = self.dir / "work" / "img"  # user images: FUSE
        self.imgdir.mkdir()
        os.chmod(self.imgdir, 0o755)
        (self.work / "true.sh").write_text("#!/bin/bash\ntrue\n")
        os.chmod(self.work / "true.sh", 0o755)

    def stop(self):
        if not self.dir.exists():
            return
        run([CLUSTER_SH, "stop", self.dir], check=False, timeout=300, env=self.env)
        self.started = False

    def remove(self):
        left = [mp for mp, _ in mountpoints() if mp.startswith(str(self.dir) + "/")]
        if left:
            log(f"keeping {self.dir}: mounts left {left}")
            return
        shutil.rmtree(self.dir, ignore_errors=True)

    # ---- images
    def link_image(self, src, kind, name):
        """A hard link of src (same inode, no copy) under trusted/ (kernel)
        or work/img/ (FUSE, the user's)."""
        d = self.dir / "trusted" if kind == "kernel" else self.imgdir
        dst = d / name
        if not dst.exists():
            try:
                os.link(src, dst)
            except OSError:
                shutil.copy(src, dst)
        return dst

    def image_path(self, kind, fmt):
        return self.link_image(self.b.stack.images[fmt], kind, f"stack-{fmt}.sqfs")

    # ---- running things
    def as_user(self, cmd, timeout=600, user=USER):
        full = ["runuser", "-u", user, "--", "env", f"SLURM_CONF={self.dir / 'slurm.conf'}",
                *[str(c) for c in cmd]]
        return subprocess.run(full, text=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              timeout=timeout, env=self.env, cwd=self.work)

    def popen_user(self, cmd, user=USER):
        full = ["runuser", "-u", user, "--", "env", f"SLURM_CONF={self.dir / 'slurm.conf'}",
                *[str(c) for c in cmd]]
        return subprocess.Popen(full, text=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                env=self.env, cwd=self.work, start_new_session=True)

    def link_dataset(self, ds, kind):
        """Hard links of a dataset's bundles under trusted/NAME (kernel) or
        work/img/NAME (FUSE, the user's)."""
        d = (self.dir / "trusted" if kind == "kernel" else self.imgdir) / ds.name
        d.mkdir(exist_ok=True)
        os.chmod(d, 0o755)
        for b in sorted(ds.bundles_dir.glob("b*.sqfs")):
            self.link_image(b, kind, f"{ds.name}/{b.name}")
        return d

    def squashctl(self, *args):
        return run([self.b.build / "daemon" / "squashctl", "--socket", self.dir / "squashd.sock",
                    "--munge-socket", self.dir / "munge.sock", *args], timeout=60)

    def list_mounts(self):
        if self.slurm_only:
            return []
        return json.loads(self.squashctl("list", "--json").stdout)["mounts"]

    def wait_no_mounts(self, timeout=60):
        """Waits until squashd holds no mount (the epilog of the previous
        job runs after srun has returned) and no job is left."""
        wait_for(lambda: not self.squeue() and not self.list_mounts(), timeout,
                 "the previous jobs' epilogs to release their mounts", 0.05)

    def squeue(self):
        return run(["squeue", "-h", "-o", "%i"], env=self.env).stdout.split()

    def node_state(self):
        return run(["sinfo", "-h", "-N", "-o", "%T"], env=self.env, check=False).stdout.strip()

    def squashd_pid(self):
        try:
            return int((self.dir / "run" / "squashd.pid").read_text())
        except (OSError, ValueError):
            return None

    def fuse_servers(self):
        prefix = str(self.dir) + "/"
        res = []
        for p in Path("/proc").iterdir():
            if not p.name.isdigit():
                continue
            try:
                if (p / "comm").read_text().strip() not in ("squashfuse_ll", "squash-reader"):
                    continue
                fds = os.listdir(p / "fd")
                if any(os.readlink(p / "fd" / fd).startswith(prefix) for fd in fds):
                    res.append(int(p.name))
            except OSError:
                continue
        return res

    def slurmd_log(self):
        return (self.dir / "log" / "slurmd.log").read_text(errors="replace")

    def slurmctld_log(self):
        return (self.dir / "log" / "slurmctld.log").read_text(errors="replace")


# ====================================================================== bench

class Bench:
    def __init__(self, args):
        self.args = args
        self.cache = Path(args.cache)
        self.build = Path(os.environ.get("SQUASH_BUILD_DIR", REPO / "build")).resolve()
        self.out = Path(args.out)
        self.rows = []
        self.children = []
        self.modes = []
        self.cluster = None
        self.clusters = []
        self.meta = {}
        self.workload_py = str(HERE / "workload.py")
        self.reader = self.build / "daemon" / "reader" / "squash-reader"
        self.stack = Stack(self.cache, args.stack, args.bigfile_mib)
        self.formats = [Formats(s) for s in args.formats.split(",") if s]
        self.t_start = time.monotonic()
        self.uring_saved = None  # enable_uring before the run, with a reader-uring mode

    def workload_env(self):
        env = dict(os.environ)
        env.pop("PYTHONPATH", None)
        env.pop("VIRTUAL_ENV", None)
        env["PATH"] = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
        return env

    def add(self, section, **kw):
        row = {"section": section, **kw}
        self.rows.append(row)
        return row

    # ---------------------------------------------------------------- setup
    def setup(self):
        self.out.mkdir(parents=True, exist_ok=True)
        (self.cache / "mnt").mkdir(exist_ok=True)
        self.stack.ensure_tree()
        for f in self.formats:
            self.stack.ensure_image(f)
        nfiles, size = self.stack.tree_stats()
        self.meta.update({
            "stack": self.args.stack, "stack_files": nfiles, "stack_bytes": size,
            "pins": [l for l in self.stack.req.read_text().splitlines() if l and not l.startswith("#")],
            "imports": self.stack.imports, "bigfile_mib": self.args.bigfile_mib,
            "images": {k: v for k, v in self.stack.image_info.items()},
        })
        # matplotlib builds a font cache on its first import per user:
        # build it now, not in the first measurement (only the import and
        # start workloads import the stack), nor in the start a profile
        # records (squash-pack runs as root).
        workloads = set(self.args.workloads.split(","))
        profiled = any(m.endswith("-profiled") for m in self.args.modes.split(","))
        users = ("root", USER) if workloads & {"import", "start"} else ("root",) if profiled else ()
        for user in users:
            run(["runuser", "-u", user, "--", PYTHON, self.workload_py, "import",
                 self.stack.tree, "--imports", self.stack.imports], env=self.workload_env(),
                timeout=600)
        if profiled:
            for f in self.formats:
                self.stack.ensure_profiled_image(f, self.workload_env(), self.reader)
            self.meta["profiled_images"] = dict(self.stack.profiled_info)

    def make_modes(self):
        names = self.args.modes.split(",")
        modes = []
        for n in names:
            if n == "local":
                modes.append(LocalMode(self))
            elif n == "slowfs":
                modes.append(SlowFSMode(self))
            elif n in ("kernel", "fuse", "reader", "reader-uring"):
                cls = {"kernel": KernelMode, "fuse": FuseMode, "reader": ReaderMode,
                       "reader-uring": ReaderUringMode}[n]
                if n == "reader-uring" and self.uring_saved is None:
                    self.prepare_uring()
                for f in self.formats:
                    modes.append(cls(self, f.name))
            elif n in ("slow-kernel", "slow-fuse", "slow-reader"):
                cls = {"slow-kernel": KernelMode, "slow-fuse": FuseMode, "slow-reader": ReaderMode}[n]
                for f in self.formats:
                    modes.append(SlowImageMode(self, cls(self, f.name)))
            elif v := re.fullmatch(r"(slow-)?reader-learned", n):
                for f in self.formats:
                    m = ReaderLearnedMode(self, f.name)
                    modes.append(SlowImageMode(self, m) if v[1] else m)
            elif v := PROFILED.fullmatch(n):
                cls = {"kernel": KernelMode, "fuse": FuseMode, "reader": ReaderMode}[v[2]]
                for f in self.formats:
                    m = cls(self, f.name, profiled=True)
                    modes.append(SlowImageMode(self, m) if v[1] else m)
            elif (v := re.fullmatch(r"(slow-)?kernel-(.+)", n)) and LoopKernelMode.VARIANT.fullmatch(v[2]):
                for f in self.formats:
                    m = LoopKernelMode(self, f.name, v[2])
                    modes.append(SlowImageMode(self, m) if v[1] else m)
            elif any(x.startswith(n.removeprefix("slow-").removesuffix("-profiled") + "=")
                     for x in self.args.extra_fuse):
                pass  # with its --extra-fuse below
            elif n in ("job-kernel", "job-fuse"):
                if self.cluster:
                    modes.append(JobMode(self, n[4:], self.product_format))
            else:
                raise SystemExit(f"unknown mode {n}")
        for spec in self.args.extra_fuse:
            name, _, path = spec.partition("=")
            if not name or not os.access(path, os.X_OK) or name in ("kernel", "fuse", "reader", "reader-uring", "local", "slowfs"):
                raise SystemExit(f"--extra-fuse {spec}: want NAME=PATH of an executable squashfuse_ll")
            # NAME, slow-NAME, NAME-profiled, slow-NAME-profiled: those in
            # --modes (NAME alone when none is).
            variants = [(slow, prof) for slow in ("", "slow-") for prof in ("", "-profiled")
                        if f"{slow}{name}{prof}" in names] or [("", "")]
            for f in self.formats:
                for slow, prof in variants:
                    m = FuseMode(self, f.name, name, path, profiled=bool(prof))
                    modes.append(SlowImageMode(self, m) if slow else m)
        self.modes = modes

    def prepare_uring(self):
        """Checks that the reader-uring mode can run; saves enable_uring's
        value (in CACHE/mnt, for cleanup_only too) to restore it at the end."""
        reader = self.reader
        if not ENABLE_URING.exists():
            raise SystemExit(f"reader-uring: no {ENABLE_URING} (kernel without CONFIG_FUSE_IO_URING)")
        p = run([reader, "-h"], check=False)
        # ", io_uring" only says libfuse >= 3.18; whether that libfuse has
        # liburing shows in each repetition's io_uring_fds.
        if ", io_uring" not in p.stdout.splitlines()[0]:
            raise SystemExit(f"reader-uring: {reader} is built without io_uring (libfuse < 3.18): "
                             f"{p.stdout.splitlines()[0]}")
        self.uring_saved = ENABLE_URING.read_text().strip()
        (self.cache / "mnt").mkdir(parents=True, exist_ok=True)
        (self.cache / "mnt" / "enable_uring.saved").write_text(self.uring_saved + "\n")
        self.meta["enable_uring_before"] = self.uring_saved
        log(f"reader-uring: enable_uring is {self.uring_saved}; Y for reader-uring's mounts, "
            f"N for reader's, {self.uring_saved} again at the end")

    # ---------------------------------------------------------------- part 1
    def measure(self, mode, workload, n, rep, times):
        mode.prepare_cold()
        t0 = time.perf_counter()
        try:
            recs = mode.run_workload(workload, times, n)
        except Exception as e:  # noqa: BLE001 - keep going, record the failure
            log(f"  {mode.name} {workload} n={n}: FAILED: {e}")
            self.add("workload", rep=rep, workload=workload, n=n, mode=mode.name, kind=mode.kind,
                     format=mode.fmt, cache="cold", seconds="", note=f"failed: {str(e)[:200]}")
            return
        wall = time.perf_counter() - t0
        extra = mode.after_run()
        added = []
        for r in recs:
            cache = "cold" if r["run"] == 0 else "warm"
            note = ""
            extra_r = {}
            if "bytes" in r and r["seconds"] > 0:
                extra_r["mib_s"] = round(r["bytes"] / r["seconds"] / 2**20, 1)
            if "busy_cpu_s" in r and r["seconds"] > 0:
                # The share of the machine's CPUs that others used meanwhile
                # (other engineers' work, FUSE servers, kernel threads).
                extra_r["others_cpu_share"] = round(
                    max(0.0, r["busy_cpu_s"] - r["own_cpu_s"]) / (r["seconds"] * os.cpu_count()), 2)
            added.append(self.add("workload", rep=rep, workload=workload, n=n, mode=mode.name,
                                  kind=mode.kind, format=mode.fmt, cache=cache,
                                  seconds=r["seconds"], note=note, **extra_r, **extra))
        slow = mode if isinstance(mode, SlowFSMode) else getattr(mode, "slow", None)
        if slow:
            mode.stop()
            if slow.requests is not None:
                self.add("slowfs_requests", rep=rep, workload=workload, n=n, mode=mode.name,
                         value=slow.requests, note="delayed requests, cold+warm runs")
            for key in ("read_requests", "read_bytes"):
                if key in slow.served:
                    self.add(f"slowfs_{key}", rep=rep, workload=workload, n=n, mode=mode.name,
                             value=slow.served[key], note="cold+warm runs")
            if slow.served:
                log(f"  {mode.name:24} {workload:6} slowfs served {slow.served}")
        secs = ", ".join(f"{r['seconds']:.3f}" for r in recs)
        others = ", ".join(str(r.get("others_cpu_share", "?")) for r in added)
        log(f"  {mode.name:24} {workload:6} n={n:<3} {secs}  ({wall:.1f} s; others' CPU share {others})")

    def part1(self):
        workloads = [w for w in self.args.workloads.split(",") if w]
        ns = [int(x) for x in self.args.ns.split(",")]
        start_formats = set(Formats(s).name for s in self.args.start_formats.split(",") if s)
        start_modes = [m for m in self.modes
                       if not m.fmt or m.fmt in start_formats or m.kind.startswith("job")]
        reps = max(self.args.reps, self.args.start_reps if "start" in workloads else 0)
        for rep in range(reps):
            for w in workloads:
                if w == "start":
                    if rep >= self.args.start_reps:
                        continue
                    modes = start_modes
                elif rep >= self.args.reps:
                    continue
                else:
                    modes = self.modes
                k = rep % len(modes)
                order = modes[k:] + modes[:k]
                log(f"rep {rep + 1}: {w}: {' '.join(m.name for m in order)}")
                for m in order:
                    if w == "start":
                        for n in ns:
                            self.measure(m, "start", n, rep, 2 if self.args.start_warm else 1)
                    else:
                        self.measure(m, w, 1, rep, 2)
            self.elapsed_note(f"rep {rep + 1} done")
        for m in self.modes:
            m.stop()

    def elapsed_note(self, what):
        log(f"{what} after {time.monotonic() - self.t_start:.0f} s")

    # ---------------------------------------------------------------- part 2
    def part2(self):
        c = self.cluster
        fmt = self.product_format
        reps = self.args.cost_reps
        shared_k = c.image_path("kernel", fmt)
        shared_f = c.image_path("fuse", fmt)
        # A second inode of the same image for first mounts: the holder job
        # keeps the shared ones mounted all along.
        first_src = c.dir / "first.sqfs"
        shutil.copy(self.stack.images[fmt], first_src)
        first_k = c.link_image(first_src, "kernel", "first.sqfs")
        first_f = c.link_image(first_src, "fuse", "first.sqfs")
        first_src.unlink()
        c.wait_no_mounts()
        holder_go = c.work / "holder.go"
        holder = c.work / "holder.sh"
        holder.write_text(f"#!/bin/bash\nwhile [ ! -e {holder_go} ]; do sleep 0.5; done\n")
        holder.chmod(0o755)
        p = c.as_user(["sbatch", "--parsable", "-o", "/dev/null",
                       f"--squash-image={shared_k}:/squash/k,{shared_f}:/squash/f", holder])
        if p.returncode != 0:
            raise RuntimeError(f"holder job refused: {p.stderr}")
        holder_id = p.stdout.strip().split(";")[0]
        wait_for(lambda: len([m for m in c.list_mounts() if holder_id in map(str, m.get("jobs", []))]) == 2,
                 60, "the holder job to mount both images", 0.1)
        conditions = [
            ("no image", []),
            ("kernel, first mount", [f"--squash-image={first_k}:/squash/x"]),
            ("fuse, first mount", [f"--squash-image={first_f}:/squash/x"]),
            ("kernel, shared mount", [f"--squash-image={shared_k}:/squash/x"]),
            ("fuse, shared mount", [f"--squash-image={shared_f}:/squash/x"]),
        ]

        def settle():
            # The previous job's epilog must have released its mount: the
            # next first mount is a real one.
            wait_for(lambda: c.squeue() == [holder_id] and
                     not [m for m in c.list_mounts() if m["image"] == str(first_k)], 60,
                     "the previous job to end", 0.05)

        log("part 2: srun with and without an image (wall time as the user sees it)")
        for rep in range(reps):
            k = rep % len(conditions)
            for name, opt in conditions[k:] + conditions[:k]:
                settle()
                t0 = time.perf_counter()
                p = c.as_user(["srun", "-Q", "-n1", *opt, "true"], timeout=120)
                secs = time.perf_counter() - t0
                self.add("srun", rep=rep, mode=name, seconds=round(secs, 4) if p.returncode == 0 else "",
                         note="" if p.returncode == 0 else f"failed: {p.stderr[-200:]}")
        log("part 2: batch jobs, allocation to task start from the Slurm logs")
        batch_jobs = []
        for rep in range(reps):
            k = rep % len(conditions)
            for name, opt in conditions[k:] + conditions[:k]:
                settle()
                p = c.as_user(["sbatch", "--parsable", "-o", "/dev/null", *opt, c.work / "true.sh"])
                if p.returncode != 0:
                    log(f"  sbatch failed: {p.stderr}")
                    continue
                jid = p.stdout.strip().split(";")[0]
                batch_jobs.append((rep, name, jid))
                wait_for(lambda: jid not in c.squeue(), 120, f"batch job {jid}", 0.05)
                wait_for(lambda: f"JobId={jid}: sent epilog complete" in c.slurmd_log(), 60,
                         f"the epilog of job {jid}", 0.05)
        settle()
        self.steps(c, [("no image", []), ("kernel image", [f"--squash-image={shared_k}:/squash/x"]),
                       ("fuse image", [f"--squash-image={shared_f}:/squash/x"])], settle)
        holder_go.touch()
        wait_for(lambda: not c.squeue(), 60, "the holder job to end", 0.1)
        self.parse_slurm_logs(c, batch_jobs, "plugin loaded")
        c.wait_no_mounts()
        self.burst()
        self.memory()

    def steps(self, c, conditions, settle):
        """Job steps inside a job: a batch job per condition runs
        `srun true` cost_reps times; wall time per step from the script,
        step launch request to task start from slurmd's log (the step's
        setup: for a job with images, the plugin's StepInfoRequest and bind
        mounts in a private namespace)."""
        log("part 2: job steps (srun inside a job)")
        ts = r"\[(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3})\]"

        def t(x):
            return dt.datetime.strptime(x, "%Y-%m-%dT%H:%M:%S.%f").timestamp()
        k = self.args.cost_reps
        for name, opt in conditions:
            settle()
            out = c.dir / "work" / f"steps-{name.replace(' ', '-')}.txt"  # the user writes it
            script = c.work / "steps.sh"
            script.write_text("#!/bin/bash\n"
                              f"for i in $(seq 1 {k}); do\n"
                              "  t0=$(date +%s%N); srun -Q -n1 true; t1=$(date +%s%N)\n"
                              f"  echo $(( (t1 - t0) / 1000 )) >> {out}\n"
                              "done\n")
            script.chmod(0o755)
            p = c.as_user(["sbatch", "--parsable", "-o", "/dev/null", *opt, script])
            if p.returncode != 0:
                log(f"  sbatch failed: {p.stderr}")
                continue
            jid = p.stdout.strip().split(";")[0]
            wait_for(lambda: jid not in c.squeue(), 300, f"steps job {jid}", 0.1)
            walls = []
            with contextlib.suppress(OSError):
                walls = [int(x) / 1000.0 for x in out.read_text().split()]
            sd = c.slurmd_log()
            for step in range(k):
                m_req = re.search(ts + rf" launch task StepId={jid}\.{step} request", sd)
                m_task = re.search(ts + rf" \[{jid}\.{step}\] task 0 \(\d+\) started", sd)
                row = {"rep": step, "mode": name, "job": jid}
                if step < len(walls):
                    row["wall_ms"] = round(walls[step], 1)
                if m_req and m_task:
                    row["launch_to_task_ms"] = round((t(m_task[1]) - t(m_req[1])) * 1000, 1)
                self.add("step", **row)

    def parse_slurm_logs(self, c, jobs, cluster_label):
        ts = r"\[(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3})\]"

        def t(s):
            return dt.datetime.strptime(s, "%Y-%m-%dT%H:%M:%S.%f").timestamp()

        ctld = c.slurmctld_log()
        sd = c.slurmd_log()
        for rep, name, jid in jobs:
            m_alloc = re.search(ts + rf" sched: Allocate JobId={jid} ", ctld)
            m_pw = re.search(ts + rf" debug:  Waiting for job {jid}'s prolog to complete", sd)
            m_pf = re.search(ts + rf" debug:  Finished wait for job {jid}'s prolog to complete", sd)
            m_launch = re.search(ts + rf" Launching batch job {jid} for UID", sd)
            m_task = re.search(ts + rf" \[{jid}\.batch\] task 0 \(\d+\) started", sd)
            m_term = re.search(ts + rf" debug:  _rpc_terminate_job: uid = \d+ JobId={jid}\b", sd)
            m_epi = re.search(ts + rf" debug:  JobId={jid}: sent epilog complete msg", sd)
            row = {"rep": rep, "mode": name, "job": jid, "cluster": cluster_label}
            if m_alloc and m_task:
                row["alloc_to_task_ms"] = round((t(m_task[1]) - t(m_alloc[1])) * 1000, 1)
            if m_alloc and m_launch:
                row["alloc_to_launch_ms"] = round((t(m_launch[1]) - t(m_alloc[1])) * 1000, 1)
            if m_launch and m_task:
                row["launch_to_task_ms"] = round((t(m_task[1]) - t(m_launch[1])) * 1000, 1)
            if m_pw and m_pf:
                row["prolog_ms"] = round((t(m_pf[1]) - t(m_pw[1])) * 1000, 1)
            if m_term and m_epi:
                row["epilog_ms"] = round((t(m_epi[1]) - t(m_term[1])) * 1000, 1)
            self.add("batch", **row)

    def burst(self):
        c = self.cluster
        uid = pwd.getpwnam(USER).pw_uid
        small_src = c.dir / "smallsrc"
        small_src.mkdir()
        (small_src / "hello.txt").write_text("hello\n")
        small = c.dir / "small.sqfs"
        run(["mksquashfs", small_src, small, "-noappend", "-quiet", "-no-progress", "-all-root"])
        os.chmod(small, 0o644)
        nmax = max([*(int(x) for x in self.args.burst_ns.split(",")), self.args.mem_images])
        kdir = c.dir / "trusted" / "burst"
        fdir = c.imgdir / "burst"
        for d in (kdir, fdir):
            d.mkdir()
            os.chmod(d, 0o755)
        for i in range(nmax):
            shutil.copy(small, kdir / f"k{i}.sqfs")
            shutil.copy(small, fdir / f"f{i}.sqfs")
        for d in (kdir, fdir):
            for p in d.iterdir():
                os.chmod(p, 0o644)
        self.burst_dirs = (kdir, fdir)
        base = 1_000_000
        ns = [int(x) for x in self.args.burst_ns.split(",")]
        log("part 2: squashd answer time under bursts of simultaneous mount requests")
        scenarios = [("same image, kernel", kdir, False), ("same image, fuse", fdir, False),
                     ("distinct images, kernel", kdir, True), ("distinct images, fuse", fdir, True)]
        for rep in range(self.args.burst_reps):
            for name, d, distinct in scenarios:
                for n in ns:
                    base += 10_000
                    prefix = "k" if d == kdir else "f"
                    specs = ([f"{d}/{prefix}{i}.sqfs:/squash/b" for i in range(n)] if distinct
                             else [f"{d}/{prefix}0.sqfs:/squash/b"])
                    recs = self.run_burst(uid, base, n, specs)
                    mounts = [r for r in recs if r["op"] == "mount"]
                    rel = [r for r in recs if r["op"] == "release"]
                    ok = [r["ms"] for r in mounts if r["status"] == "ok"]
                    fails = [r for r in mounts if r["status"] != "ok"]
                    self.add("burst", rep=rep, mode=name, n=n, ok=len(ok), failed=len(fails),
                             p50_ms=round(pct(ok, 50), 2) if ok else "",
                             p99_ms=round(pct(ok, 99), 2) if ok else "",
                             max_ms=round(max(ok), 2) if ok else "",
                             release_p50_ms=round(pct([r["ms"] for r in rel], 50), 2) if rel else "",
                             note=(fails[0]["status"] + ": " + fails[0]["msg"])[:200] if fails else "")
                    log(f"  {name:24} n={n:<4} ok={len(ok)} failed={len(fails)} "
                        f"p50={pct(ok, 50):.1f} ms p99={pct(ok, 99):.1f} ms")
                    c.wait_no_mounts(120)
                    wait_for(lambda: not c.fuse_servers(), 60, "FUSE servers to exit", 0.1)

    def run_burst(self, uid, base, n, specs, extra=()):
        c = self.cluster
        p = run([self.build / "tests" / "bench" / "burst", "--socket", c.dir / "squashd.sock",
                 "--munge-socket", c.dir / "munge.sock", "--uid", uid, "--job-base", base,
                 "--n", n, *extra, *specs], check=False, timeout=900)
        recs = [json.loads(line) for line in p.stdout.splitlines() if line.startswith("{")]
        if p.returncode not in (0, 1) or (not recs and "--release-only" not in extra):
            raise RuntimeError(f"burst exited {p.returncode}: {p.stderr[-1000:]}")
        return recs

    def memory(self):
        c = self.cluster
        uid = pwd.getpwnam(USER).pw_uid
        kdir, fdir = self.burst_dirs
        n = self.args.mem_images
        pid = c.squashd_pid()
        rss0, pss0 = pss_kb(pid)
        self.add("memory", mode="squashd, idle", n=0, rss_kib=rss0, pss_kib=pss0)
        log(f"part 2: memory with {n} images mounted")
        for name, d, prefix, base in (("fuse", fdir, "f", 3_000_000), ("kernel", kdir, "k", 3_100_000)):
            # One job per image, requests sent 16 at a time.
            done = 0
            while done < n:
                k = min(16, n - done)
                self.run_burst(uid, base + done, k,
                               [f"{d}/{prefix}{done + i}.sqfs:/squash/b" for i in range(k)],
                               ["--no-release"])
                done += k
            mounted = len(c.list_mounts())
            rss, pss = pss_kb(pid)
            self.add("memory", mode=f"squashd, {mounted} {name} mounts", n=mounted,
                     rss_kib=rss, pss_kib=pss)
            if name == "fuse":
                servers = c.fuse_servers()
                vals = [pss_kb(s) for s in servers]
                if vals:
                    # squash-reader serves all of a user's mounts from one
                    # process, squashfuse_ll one each: per mount is the sum
                    # over the processes divided by the mounts.
                    self.add("memory", mode=f"one FUSE server of {len(vals)} (mean)", n=len(vals),
                             rss_kib=round(statistics.mean(v[0] for v in vals)),
                             pss_kib=round(statistics.mean(v[1] for v in vals)))
                    self.add("memory", mode=f"all {len(vals)} FUSE servers (sum)", n=len(vals),
                             rss_kib=sum(v[0] for v in vals), pss_kib=sum(v[1] for v in vals))
                    self.add("memory", mode=f"FUSE servers per mount ({mounted} mounts)", n=mounted,
                             rss_kib=round(sum(v[0] for v in vals) / max(mounted, 1)),
                             pss_kib=round(sum(v[1] for v in vals) / max(mounted, 1)))
            log(f"  {mounted} {name} mounts: squashd RSS {rss} KiB")
            self.run_burst(uid, base, n, [], ["--release-only"])
            c.wait_no_mounts(300)
            wait_for(lambda: not c.fuse_servers(), 120, "FUSE servers to exit", 0.1)

    def baseline(self):
        """The same srun and batch measurements on a cluster without the
        plugin (SQUASH_SLURM_ONLY=1)."""
        c = Cluster(self, slurm_only=True)
        self.clusters.append(c)
        c.start()
        reps = self.args.cost_reps
        log("part 2: plugin-less cluster, srun and batch jobs")
        for rep in range(reps):
            wait_for(lambda: not c.squeue(), 60, "jobs to end", 0.05)
            t0 = time.perf_counter()
            p = c.as_user(["srun", "-Q", "-n1", "true"], timeout=120)
            secs = time.perf_counter() - t0
            self.add("srun", rep=rep, mode="no plugin", seconds=round(secs, 4) if p.returncode == 0 else "")
        jobs = []
        for rep in range(reps):
            wait_for(lambda: not c.squeue(), 60, "jobs to end", 0.05)
            p = c.as_user(["sbatch", "--parsable", "-o", "/dev/null", c.work / "true.sh"])
            jid = p.stdout.strip().split(";")[0]
            jobs.append((rep, "no plugin", jid))
            wait_for(lambda: jid not in c.squeue(), 120, f"batch job {jid}", 0.05)
            wait_for(lambda: f"JobId={jid}: sent epilog complete" in c.slurmd_log()
                     or f"_rpc_terminate_job: uid = 0 JobId={jid}" in c.slurmd_log(), 60,
                     f"the end of job {jid}", 0.05)
        time.sleep(0.5)
        self.parse_slurm_logs(c, jobs, "no plugin")
        c.stop()
        c.remove()

    # ---------------------------------------------------------------- datasets
    # --datasets: a dataset of many small files packed into bundles
    # (tests/bench/dataset.py), listed with `find . -print | wc -l` and read
    # at random (10,000 files, the same for every column) from the tree on
    # local disk, the same tree behind slowfs, and the bundles merged at one
    # target in a job: kernel bundles (trusted) under overlayfs, the user's
    # FUSE bundles under overlayfs (squashd.conf `fuse_union = no`) and as
    # one squash-reader union (`fuse_union = yes`, the default); the time
    # until a job sees the merged tree (first job on the node and a second
    # one while the first holds the mounts) and the node's memory with the
    # bundles mounted. One phase per dataset and repetition: a fresh
    # cluster, the five columns in an order rotated every repetition (for
    # the 1m set then two concurrent jobs of one user with 1,024 bundles
    # each), then the cluster is stopped (and --lock released, if given).

    DS_MODES = ["local", "slowfs", "job-kernel", "job-fuse-overlay", "job-fuse-union"]
    DS_LABEL = {"kernel": "kernel", "fuse-overlay": "FUSE overlay", "fuse-union": "FUSE union"}
    # The squashd.conf line of each FUSE column (None: the line removed, the default).
    DS_FUSE_UNION = {"fuse-overlay": "no", "fuse-union": "yes"}

    @contextlib.contextmanager
    def locked(self, what):
        lock = self.args.lock
        if not lock:
            yield
            return
        fd = os.open(lock, os.O_RDWR | os.O_CREAT, 0o644)
        t0 = time.monotonic()
        log(f"{what}: waiting for the lock {lock}")
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            waited = time.monotonic() - t0
            log(f"{what}: lock taken after {waited:.0f} s")
            self.meta["lock_wait_s"] = round(self.meta.get("lock_wait_s", 0) + waited)
            t1 = time.monotonic()
            yield
            held = time.monotonic() - t1
            log(f"{what}: lock held {held:.0f} s")
            self.meta.setdefault("lock_held_s", {})[what] = round(held)
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)
            os.close(fd)

    def datasets_main(self):
        import dataset as dsmod  # noqa: E402 - tests/bench on sys.path (main)
        dss = []
        for name in [n for n in self.args.datasets.split(",") if n]:
            ds = dsmod.Dataset(self.cache, name)
            info = ds.ensure(log)
            info = dict(info, random_list=str(ds.random_files()))
            dss.append((ds, info))
            self.meta.setdefault("datasets", {})[name] = {k: v for k, v in info.items() if k != "want"}
        self.meta["dataset_mksquashfs"] = " ".join(dsmod.MKSQUASHFS_ARGS)
        if self.args.ds_bind is not None:
            self.meta["ds_bind"] = self.args.ds_bind
        self.save()
        self.elapsed_note("datasets ready")
        for rep in range(self.args.reps):
            for ds, info in dss:
                with self.locked(f"dataset {ds.name}, repetition {rep + 1}"):
                    self.dataset_phase(ds, info, rep)
                self.save()
                self.elapsed_note(f"dataset {ds.name} repetition {rep + 1} done")

    def dataset_phase(self, ds, info, rep):
        c = Cluster(self)
        self.clusters.append(c)
        self.cluster = c
        try:
            c.start()
            dirs = {kind: c.link_dataset(ds, kind) for kind in ("kernel", "fuse")}
            c.random_list = c.work / f"random-{ds.name}.txt"
            shutil.copy(info["random_list"], c.random_list)
            os.chmod(c.random_list, 0o644)
            modes = [m for m in self.DS_MODES if m in self.args.ds_modes.split(",")]
            k = rep % len(modes) if modes else 0
            order = modes[k:] + modes[:k]
            log(f"dataset {ds.name}, rep {rep + 1}: {' '.join(order)}")
            for m in order:
                if m.startswith("job-"):
                    kind = m[4:]
                    if kind in self.DS_FUSE_UNION and not self.set_fuse_union(c, self.DS_FUSE_UNION[kind]):
                        if kind == "fuse-union":
                            self.ds_skip(ds, m, rep, self.meta["fuse_union"])
                            continue
                    self.ds_visible(c, ds, None, None, rep, "no image")
                    self.ds_job(c, ds, info, kind, dirs["kernel" if kind == "kernel" else "fuse"], rep)
                else:
                    self.ds_outside(ds, m, rep, c.random_list)
            if ds.params.get("per_bundle") == 1 and info["bundles"] >= 1024 and not self.args.no_concurrent:
                self.ds_concurrent(c, ds, info, dirs["fuse"], rep)
        finally:
            c.stop()
            # squashd's debug log (every mount, merge and release, timed)
            logs = self.out / "logs"
            logs.mkdir(exist_ok=True)
            with contextlib.suppress(OSError):
                shutil.copy(c.dir / "log" / "squashd.log", logs / f"{ds.name}-rep{rep + 1}-squashd.log")
            c.remove()
            self.clusters.remove(c)
            self.cluster = None

    def ds_skip(self, ds, mode, rep, why):
        log(f"  {ds.name:4} {mode:16} skipped: {why}")
        self.add("ds_skip", dataset=ds.name, rep=rep, mode=mode, note=f"skipped: {why}")

    def set_fuse_union(self, c, value):
        """Sets squashd.conf's `fuse_union` (value 'yes' or 'no'; None: the
        line removed, squashd's default) and reloads squashd (SIGHUP).
        Returns False when this squashd does not know the setting (its
        reload refuses the file: the line is taken out again, and squashd
        keeps merging FUSE bundles with overlayfs, as `no` would)."""
        if self.meta.get("fuse_union", "").startswith("unknown"):
            return False
        conf = c.dir / "squashd.conf"
        text = conf.read_text()
        lines = [ln for ln in text.splitlines() if not re.match(r"\s*fuse_union\s*=", ln)]
        if value is not None:
            lines.append(f"fuse_union = {value}")
        new = "\n".join(lines) + "\n"
        if new == text:
            return True
        conf.write_text(new)  # the file stays root's, 0644
        logf = c.dir / "log" / "squashd.log"
        off = logf.stat().st_size
        os.kill(c.squashd_pid(), signal.SIGHUP)

        def reloaded():
            t = logf.read_text(errors="replace")[off:]
            return "keeping the settings in force" in t or re.search(r"reload: .* read;", t)
        wait_for(reloaded, 30, "squashd to reload its settings", 0.05)
        said = logf.read_text(errors="replace")[off:]
        if "unknown setting 'fuse_union'" in said:
            conf.write_text("\n".join(ln for ln in lines if not ln.startswith("fuse_union")) + "\n")
            self.meta["fuse_union"] = ("unknown to this squashd (its reload refused the line: "
                                       "unknown setting 'fuse_union'); FUSE bundles merged by overlayfs")
            log(f"  squashd does not know fuse_union: {self.meta['fuse_union']}")
            return False
        if "keeping the settings in force" in said:
            raise RuntimeError(f"squashd refused fuse_union = {value}: {said.strip()[-500:]}")
        if re.search(r"fuse_union changed .* takes effect only when squashd restarts", said):
            # Not reloadable after all: restart squashd (nothing is mounted now).
            log("  fuse_union needs a restart of squashd: restarting it")
            run([CLUSTER_SH, "squashd-stop", c.dir], env=c.env, timeout=120)
            run([CLUSTER_SH, "squashd-start", c.dir], env=c.env, timeout=120)
            self.meta["fuse_union"] = "known; set by restarting squashd (its reload said so)"
        else:
            self.meta.setdefault("fuse_union", "known; set by reloading squashd (SIGHUP)")
        log(f"  squashd.conf: fuse_union = {value if value is not None else '(default)'}")
        return True

    def ds_outside(self, ds, mode, rep, listing):
        """find over the tree on local disk or behind slowfs, cold then warm;
        then the random files, cold."""
        sm = None
        if mode == "slowfs":
            sm = SlowFSMode(self, f"ds-{ds.name}-slowfs", ds.tree)
            self.modes.append(sm)
            sm.prepare_cold()
            root = sm.mnt
        else:
            drop_caches()
            root = ds.tree
        recs = []
        req_find = None
        try:
            p = run(self.ds_bound([PYTHON, self.workload_py, "find", root, "--times", "2"]), timeout=3600,
                    env=self.workload_env())
            recs = [json.loads(line) for line in p.stdout.splitlines() if line.startswith("{")]
            if sm:  # a fresh slowfs for the random reads (its count is the find's)
                sm.stop()
                req_find = sm.requests
                sm.prepare_cold()
            else:
                drop_caches()
            p = run(self.ds_bound([PYTHON, self.workload_py, "random", root, "--list", listing]), timeout=3600,
                    env=self.workload_env())
            recs += [json.loads(line) for line in p.stdout.splitlines() if line.startswith("{")]
        except Exception as e:  # noqa: BLE001 - keep going, record the failure
            log(f"  {ds.name} {mode}: FAILED: {e}")
            self.add("ds_scan", dataset=ds.name, rep=rep, mode=mode, cache="cold", seconds="",
                     note=f"failed: {str(e)[:200]}")
        finally:
            if sm:
                sm.stop()
                self.modes.remove(sm)
        extra = {}
        if sm and sm.requests is not None:
            extra = {"slowfs_requests": req_find if req_find is not None else sm.requests}
        self.ds_add_scans(ds, mode, rep, recs, extra)

    def ds_add_scans(self, ds, mode, rep, recs, extra=None):
        for r in recs:
            others = ""
            if r["seconds"] > 0:
                others = round(max(0.0, r["busy_cpu_s"] - r["own_cpu_s"]) /
                               (r["seconds"] * os.cpu_count()), 2)
            if r["workload"] == "random":
                self.add("ds_random", dataset=ds.name, rep=rep, mode=mode, cache="cold",
                         seconds=r["seconds"], files=r.get("files", ""), bytes=r.get("bytes", ""),
                         others_cpu_share=others)
                continue
            self.add("ds_scan", dataset=ds.name, rep=rep, mode=mode,
                     cache="cold" if r["run"] == 0 else "warm", seconds=r["seconds"],
                     files=r.get("files", ""), others_cpu_share=others, **(extra or {}))
        log(f"  {ds.name:4} {mode:16} " + ", ".join(
            f"{r['workload']} {r['seconds']:.2f} s ({r.get('files')})" for r in recs)
            + (f" {extra}" if extra else ""))

    # The task prints the time once PROBE is there (stat says why not).
    SHOW = 'stat -c %n "$1" >/dev/null || exit 3; date +%s.%N; shift; exec "$@"'

    def ds_bound(self, cmd):
        """cmd bound to --ds-bind's CPU, as Slurm's task binding would bind a
        task (cmd itself when no CPU is given)."""
        cpu = self.args.ds_bind
        return ["taskset", "-c", str(cpu), *cmd] if cpu is not None else cmd

    def ds_cmd(self, spec, probe, rest=()):
        img = [f"--squash-image={spec}"] if spec else []
        return ["srun", "-Q", "-n1", *img, "/bin/sh", "-c", self.SHOW, "sh", probe, *(rest or ["true"])]

    def ds_visible(self, c, ds, spec, probe, rep, label):
        """One srun whose task prints the time as soon as PROBE exists: the
        time from before srun until the job sees the tree (no image: the
        task's start)."""
        t0 = time.time()
        p = c.as_user(self.ds_cmd(spec, probe or "/", []), timeout=900)
        wall = time.time() - t0
        try:
            seen = float(p.stdout.split()[0]) - t0
        except (IndexError, ValueError):
            seen = None
        if p.returncode != 0 or seen is None:
            log(f"  {ds.name} {label}: FAILED ({p.returncode}): {p.stderr[-500:]}")
            self.add("ds_visible", dataset=ds.name, rep=rep, mode=label, seconds="",
                     note="failed: " + " ".join(p.stderr[-300:].split()))
            return
        self.add("ds_visible", dataset=ds.name, rep=rep, mode=label, seconds=round(seen, 4),
                 wall_s=round(wall, 4))
        log(f"  {ds.name:4} {label:26} visible after {seen:.3f} s (srun {wall:.3f} s)")

    def node_memory(self, c):
        """squashd's and the FUSE readers' memory, the kernel's slab and a
        few of its caches (the whole machine's: read them as differences),
        and the node mounts below the cluster by type."""
        m = {}
        with open("/proc/meminfo") as f:
            for line in f:
                k, v = line.split(":", 1)
                if k in ("Slab", "SReclaimable", "SUnreclaim", "KernelStack", "PageTables",
                         "Percpu", "VmallocUsed", "Cached", "MemAvailable"):
                    m[k.lower() + "_kib"] = int(v.split()[0])
        with open("/proc/slabinfo") as f:
            for line in f:
                parts = line.split()
                if parts and parts[0] in ("squashfs_inode_cache", "ovl_inode", "fuse_inode",
                                          "dentry", "inode_cache", "ext4_inode_cache"):
                    m[f"slab_{parts[0]}_kib"] = int(parts[2]) * int(parts[3]) // 1024
        pid = c.squashd_pid()
        if pid:
            m["squashd_rss_kib"], m["squashd_pss_kib"] = pss_kb(pid)
        servers = c.fuse_servers()
        readers = [pss_kb(p) for p in servers]
        m["readers"] = len(readers)
        m["readers_threads"] = 0
        for p in servers:
            with contextlib.suppress(OSError):
                m["readers_threads"] += len(os.listdir(f"/proc/{p}/task"))
        m["readers_rss_kib"] = sum(r for r, _ in readers)
        m["readers_pss_kib"] = sum(p for _, p in readers)
        # squashd's node mounts (the host's namespace, below the cluster's
        # directory): how it merged the bundles.
        prefix = str(c.dir) + "/"
        counts = {"fuse": 0, "overlay": 0, "squashfs": 0}
        with open("/proc/self/mountinfo") as f:
            for line in f:
                left, _, right = line.partition(" - ")
                fields = left.split()
                if len(fields) < 5 or not fields[4].startswith(prefix):
                    continue
                fstype = right.split()[0] if right else ""
                key = "fuse" if fstype.startswith("fuse") else fstype
                if key in counts:
                    counts[key] += 1
        for k, v in counts.items():
            m[f"node_mounts_{k}"] = v
        with contextlib.suppress(Exception):
            rows = c.list_mounts()
            m["squashctl_mounts"] = len(rows)
            for mode in sorted({str(r.get("mode")) for r in rows}):
                m[f"mounts_{mode}"] = sum(1 for r in rows if str(r.get("mode")) == mode)
        return m

    def ds_job(self, c, ds, info, kind, d, rep):
        """The first job on the node (nothing mounted, caches dropped): the
        time until it sees the merged tree, the node's memory once mounted,
        find cold and warm in the job, the memory after; meanwhile a second
        job with the same bundles (the mounts shared); then, the caches
        dropped again, the job reads the random files, and the memory after
        that."""
        c.wait_no_mounts(900)
        wait_for(lambda: not c.fuse_servers(), 120, "FUSE readers to exit", 0.1)
        target = f"/squash/{ds.name}"
        spec = f"{d}/b*.sqfs:{target}"
        probe = f"{target}/{info['probe']}"
        sync = c.work / f"sync-{ds.name}-{kind}-{rep}"
        sync.mkdir()
        os.chmod(sync, 0o777)
        label = self.DS_LABEL[kind]
        mode = f"job-{kind}"
        drop_caches()
        mems = {"before": self.node_memory(c)}
        t0 = time.time()
        a = c.popen_user(self.ds_cmd(spec, probe, self.ds_bound([PYTHON, c.workload_py, "find", target,
                                                                 "--times", "2", "--sync", sync,
                                                                 "--then-random", c.random_list])))
        self.children.append(a)
        ok = False
        try:
            wait_for(lambda: (sync / "mounted").exists() or a.poll() is not None, 1200,
                     f"the first {kind} job to see {target}", 0.02)
            if a.poll() is None:
                mems["mounted"] = self.node_memory(c)
                (sync / "go-scan").touch()
                wait_for(lambda: (sync / "scanned").exists() or a.poll() is not None, 3600,
                         f"the first {kind} job's find", 0.05)
            if a.poll() is None:
                mems["after find"] = self.node_memory(c)
                self.ds_visible(c, ds, spec, probe, rep, f"{label}, second job")
                drop_caches()
                (sync / "go-random").touch()
                wait_for(lambda: (sync / "randomed").exists() or a.poll() is not None, 3600,
                         f"the first {kind} job's random reads", 0.05)
            if a.poll() is None:
                mems["after random"] = self.node_memory(c)
                ok = True
        finally:
            for f in ("go-scan", "go-random", "go-end"):
                (sync / f).touch()
            try:
                out, err = a.communicate(timeout=600)
            except subprocess.TimeoutExpired:
                os.killpg(a.pid, signal.SIGKILL)
                out, err = a.communicate()
        lines = out.split("\n")
        try:
            seen = float(lines[0]) - t0
        except ValueError:
            seen = None
        if not ok or a.returncode != 0 or seen is None:
            log(f"  {ds.name} {kind} first job: FAILED ({a.returncode}): {err[-800:]}")
            self.add("ds_visible", dataset=ds.name, rep=rep, mode=f"{label}, first job", seconds="",
                     note="failed: " + " ".join(err[-300:].split()))
            return
        self.add("ds_visible", dataset=ds.name, rep=rep, mode=f"{label}, first job",
                 seconds=round(seen, 4))
        log(f"  {ds.name:4} {label + ', first job':26} visible after {seen:.3f} s")
        recs = [json.loads(line) for line in lines if line.startswith("{")]
        self.ds_add_scans(ds, mode, rep, recs)
        for state, m in mems.items():
            self.add("ds_memory", dataset=ds.name, rep=rep, mode=kind, state=state, **m)
        base = mems["before"]
        after = mems["after find"]
        log(f"  {ds.name:4} {kind} memory after find: squashd {after.get('squashd_pss_kib')} KiB PSS, "
            f"{after['readers']} readers ({after['readers_threads']} threads) "
            f"{after['readers_pss_kib']} KiB PSS, slab "
            f"+{(after['slab_kib'] - base['slab_kib']) / 1024:.0f} MiB; node mounts "
            f"{ {k[12:]: v for k, v in after.items() if k.startswith('node_mounts_')} }; squashctl "
            f"{ {k[7:]: v for k, v in after.items() if k.startswith('mounts_')} }")

    # Two jobs at once: each prints when it sees PROBE and how many entries
    # the target's top holds, says so (DIR/seen-NAME), and holds its mounts
    # until the caller lets it go (DIR/go-end).
    BOTH = ('stat -c %n "$1" >/dev/null || exit 3; date +%s.%N; ls "$2" | wc -l; : >"$3/seen-$4"; '
            'i=0; while [ ! -e "$3/go-end" ] && [ $i -lt 6000 ]; do sleep 0.05; i=$((i+1)); done')

    def ds_concurrent(self, c, ds, info, d, rep):
        """Two jobs of one user at once, each with all the bundles, under
        squashd's default settings (no fuse_union line) and, when squashd
        knows it, `fuse_union = no`: the same bundles in both jobs, then
        distinct copies (2 x 1,024 distinct images). Both must see the
        whole tree while the other holds its mounts."""
        copy = c.imgdir / f"{ds.name}-copy"
        if not copy.exists():
            copy.mkdir()
            os.chmod(copy, 0o755)
            for b in sorted(d.glob("b*.sqfs")):
                shutil.copy(b, copy / b.name)
        settings = [None]
        if not self.meta.get("fuse_union", "").startswith("unknown"):
            settings.append("no")
        target = f"/squash/{ds.name}"
        probe = f"{target}/{info['probe']}"
        for setting in settings:
            if not self.set_fuse_union(c, setting) and setting is not None:
                continue
            sname = "default settings" if setting is None else f"fuse_union = {setting}"
            for variant, dirs in (("same bundles", (d, d)), ("distinct bundles", (d, copy))):
                c.wait_no_mounts(900)
                wait_for(lambda: not c.fuse_servers(), 120, "FUSE readers to exit", 0.1)
                sync = c.work / f"sync-both-{ds.name}-{rep}-{setting}-{variant.split()[0]}"
                sync.mkdir()
                os.chmod(sync, 0o777)
                drop_caches()
                t0 = time.time()
                jobs = []
                for name, dd in zip("AB", dirs):
                    cmd = ["srun", "-Q", "-n1", f"--squash-image={dd}/b*.sqfs:{target}", "/bin/sh", "-c",
                           self.BOTH, "sh", probe, target, sync, name]
                    p = c.popen_user(cmd)
                    self.children.append(p)
                    jobs.append(p)
                mems = None
                try:
                    wait_for(lambda: all((sync / f"seen-{n}").exists() or p.poll() is not None
                                         for n, p in zip("AB", jobs)), 900,
                             "two concurrent jobs to see the tree", 0.05)
                    if all((sync / f"seen-{n}").exists() for n in "AB"):
                        mems = self.node_memory(c)
                finally:
                    (sync / "go-end").touch()
                    res = []
                    for p in jobs:
                        try:
                            out, err = p.communicate(timeout=300)
                        except subprocess.TimeoutExpired:
                            os.killpg(p.pid, signal.SIGKILL)
                            out, err = p.communicate()
                        res.append((p.returncode, out, err))
                seen, tops, errs = [], [], []
                for rc, out, err in res:
                    w = out.split()
                    try:
                        seen.append(round(float(w[0]) - t0, 4))
                        tops.append(int(w[1]))
                    except (IndexError, ValueError):
                        seen.append(None)
                        tops.append(None)
                    if rc != 0:
                        errs.append(f"exit {rc}: " + " ".join(err[-300:].split()))
                ok = not errs and all(t == info["tops"] for t in tops)
                row = {"dataset": ds.name, "rep": rep, "mode": variant, "settings": sname,
                       "ok": "yes" if ok else "no",
                       "seconds": max(s for s in seen if s is not None) if any(seen) else "",
                       "seen_a": seen[0], "seen_b": seen[1], "tops_a": tops[0], "tops_b": tops[1]}
                if mems:
                    row.update({k: mems.get(k) for k in ("readers", "readers_threads", "readers_pss_kib",
                                                         "node_mounts_fuse", "node_mounts_overlay",
                                                         "squashd_pss_kib")})
                if errs:
                    row["note"] = "failed: " + " | ".join(errs)
                self.add("ds_concurrent", **row)
                log(f"  {ds.name:4} two jobs at once, {variant}, {sname}: "
                    f"{'both see the tree' if ok else 'FAILED'}; seen after {seen}, tops {tops}"
                    + (f"; readers {mems.get('readers')} ({mems.get('readers_threads')} threads), "
                       f"node FUSE mounts {mems.get('node_mounts_fuse')}" if mems else "")
                    + (f"; {errs}" if errs else ""))
        self.set_fuse_union(c, None)

    # ---------------------------------------------------------------- main
    def main(self):
        a = self.args
        self.product_format = Formats(a.product_format or a.formats.split(",")[0]).name
        self.meta.update({
            "command": " ".join(sys.argv), "started": dt.datetime.now().isoformat(timespec="seconds"),
            "host": platform.node(), "kernel": platform.release(), "cpus": os.cpu_count(),
            "mem_gib": round(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30, 1),
            "loadavg_start": os.getloadavg(), "args": vars(a),
            "squashfuse": run(["dpkg-query", "-W", "-f", "${Version}", "squashfuse"], check=False).stdout,
            "squashfs_tools": run(["dpkg-query", "-W", "-f", "${Version}", "squashfs-tools"], check=False).stdout,
            "slurm": run(["dpkg-query", "-W", "-f", "${Version}", "slurmd"], check=False).stdout,
            "python": run([PYTHON, "-V"]).stdout.strip(),
            "git": run(["git", "-C", REPO, "describe", "--always", "--dirty"], check=False).stdout.strip(),
            "release": os_release(), "matrix_suite": os.environ.get("SQUASH_MATRIX_SUITE", ""),
        })
        if a.datasets:
            self.out.mkdir(parents=True, exist_ok=True)
            (self.cache / "mnt").mkdir(parents=True, exist_ok=True)
            self.datasets_main()
            return self.finish()
        self.out.mkdir(parents=True, exist_ok=True)
        with self.locked("the run"):
            self.main_locked()
        self.finish()

    def main_locked(self):
        """Setup, parts 1 and 2, under --lock (if given)."""
        a = self.args
        self.setup()
        self.elapsed_note("setup done")
        need_cluster = (not a.no_product and any(m.startswith("job-") for m in a.modes.split(","))) \
            or not a.no_cost
        if need_cluster:
            self.cluster = Cluster(self)
            self.clusters.append(self.cluster)
            self.cluster.start()
        self.make_modes()
        if a.workloads:
            self.part1()
            self.elapsed_note("part 1 done")
        self.save()
        if not a.no_cost and self.cluster:
            self.part2()
            self.elapsed_note("part 2 (cluster with the plugin) done")
            self.cluster.stop()
            self.cluster.remove()
            self.cluster = None
            self.baseline()
            self.elapsed_note("part 2 done")

    def finish(self):
        self.meta["seconds"] = round(time.monotonic() - self.t_start)
        self.meta["loadavg_end"] = os.getloadavg()
        self.save()
        import report  # noqa: E402 - only now, with matplotlib from the venv
        report.write(self.out, self.rows, self.meta)
        log(f"report: {self.out / 'report.md'} ({self.meta['seconds']} s in all)")

    def save(self):
        keys = []
        for r in self.rows:
            for k in r:
                if k not in keys:
                    keys.append(k)
        with open(self.out / "results.csv", "w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=keys)
            w.writeheader()
            for r in self.rows:
                w.writerow(r)
        (self.out / "meta.json").write_text(json.dumps(self.meta, indent=1, default=str))

    def cleanup(self):
        for m in self.modes:
            with contextlib.suppress(Exception):
                m.stop()
        for p in self.children:
            if p.poll() is None:
                with contextlib.suppress(Exception):
                    os.killpg(p.pid, signal.SIGKILL)
        for c in self.clusters:
            with contextlib.suppress(Exception):
                c.stop()
                c.remove()
        cleanup_only(self.cache)


def cleanup_only(cache):
    """Removes whatever an earlier run of the benchmark left: mounts under
    CACHE/mnt, its FUSE servers (slowfs, squashfuse_ll on CACHE's files),
    loop devices on CACHE's files, the clusters it listed in
    CACHE/clusters.txt, the fuse module's
    enable_uring as a reader-uring run found it. Touches nothing else."""
    cache = Path(cache)
    prefix = str(cache / "mnt") + "/"
    saved = cache / "mnt" / "enable_uring.saved"
    for _ in range(3):
        mps = sorted((mp for mp, _ in mountpoints() if mp.startswith(prefix)), key=len, reverse=True)
        for mp in mps:
            subprocess.run(["umount", "-l", mp], stderr=subprocess.DEVNULL)
        if not mps:
            break
    # Loop devices of the kernel-VARIANT modes (attached without
    # autoclear); a device still mounted is detached when unmounted.
    for back in Path("/sys/block").glob("loop*/loop/backing_file"):
        with contextlib.suppress(OSError):
            if back.read_text().startswith(str(cache) + "/"):
                subprocess.run(["losetup", "-d", f"/dev/{back.parent.parent.name}"],
                               stderr=subprocess.DEVNULL)
    me = os.getpid()
    for p in Path("/proc").iterdir():
        if not p.name.isdigit() or int(p.name) == me:
            continue
        try:
            comm = (p / "comm").read_text().strip()
            if comm not in ("slowfs", "squashfuse_ll", "squash-reader"):
                continue
            argv = (p / "cmdline").read_bytes().split(b"\0")
            if any(a.startswith(str(cache).encode() + b"/") for a in argv):
                os.kill(int(p.name), signal.SIGKILL)
        except (OSError, ProcessLookupError):
            continue
    # A reader-uring run sets the fuse module's enable_uring: back to the
    # value it had before the run.
    if saved.exists():
        with contextlib.suppress(OSError):
            set_enable_uring(saved.read_text().strip())
            saved.unlink()
    lst = cache / "clusters.txt"
    if lst.exists():
        for d in lst.read_text().split():
            if Path(d).exists():
                subprocess.run([str(CLUSTER_SH), "stop", d], stdout=subprocess.DEVNULL,
                               stderr=subprocess.DEVNULL, timeout=300)
                left = [mp for mp, _ in mountpoints() if mp.startswith(d + "/")]
                if not left:
                    shutil.rmtree(d, ignore_errors=True)
        lst.unlink()


def parse_args(argv):
    cache = os.environ.get("BENCH_CACHE", "/var/tmp/squash-bench")
    ap = argparse.ArgumentParser(
        prog="tests/bench/run.sh",
        description="The slurm-squash benchmark (run as root through tests/bench/run.sh).")
    ap.add_argument("--quick", action="store_true",
                    help="a few minutes: small stack (numpy, sympy), 256 MiB file, 1 repetition, "
                         "gzip and lz4 only, 3 cost repetitions")
    ap.add_argument("--out", help="output directory (default CACHE/results/DATE[-quick])")
    ap.add_argument("--cache", default=cache, help=f"cache directory (default {cache}, or $BENCH_CACHE)")
    ap.add_argument("--stack", choices=["full", "quick"], help="which pinned stack (stack-*.txt)")
    ap.add_argument("--bigfile-mib", type=int, help="size of the large file (default 1024; quick 256)")
    ap.add_argument("--formats", help="image formats COMP:BLOCK,... "
                                      "(default gzip:128K,lz4:128K,zstd:128K; quick gzip:128K,lz4:128K; "
                                      "none:BLOCK: uncompressed)")
    ap.add_argument("--product-format", help="format of the job-* modes and part 2 (default: the first)")
    ap.add_argument("--modes", default="slowfs,local,kernel,fuse,reader,job-kernel,job-fuse",
                    help="modes of part 1 (kernel, fuse and reader run once per format); "
                         "slow-kernel, slow-fuse, slow-reader (not by default): the same with "
                         "the image file behind slowfs (--delay-us, --read-delay-us, --bw-mib); "
                         "kernel-VARIANT, slow-kernel-VARIANT: the loop device attached with "
                         "VARIANT's settings joined by '-': dio (direct I/O), raN (read_ahead_kb), "
                         "bsN (logical block size), seq (fadvise SEQUENTIAL on the image), "
                         "e.g. slow-kernel-dio-ra1024; "
                         "kernel-profiled, fuse-profiled, reader-profiled and slow-kernel-profiled, "
                         "slow-fuse-profiled, slow-reader-profiled (not by default): the same over "
                         "an image with a start profile of the import workload (contrib/squash-pack "
                         "--profile, the plain image's compression, level and block size; made "
                         "once per tree and format), which squash-reader reads ahead at mount; "
                         "reader-uring (not by default): squash-reader over FUSE io_uring, the "
                         "fuse module's enable_uring set to Y for each of its mounts and to N "
                         "for the reader mode's and after (machine-wide: nothing else should "
                         "mount FUSE meanwhile), its value before the run restored at the end; "
                         "needs a reader built against libfuse >= 3.18 with liburing (Debian "
                         "sid's libfuse is built without: docs/performance.md section 11)")
    ap.add_argument("--workloads", default="import,stat,md5,read,start",
                    help="workloads of part 1 (empty: skip part 1)")
    ap.add_argument("--extra-fuse", action="append", default=[], metavar="NAME=PATH",
                    help="one more FUSE mode per format, NAME:FMT, served by the squashfuse_ll at "
                         "PATH (e.g. a multithreaded upstream build, or another squash-reader); "
                         "may be given twice; with slow-NAME, NAME-profiled or slow-NAME-profiled in --modes "
                         "those too (then NAME:FMT only if NAME is in --modes)")
    ap.add_argument("--product-squashfuse", metavar="PATH",
                    help="the squashfuse_ll squashd runs for the job-fuse mode and part 2 "
                         "(default: the one on PATH, as installed)")
    ap.add_argument("--ns", default="1,2,8,32", help="process counts of the start workload")
    ap.add_argument("--start-formats", help="image formats of the start workload "
                                            "(default: the first two)")
    ap.add_argument("--start-warm", action="store_true", help="also a warm run of the start workload")
    ap.add_argument("--reps", type=int, help="repetitions of part 1 (default 3; quick 1)")
    ap.add_argument("--start-reps", type=int, help="repetitions of the start workload (default 2; quick 1)")
    ap.add_argument("--delay-us", type=int, default=300,
                    help="slowfs delay per metadata request in microseconds (default 300)")
    ap.add_argument("--read-delay-us", type=int, default=300,
                    help="slowfs delay per read request in microseconds (default 300)")
    ap.add_argument("--bw-mib", type=int, default=0,
                    help="slowfs bandwidth in MiB/s shared by its reads (default 0: no cap)")
    ap.add_argument("--slowfs-cache-s", type=float, default=3600,
                    help="how long the kernel may cache slowfs's entries and attributes, negative "
                         "ones included (default 3600: for the whole run, as a Lustre client keeps "
                         "metadata under its locks; 0: every lookup and stat goes to the server)")
    ap.add_argument("--no-product", action="store_true", help="skip the job-* modes")
    ap.add_argument("--no-cost", action="store_true", help="skip part 2 (the product's own cost)")
    ap.add_argument("--cost-reps", type=int, help="repetitions of srun/sbatch per condition (default 10; quick 3)")
    ap.add_argument("--burst-ns", default="1,16,64,128", help="simultaneous requests per burst")
    ap.add_argument("--state-dir-disk", action="store_true",
                    help="keep squashd's state_dir on the cluster's disk (/tmp) instead of a tmpfs")
    ap.add_argument("--burst-reps", type=int, help="repetitions of each burst (default 2; quick 1)")
    ap.add_argument("--mem-images", type=int, help="images mounted for the memory numbers (default 256; quick 64)")
    ap.add_argument("--datasets", nargs="?", const="hcp,1m", metavar="LIST",
                    help="instead of parts 1 and 2: the dataset benchmark (docs/performance.md, "
                         "section 12) on the synthetic datasets LIST (default hcp,1m; "
                         "tests/bench/dataset.py): find cold and warm and 10,000 random files "
                         "read cold, over the tree on local disk, behind slowfs and through "
                         "the bundles merged in a job (kernel bundles by overlayfs; FUSE "
                         "bundles by overlayfs, squashd.conf fuse_union = no, and as one "
                         "squash-reader union, fuse_union = yes: skipped, saying so, with a "
                         "squashd that does not know the setting), the time until a job sees "
                         "the merged tree, node memory, reader threads; for 1m two concurrent "
                         "1,024-bundle jobs of one user; --reps repetitions, one cluster per "
                         "dataset and repetition, the datasets interleaved")
    ap.add_argument("--lock", default=os.environ.get("BENCH_LOCK"), metavar="FILE",
                    help="hold flock(FILE) (the machine's cluster lock; default $BENCH_LOCK) "
                         "during the run: setup (images made) and parts 1 and 2; with "
                         "--datasets during each dataset's repetition, released between")
    ap.add_argument("--ds-modes", default="local,slowfs,job-kernel,job-fuse-overlay,job-fuse-union",
                    help="with --datasets: the columns (default all: local, slowfs, job-kernel, "
                         "job-fuse-overlay, job-fuse-union)")
    ap.add_argument("--ds-bind", type=int, metavar="CPU",
                    help="with --datasets: every listing and random read (in a job or not) bound "
                         "to CPU (taskset), as a site's task binding binds a job's tasks")
    ap.add_argument("--no-concurrent", action="store_true",
                    help="with --datasets: skip the two concurrent 1,024-bundle jobs of one user "
                         "(1m set)")
    ap.add_argument("--cleanup-only", action="store_true", help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    q = a.quick

    def dflt(name, full, quick):
        if getattr(a, name) is None:
            setattr(a, name, quick if q else full)
    dflt("stack", "full", "quick")
    dflt("bigfile_mib", 1024, 256)
    dflt("formats", "gzip:128K,lz4:128K,zstd:128K", "gzip:128K,lz4:128K")
    dflt("reps", 3, 1)
    dflt("start_reps", 2, 1)
    dflt("cost_reps", 10, 3)
    dflt("burst_reps", 2, 1)
    dflt("mem_images", 256, 64)
    dflt("start_formats", ",".join(a.formats.split(",")[:2]), ",".join(a.formats.split(",")[:2]))
    if a.no_product:
        a.modes = ",".join(m for m in a.modes.split(",") if not m.startswith("job-"))
    if not a.out:
        a.out = str(Path(a.cache) / "results" /
                    (dt.datetime.now().strftime("%Y%m%d-%H%M%S") + ("-quick" if q else "") +
                     ("-datasets" if a.datasets else "")))
    return a


def os_release():
    """PRETTY_NAME of /etc/os-release (the root's, in a tests/matrix root)."""
    with contextlib.suppress(OSError):
        for line in Path("/etc/os-release").read_text().splitlines():
            if line.startswith("PRETTY_NAME="):
                return line.partition("=")[2].strip('"')
    return ""


def main(argv):
    a = parse_args(argv)
    if os.geteuid() != 0:
        raise SystemExit("bench.py: run as root (tests/bench/run.sh)")
    if a.cleanup_only:
        cleanup_only(a.cache)
        return 0
    suite = os.environ.get("SQUASH_MATRIX_SUITE")
    if suite and {"import", "start"} & set(a.workloads.split(",")):
        raise SystemExit(f"bench.py: in the {suite} root the import and start workloads cannot run "
                         "(the tree is the host python's): pass --workloads stat,md5,read")
    sys.path.insert(0, str(HERE))
    sys.dont_write_bytecode = True  # no __pycache__ in the source tree
    b = Bench(a)

    def on_signal(signum, frame):
        raise KeyboardInterrupt
    signal.signal(signal.SIGTERM, on_signal)
    try:
        b.main()
    except KeyboardInterrupt:
        log("interrupted: cleaning up")
        b.save()
        return 130
    finally:
        b.cleanup()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
