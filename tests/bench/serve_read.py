#!/usr/bin/env python3
"""A cold sequential read of one large file through squash-reader --serve
(as squashd has it served), with the reader's polling worker off and on
(--poll-us 0 and 200, or the values --poll names; docs/performance.md
section 13), in rotating order, without squashd or a cluster. As root:

    flock /tmp/squash-cluster.lock tests/bench/serve_read.py [--reps 6] [--mib 512] [--poll 0,200]

The kernel sends a file's readahead as several READ requests at once; a
worker that kept the others off the set while it polled would serve them
one after another. Prints min and median per setting; the image (zstd,
half random and half text, about 2:1) is made once in the cache."""

import argparse
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from union_alone import READER, Mounts, drop_caches, serve_union  # noqa: E402

CACHE = Path(os.environ.get("BENCH_CACHE", "/var/tmp/squash-bench")) / "serve-read"


def image(mib):
    img = CACHE / f"big-{mib}.sqfs"
    if img.exists():
        return img
    CACHE.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=CACHE) as src:
        rng = random.Random(17)
        noise = rng.randbytes(1 << 15)
        text = (b"the quick brown fox jumps over the lazy dog\n" * 800)[: 1 << 15]
        with open(Path(src) / "big.bin", "wb") as f:
            for _ in range(mib * 16):  # 64 KiB per round
                f.write(noise)
                f.write(text)
        subprocess.run(["mksquashfs", src, img, "-comp", "zstd", "-noappend", "-quiet", "-no-progress"],
                       check=True)
    return img


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--reps", type=int, default=6)
    ap.add_argument("--mib", type=int, default=512)
    ap.add_argument("--reader", default=str(READER))
    ap.add_argument("--poll", default="0,200",
                    help="the --poll-us values compared, comma-separated (a value twice: a control)")
    ap.add_argument("--settle", type=float, default=0.0,
                    help="seconds to wait after dropping the caches, before the read")
    a = ap.parse_args()
    img = image(a.mib)
    settings = [(f"poll-us {us} #{i + 1}", ["--poll-us", us]) for i, us in enumerate(a.poll.split(","))]
    res = {name: [] for name, _ in settings}
    with tempfile.TemporaryDirectory(prefix="serve-read.") as where:
        for rep in range(a.reps):
            for name, extra in settings[rep % len(settings):] + settings[:rep % len(settings)]:
                m = Mounts(Path(tempfile.mkdtemp(dir=where)))
                try:
                    d = m.dir("u")
                    serve_union(a.reader, [img], d, m, extra)
                    drop_caches()
                    time.sleep(a.settle)
                    t0 = time.monotonic()
                    with open(d / "big.bin", "rb") as f:
                        while f.read(1 << 20):
                            pass
                    s = time.monotonic() - t0
                finally:
                    m.close()
                res[name].append(s)
                print(f"rep {rep + 1} {name}: {s:.3f} s, {a.mib / s:.0f} MiB/s", flush=True)
    print(f"\n{a.mib} MiB, cold, {a.reps} repetitions; median (min)")
    for name, v in res.items():
        print(f"{name:16} {statistics.median(v):.3f} s ({min(v):.3f} s)  "
              f"{a.mib / statistics.median(v):.0f} MiB/s")


if __name__ == "__main__":
    main()
