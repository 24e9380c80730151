#!/usr/bin/env python3
"""Synthetic datasets for the benchmark's --datasets mode (bench.py):
a tree of many small files on local disk, split by its top-level
directories into squashfs bundles, as a site packs a large fixed dataset.
Deterministic (a fixed seed per dataset: the same names, sizes and bytes on
every machine) and cached: the tree and the bundles are made once into
CACHE/datasets/NAME/ and reused while the stamp (the dataset's parameters
and this file's generator version) is unchanged.

    dataset.py CACHE NAME      # make (or check) one dataset, print its summary

Datasets:

  hcp  shaped like the Human Connectome Project subset of Rioux et al.
       ("Deploying large fixed file datasets with SquashFS and
       Singularity", Table 2): 1,113 subject directories, 186,432 files and
       directories in all, packed 20 subjects to a bundle: 56 bundles (the
       last holds 13). Each subject has the same 13 directories
       (unprocessed/3T/..., MNINonLinear/Results/..., T1w/...) and 154 or
       155 files spread over them.
  1m   1,024 top-level directories, one per bundle, each with 32
       subdirectories of 31 files: 1,015,808 files, 1,049,600 files and
       directories, 1,024 bundles (the most a job may have).

The files are small (0-2 KiB of text: a listing does not read them); the
bundles are made as contrib/squash-pack makes images (zstd level 9,
128 KiB blocks, root-owned, no xattrs), one mksquashfs per bundle with the
bundle's top-level directories as its sources, two at a time.
"""

import hashlib
import json
import os
import random
import shutil
import subprocess
import sys
import time
from pathlib import Path

VERSION = 1  # bump when the generator changes: the cached trees are remade
MKSQUASHFS_ARGS = ["-comp", "zstd", "-Xcompression-level", "9", "-b", "128K",
                   "-all-root", "-no-xattrs", "-noappend", "-no-progress", "-quiet",
                   "-processors", "1", "-keep-as-directory"]

# One HCP subject: 13 directories below the subject's own (14 with it).
HCP_DIRS = [
    "unprocessed", "unprocessed/3T", "unprocessed/3T/T1w_MPR1", "unprocessed/3T/rfMRI_REST1_LR",
    "unprocessed/3T/tfMRI_WM_LR", "MNINonLinear", "MNINonLinear/Results",
    "MNINonLinear/Results/rfMRI_REST1_LR", "MNINonLinear/Results/tfMRI_WM_LR",
    "MNINonLinear/fsaverage_LR32k", "T1w", "T1w/Diffusion", "release-notes",
]
# Where a subject's files go (weights: the Results and fsaverage directories
# hold most, as in the real layout).
HCP_WEIGHTS = [0, 0, 8, 10, 10, 6, 0, 30, 30, 25, 10, 12, 2]
HCP_EXT = [".nii.gz", ".dtseries.nii", ".surf.gii", ".txt", ".json", ".csv", ".func.gii"]


