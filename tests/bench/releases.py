#!/usr/bin/env python3
"""The readers on each release: one table and one plot from several runs of
tests/bench/run.sh (one per Debian release: the host, and tests/matrix roots).

    python3 tests/bench/releases.py [--format zstd-128k] OUT LABEL=RESULTDIR [LABEL=RESULTDIR...]

Reads each RESULTDIR/results.csv and meta.json, writes OUT/readers-releases.md
(a row per release x reader: median seconds, min, and the ratio to the kernel
mount of the same run) and, with matplotlib (the benchmark's venv),
OUT/readers-releases.png.

Ratios: median of the reader / median of the kernel mount, both from the
same run (interleaved, same image, same repetitions). The range in brackets
is the lowest and highest of the per-repetition ratios (repetition i of the
reader against repetition i of the kernel, measured a few seconds apart).
"within noise" (marked ≈) when that range, to two decimals, includes 1.0.
"""

import csv
import json
import statistics
import sys
from pathlib import Path

READERS = [("kernel", "kernel squashfs"), ("fuse", "squashfuse_ll"), ("reader", "squash-reader")]
CELLS = [("stat", "cold"), ("md5", "cold"), ("import", "cold"),
         ("stat", "warm"), ("md5", "warm"), ("import", "warm")]
TITLES = {"stat": "stat walk", "md5": "md5sum", "import": "import"}


def load(path, fmt):
    path = Path(path)
    rows = list(csv.DictReader(open(path / "results.csv")))
    meta = json.loads((path / "meta.json").read_text())
    times = {}
    shares = []
    for r in rows:
        if r.get("section") != "workload" or not r.get("seconds") or r.get("format") != fmt:
            continue
        kind = r["mode"].split(":")[0]
        times.setdefault((kind, r["workload"], r["cache"]), {})[int(r["rep"])] = float(r["seconds"])
        if r.get("others_cpu_share") and float(r["seconds"]) >= 1.0:
            shares.append(float(r["others_cpu_share"]))
    return meta, times, shares


def cell(times, kind, w, cache):
    t = times.get((kind, w, cache))
    k = times.get(("kernel", w, cache))
    if not t or not k:
        return None
    med = statistics.median(t.values())
    ratio = med / statistics.median(k.values())
    paired = [t[i] / k[i] for i in t if i in k]
    return {"med": med, "min": min(t.values()), "ratio": ratio,
            "lo": min(paired), "hi": max(paired), "n": len(t)}


def fmt_s(v):
    return f"{v:.3f}" if v < 1 else f"{v:.2f}"


def main(argv):
    fmt = "zstd-128k"
    if argv[0] == "--format":
        fmt, argv = argv[1], argv[2:]
    out = Path(argv[0])
    runs = []
    for spec in argv[1:]:
        label, _, path = spec.partition("=")
        runs.append((label, *load(path, fmt)))
    cells = [c for c in CELLS if any(t.get(("kernel", *c)) for _, _, t, _ in runs)]
    head = ["release", "reader"] + [f"{TITLES[w]}, {c}" for w, c in cells]
    md = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    notes = []
    for label, meta, times, shares in runs:
        for kind, title in READERS:
            if not any(times.get((kind, *c)) for c in cells):
                continue
            name = title
            if kind == "fuse":
                name += f" {meta.get('squashfuse', '').split('-')[0]}"
            row = [label, name]
            for w, c in cells:
                x = cell(times, kind, w, c)
                if x is None:
                    row.append("")
                elif kind == "kernel":
                    row.append(f"{fmt_s(x['med'])} s (min {fmt_s(x['min'])})")
                else:
                    noise = " ≈" if round(x["lo"], 2) <= 1.0 <= round(x["hi"], 2) else ""
                    row.append(f"{fmt_s(x['med'])} s: **{x['ratio']:.2f}x**{noise} "
                               f"({x['lo']:.2f}-{x['hi']:.2f})")
            md.append("| " + " | ".join(row) + " |")
        reps = max((len(v) for v in times.values()), default=0)
        share = (f"others' CPU share median {100 * statistics.median(shares):.0f}% "
                 f"(max {100 * max(shares):.0f}%)") if shares else ""
        notes.append(f"- {label}: {meta.get('release', '?')}, kernel {meta.get('kernel')}, "
                     f"squashfuse {meta.get('squashfuse')}, {meta.get('python')}, "
                     f"{reps} repetitions, {meta.get('seconds', '?')} s, {share}")
    text = "\n".join(md + [""] + notes) + "\n"
    (out / "readers-releases.md").write_text(text)
    print(text)

    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("no matplotlib: no plot", file=sys.stderr)
        return 0
    ws = [w for w in ("stat", "md5", "import") if any(x[0] == w for x in cells)]
    fig, axes = plt.subplots(2, len(ws), figsize=(3.4 * len(ws), 6.4), dpi=80, sharey="row",
                             squeeze=False)
    colors = {"fuse": "#1f77b4", "reader": "#2ca02c"}
    ticks = [f"{label}\nsquashfuse {meta.get('squashfuse', '?').split('-')[0]}"
             for label, meta, _, _ in runs]
    for row, c in enumerate(("cold", "warm")):
        for col, w in enumerate(ws):
            ax = axes[row][col]
            width = 0.38
            for j, (kind, title) in enumerate(READERS[1:]):
                xs, ys, lo, hi = [], [], [], []
                for i, (label, meta, times, _) in enumerate(runs):
                    x = cell(times, kind, w, c)
                    if x is None:
                        if j == 0:
                            ax.text(i, 0.5, "not run\n(host python\nonly)", ha="center", fontsize=7)
                        continue
                    xs.append(i + (j - 0.5) * width)
                    ys.append(x["ratio"])
                    lo.append(x["ratio"] - x["lo"])
                    hi.append(x["hi"] - x["ratio"])
                ax.bar(xs, ys, width, yerr=[lo, hi], capsize=3, color=colors[kind],
                       label=title if row == col == 0 else None)
            ax.axhline(1.0, color="#d62728", lw=1, label="kernel squashfs = 1" if row == col == 0 else None)
            ax.axhline(1.3, color="#7f7f7f", lw=0.8, ls="--", label="target 1.3x" if row == col == 0 else None)
            ax.set_xticks(range(len(runs)))
            ax.set_xticklabels(ticks, fontsize=7)
            ax.set_title(f"{TITLES[w]}, {c}", fontsize=9)
            ax.grid(axis="y", alpha=0.3)
        axes[row][0].set_ylabel(f"{c}: time / kernel mount\n(median; bars: range over repetitions)",
                                fontsize=8)
    fig.legend(loc="upper center", ncol=4, fontsize=8)
    fig.tight_layout(rect=(0, 0, 1, 0.94))
    fig.savefig(out / "readers-releases.png")
    print(out / "readers-releases.png")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