class Dataset:
    def __init__(self, cache, name):
        self.name = name
        self.dir = Path(cache) / "datasets" / name
        self.tree = self.dir / "tree"
        self.bundles_dir = self.dir / "bundles"
        if name == "hcp":
            self.params = {"subjects": 1113, "entries": 186432, "per_bundle": 20, "seed": 24}
        elif name == "1m":
            self.params = {"tops": 1024, "subdirs": 32, "files": 31, "per_bundle": 1, "seed": 1024}
        else:
            raise SystemExit(f"unknown dataset {name} (hcp, 1m)")
        self.stamp = self.dir / "stamp.json"

    # ------------------------------------------------------------ layout
    def tops(self):
        """The top-level directory names, sorted (= bundle order)."""
        p = self.params
        if self.name == "hcp":
            rng = random.Random(p["seed"])
            ids = set()
            while len(ids) < p["subjects"]:
                ids.add(rng.randrange(100000, 1000000))
            return [str(i) for i in sorted(ids)]
        return [f"part{i:04d}" for i in range(p["tops"])]

    def groups(self):
        t = self.tops()
        k = self.params["per_bundle"]
        return [t[i:i + k] for i in range(0, len(t), k)]

    def want_stamp(self):
        return {"version": VERSION, "name": self.name, "params": self.params,
                "mksquashfs": MKSQUASHFS_ARGS}

    def ready(self):
        try:
            s = json.loads(self.stamp.read_text())
        except (OSError, ValueError):
            return None
        if s.get("want") != self.want_stamp():
            return None
        if len(list(self.bundles_dir.glob("b*.sqfs"))) != s.get("bundles"):
            return None
        return s

    def random_files(self, n=10_000, seed=31):
        """n files of the tree (paths relative to its top), picked at random
        with a fixed seed: the same list on every run and for every way of
        mounting the set (union_alone.py picks the same ones). Cached in
        DIR/random-N.txt, one path a line, while the dataset is unchanged."""
        f = self.dir / f"random-{n}.txt"
        stamp = self.stamp.stat().st_mtime if self.stamp.exists() else 0
        if f.exists() and f.stat().st_mtime >= stamp:
            return f
        files = sorted(os.path.relpath(os.path.join(r, x), self.tree)
                       for r, _, fs in os.walk(self.tree) for x in fs)
        picks = random.Random(seed).sample(files, min(n, len(files)))
        tmp = f.with_suffix(".tmp")
        tmp.write_text("".join(p + "\n" for p in picks))
        os.chmod(tmp, 0o644)
        tmp.rename(f)
        return f

    # ------------------------------------------------------------ making
    def _write(self, path, rng):
        n = rng.randrange(0, 2048)
        line = f"{path.name} {rng.getrandbits(64):016x}\n".encode()
        data = (line * (n // len(line) + 1))[:n]
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            os.write(fd, data)
        finally:
            os.close(fd)

    def _make_hcp(self, log):
        p = self.params
        tops = self.tops()
        per_subject = len(HCP_DIRS) + 1  # its directories, its own included
        files_total = p["entries"] - per_subject * len(tops)
        base, extra = divmod(files_total, len(tops))
        rng = random.Random(p["seed"] + 1)
        cum = []
        acc = 0
        for w in HCP_WEIGHTS:
            acc += w
            cum.append(acc)
        for i, sid in enumerate(tops):
            s = self.tree / sid
            for d in [""] + HCP_DIRS:
                (s / d).mkdir(parents=True, exist_ok=True)
            nfiles = base + (1 if i < extra else 0)
            for j in range(nfiles):
                r = rng.random() * acc
                d = HCP_DIRS[next(k for k, c in enumerate(cum) if r < c)]
                name = f"{sid}_{d.rsplit('/', 1)[-1]}_{j:03d}{HCP_EXT[j % len(HCP_EXT)]}"
                self._write(s / d / name, rng)
            if i % 200 == 199:
                log(f"  {i + 1} of {len(tops)} subjects")

    def _make_1m(self, log):
        p = self.params
        rng = random.Random(p["seed"])
        for i, top in enumerate(self.tops()):
            for sd in range(p["subdirs"]):
                d = self.tree / top / f"d{sd:02d}"
                d.mkdir(parents=True)
                for f in range(p["files"]):
                    self._write(d / f"f{f:02d}.dat", rng)
            if i % 128 == 127:
                log(f"  {i + 1} of {len(self.tops())} directories")

    def ensure(self, log=lambda m: print(m, file=sys.stderr)):
        s = self.ready()
        if s:
            return s
        if self.dir.exists():
            shutil.rmtree(self.dir)
        self.tree.mkdir(parents=True)
        self.bundles_dir.mkdir()
        log(f"dataset {self.name}: writing the tree {self.tree}")
        t0 = time.monotonic()
        getattr(self, f"_make_{self.name}")(log)
        os.chmod(self.dir, 0o755)
        os.chmod(self.tree, 0o755)
        gen = time.monotonic() - t0
        entries = sum(len(ds) + len(fs) for _, ds, fs in os.walk(self.tree))
        files = sum(len(fs) for _, _, fs in os.walk(self.tree))
        groups = self.groups()
        log(f"dataset {self.name}: {entries} entries ({files} files) in {gen:.0f} s; "
            f"packing {len(groups)} bundles")
        t0 = time.monotonic()
        # One mksquashfs per bundle, two at a time, each on one thread.
        script = ("set -e; out=$1; shift; cd \"$TREE\"; "
                  "exec mksquashfs \"$@\" \"$out\" " + " ".join(MKSQUASHFS_ARGS))
        lines = []
        for i, g in enumerate(groups):
            lines.append("\0".join([str(self.bundles_dir / f"b{i:04d}.sqfs"), *g]))
        procs = []
        env = dict(os.environ, TREE=str(self.tree))
        pending = list(lines)
        while pending or procs:
            while pending and len(procs) < 2:
                args = pending.pop(0).split("\0")
                procs.append(subprocess.Popen(["bash", "-c", script, "pack", *args], env=env,
                                              stdout=subprocess.DEVNULL))
            procs[0].wait()
            if procs[0].returncode != 0:
                raise RuntimeError(f"mksquashfs failed for {self.name}")
            procs.pop(0)
        pack = time.monotonic() - t0
        for b in self.bundles_dir.glob("*.sqfs"):
            os.chmod(b, 0o644)
        os.chmod(self.bundles_dir, 0o755)
        size = sum(b.stat().st_size for b in self.bundles_dir.glob("*.sqfs"))
        tree_bytes = sum(os.lstat(os.path.join(r, f)).st_blocks * 512
                         for r, _, fs in os.walk(self.tree) for f in fs)
        h = hashlib.sha256()
        for b in sorted(self.bundles_dir.glob("*.sqfs")):
            h.update(b.name.encode())
        s = {"want": self.want_stamp(), "entries": entries, "files": files,
             "dirs": entries - files, "tops": len(self.tops()), "bundles": len(groups),
             "bundle_bytes": size, "tree_disk_bytes": tree_bytes,
             "generate_seconds": round(gen, 1), "pack_seconds": round(pack, 1),
             "probe": f"{self.tops()[-1]}"}
        self.stamp.write_text(json.dumps(s, indent=1))
        log(f"dataset {self.name}: {len(groups)} bundles, {size / 2**20:.0f} MiB, "
            f"packed in {pack:.0f} s")
        return s


if __name__ == "__main__":
    if len(sys.argv) != 3:
        raise SystemExit(__doc__)
    print(json.dumps(Dataset(sys.argv[1], sys.argv[2]).ensure(), indent=1))
