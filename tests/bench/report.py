"""Turns the benchmark's rows (bench.py) into report.md and PNG plots.

    report.write(out_dir, rows, meta)

Can also be run again on a saved result directory:

    CACHE/venv/bin/python tests/bench/report.py RESULT_DIR
"""

import csv
import json
import os
import statistics
import sys
from pathlib import Path

WORKLOADS = ["import", "stat", "md5", "read"]
WL_TITLE = {
    "import": "import of the stack, fresh python",
    "stat": "stat of every file",
    "md5": "md5sum of every file",
    "read": "sequential read of the large file",
}



def goals_section(md, title, rows, how, first):
    """A table of goals met or not, under its title, when there are rows."""
    if not rows:
        return
    md += [title, "", how, "", table([first, "measured", "goal", ""], rows), ""]

def num(v):
    try:
        return float(v)
    except (TypeError, ValueError):
        return None


def format_name(spec):
    """As bench.Formats names them: 'zstd:128K:9' -> 'zstd9-128k'."""
    comp, _, rest = spec.partition(":")
    bs, _, level = rest.partition(":")
    return f"{comp}{level}-{(bs or '128K').lower()}"


def fmt_s(v):
    if v is None:
        return "–"
    if v >= 100:
        return f"{v:.0f} s"
    if v >= 10:
        return f"{v:.1f} s"
    if v >= 1:
        return f"{v:.2f} s"
    return f"{v:.3f} s"


def fmt_ms(v):
    if v is None:
        return "–"
    return f"{v:.0f} ms" if v >= 100 else f"{v:.1f} ms"


def med(vals):
    vals = [v for v in vals if v is not None]
    return statistics.median(vals) if vals else None


def mn(vals):
    vals = [v for v in vals if v is not None]
    return min(vals) if vals else None


def pct(values, p):
    v = sorted(x for x in values if x is not None)
    if not v:
        return None
    k = (len(v) - 1) * p / 100.0
    lo = int(k)
    hi = min(lo + 1, len(v) - 1)
    return v[lo] + (v[hi] - v[lo]) * (k - lo)


class Data:
    def __init__(self, rows, meta):
        self.rows = rows
        self.meta = meta
        self.wl = [r for r in rows if r.get("section") == "workload" and num(r.get("seconds")) is not None]
        self.modes = []
        for r in self.wl:
            if r["mode"] not in self.modes:
                self.modes.append(r["mode"])
        args = meta.get("args", {})
        self.formats = [format_name(f) for f in args.get("formats", "").split(",") if f]
        pf = args.get("product_format") or (args.get("formats", "").split(",") or [""])[0]
        self.pfmt = format_name(pf)

    def times(self, mode, workload, cache, n=1):
        return [num(r["seconds"]) for r in self.wl
                if r["mode"] == mode and r["workload"] == workload and r["cache"] == cache
                and int(r.get("n") or 1) == n]

    def med(self, mode, workload, cache, n=1):
        return med(self.times(mode, workload, cache, n))

    def cell(self, mode, workload, cache, n=1):
        t = self.times(mode, workload, cache, n)
        if not t:
            return "–"
        s = fmt_s(med(t))
        if len(t) > 1:
            s += f" ({fmt_s(min(t))})"
        if workload == "read":
            size = self.meta.get("bigfile_mib")
            if size:
                s += f", {size / med(t):.0f} MiB/s"
        return s

    def main_modes(self):
        """The modes of the side-by-side table: the product's format only."""
        order = ["slowfs", f"kernel:{self.pfmt}", f"fuse:{self.pfmt}"]
        order += [m for m in self.modes if m.endswith(":" + self.pfmt) and m.split(":")[0] not in
                  ("kernel", "fuse", "job-kernel", "job-fuse")]
        order += ["local", f"job-kernel:{self.pfmt}", f"job-fuse:{self.pfmt}"]
        return [m for m in order if m in self.modes]


def table(head, rows):
    out = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in rows:
        out.append("| " + " | ".join(str(x) for x in r) + " |")
    return "\n".join(out)


def mode_title(m):
    t = {"slowfs": "tree on slow FS", "local": "tree on local disk"}
    if m in t:
        return t[m]
    kind, _, fmt = m.partition(":")
    return {"kernel": f"image, kernel ({fmt})", "fuse": f"image, squashfuse_ll ({fmt})",
            "reader": f"image, squash-reader ({fmt})",
            "reader-uring": f"image, squash-reader over io_uring ({fmt})",
            "job-kernel": f"job, kernel ({fmt})", "job-fuse": f"job, FUSE ({fmt})"}.get(
                kind, f"image, {kind} ({fmt})")


# ====================================================================== sections

def part1_tables(d, out):
    md = []
    modes = d.main_modes()
    if not modes:
        return md
    for cache in ("cold", "warm"):
        rows = []
        for w in WORKLOADS:
            if any(d.times(m, w, cache) for m in modes):
                rows.append([WL_TITLE[w] + f", {cache}"] + [d.cell(m, w, cache) for m in modes])
        if rows:
            md.append(f"### Workloads, {cache} (median (min) over repetitions)\n")
            md.append(table(["workload"] + [mode_title(m) for m in modes], rows))
            md.append("")
    # formats
    fmts = [f for f in d.formats if any(m.endswith(":" + f) for m in d.modes)]
    if len(fmts) > 1:
        rows = []
        imgs = d.meta.get("images", {})
        kinds = ["kernel", "fuse"] + sorted({m.split(":")[0] for m in d.modes if ":" in m} -
                                            {"kernel", "fuse", "job-kernel", "job-fuse"})
        for f in fmts:
            for kind in kinds:
                m = f"{kind}:{f}"
                if m not in d.modes:
                    continue
                info = imgs.get(f, {})
                size = f"{info['bytes'] / 2**20:.0f} MiB, {info['build_seconds']:.0f} s" if info else "–"
                rows.append([f, kind, size] + [d.cell(m, w, "cold") for w in WORKLOADS])
        md.append("### Image formats, cold (median (min))\n")
        md.append(table(["format", "reader", "image size, mksquashfs time"] + WORKLOADS, rows))
        md.append("")
    # start pattern
    st = [r for r in d.wl if r["workload"] == "start"]
    if st:
        ns = sorted({int(r["n"]) for r in st})
        smodes = [m for m in d.modes if any(r["mode"] == m for r in st)]
        rows = []
        for n in ns:
            local = d.med("local", "start", "cold", n)
            row = [str(n)]
            for m in smodes:
                v = d.med(m, "start", "cold", n)
                c = fmt_s(v)
                if v is not None and local and m != "local":
                    c += f" ({v / local:.2f}x)"
                row.append(c)
            rows.append(row)
        md.append("### N processes importing the stack at once from one mount, cold "
                  "(median; ratio to local disk)\n")
        md.append(table(["N"] + [mode_title(m) for m in smodes], rows))
        md.append("")
    req = [r for r in d.rows if r.get("section") == "slowfs_requests"]
    if req:
        rows = []
        for w in WORKLOADS + ["start"]:
            for n in sorted({int(r["n"]) for r in req if r["workload"] == w}):
                vals = [num(r["value"]) for r in req if r["workload"] == w and int(r["n"]) == n]
                label = w if w != "start" else f"start, N={n}"
                rows.append([label, f"{med(vals):.0f}"])
        md.append("### Metadata requests that reached the slow filesystem (cold + warm run)\n")
        md.append(table(["workload", "delayed requests"], rows))
        md.append("")
    reads = [r for r in d.rows if r.get("section") == "slowfs_read_requests" and int(r.get("n") or 1) == 1]
    if reads:
        rbytes = [r for r in d.rows if r.get("section") == "slowfs_read_bytes" and int(r.get("n") or 1) == 1]
        ws = [w for w in WORKLOADS if any(r["workload"] == w for r in reads)]
        rows = []
        for m in [m for m in d.modes if any(r["mode"] == m for r in reads)]:
            row = [mode_title(m)]
            for w in ws:
                q = [num(r["value"]) for r in reads if r["mode"] == m and r["workload"] == w]
                b = [num(r["value"]) for r in rbytes if r["mode"] == m and r["workload"] == w]
                c = f"{med(q):.0f}" + (f" ({min(q):.0f}-{max(q):.0f})" if len(q) > 1 else "") if q else "–"
                if b:
                    c += f", {med(b) / 2**20:.0f} MiB"
                row.append(c)
            rows.append(row)
        md.append("### Read requests that reached the slow filesystem (cold + warm run): "
                  "median (range), median MiB\n")
        md.append(table(["mode"] + ws, rows))
        md.append("")
    pss = [r for r in d.wl if num(r.get("server_pss_kib"))]
    if pss:
        rows = []
        for m in [m for m in d.modes if m.split(":")[0] not in
                  ("kernel", "local", "slowfs", "job-kernel", "job-fuse") and ":" in m]:
            for w in WORKLOADS:
                v = [num(r["server_pss_kib"]) for r in pss if r["mode"] == m and r["workload"] == w]
                if v:
                    rows.append([m, w, f"{max(v) / 1024:.1f} MiB"])
        md.append("### FUSE server memory (PSS) after each workload\n")
        md.append(table(["mode", "after workload", "PSS"], rows))
        md.append("")
    return md


def part2_tables(d):
    md = []
    srun = [r for r in d.rows if r.get("section") == "srun" and num(r.get("seconds")) is not None]
    if srun:
        names = []
        for r in srun:
            if r["mode"] not in names:
                names.append(r["mode"])
        base = med([num(r["seconds"]) for r in srun if r["mode"] == "no image"])
        rows = []
        for n in names:
            v = [num(r["seconds"]) * 1000 for r in srun if r["mode"] == n]
            ratio = f"{med(v) / (base * 1000):.3f}" if base else "–"
            rows.append([n, fmt_ms(med(v)), fmt_ms(min(v)), fmt_ms(max(v)), ratio, len(v)])
        md.append("### `srun true` as the user sees it (wall time)\n")
        md.append(table(["condition", "median", "min", "max", "median / no image", "runs"], rows))
        md.append("")
    batch = [r for r in d.rows if r.get("section") == "batch"]
    if batch:
        names = []
        for r in batch:
            if r["mode"] not in names:
                names.append(r["mode"])
        rows = []
        for n in names:
            rs = [r for r in batch if r["mode"] == n]
            a = [num(r.get("alloc_to_task_ms")) for r in rs]
            al = [num(r.get("alloc_to_launch_ms")) for r in rs]
            lt = [num(r.get("launch_to_task_ms")) for r in rs]
            p = [num(r.get("prolog_ms")) for r in rs]
            e = [num(r.get("epilog_ms")) for r in rs]
            rows.append([n, fmt_ms(med(a)), fmt_ms(mn(a)), fmt_ms(med(al)), fmt_ms(med(p)),
                         fmt_ms(med(lt)), fmt_ms(med(e)), len(rs)])
        md.append("### Batch job start from Slurm's logs (debug timestamps, 1 ms resolution)\n")
        md.append("Allocation (slurmctld `sched: Allocate`) to task start (slurmd "
                  "`[JOB.batch] task 0 started`), split at the launch (`Launching batch job`); "
                  "prolog: slurmd's wait for the prolog (inside alloc to launch); launch to task: "
                  "slurmstepd's start and the step's setup (the plugin's bind mounts); epilog: "
                  "`_rpc_terminate_job` to `sent epilog complete`. Medians.\n")
        md.append(table(["condition", "alloc to task", "(min)", "alloc to launch", "prolog",
                         "launch to task", "epilog", "jobs"], rows))
        md.append("")
    steps = [r for r in d.rows if r.get("section") == "step"]
    if steps:
        names = []
        for r in steps:
            if r["mode"] not in names:
                names.append(r["mode"])
        rows = []
        for n in names:
            rs = [r for r in steps if r["mode"] == n]
            w = [num(r.get("wall_ms")) for r in rs]
            lt = [num(r.get("launch_to_task_ms")) for r in rs]
            rows.append([n, fmt_ms(med(w)), fmt_ms(mn(w)), fmt_ms(med(lt)), fmt_ms(mn(lt)), len(rs)])
        md.append("### Job steps: `srun true` inside a batch job\n")
        md.append("Wall time of each `srun` as the job script sees it, and slurmd's step launch "
                  "request to task start (slurmstepd's start and, for a job with images, the "
                  "plugin's StepInfoRequest and bind mounts).\n")
        md.append(table(["job", "srun wall, median", "min", "launch to task, median", "min",
                         "steps"], rows))
        md.append("")
    burst = [r for r in d.rows if r.get("section") == "burst"]
    if burst:
        rows = []
        names = []
        for r in burst:
            if r["mode"] not in names:
                names.append(r["mode"])
        for n in names:
            for k in sorted({int(r["n"]) for r in burst if r["mode"] == n}):
                rs = [r for r in burst if r["mode"] == n and int(r["n"]) == k]
                fails = sum(int(r["failed"]) for r in rs)
                note = next((r["note"] for r in rs if r.get("note")), "")
                rows.append([n, k, fmt_ms(med([num(r["p50_ms"]) for r in rs])),
                             fmt_ms(max([num(r["p99_ms"]) or 0 for r in rs]) or None),
                             fmt_ms(max([num(r["max_ms"]) or 0 for r in rs]) or None),
                             fails, fmt_ms(med([num(r["release_p50_ms"]) for r in rs])),
                             note[:80]])
        md.append("### squashd's answer time to N simultaneous mount requests\n")
        md.append("Each request is a prolog's MountJobRequest for its own job (signed with MUNGE "
                  "beforehand), all let go at once; time from connect to answer. p50: median of "
                  "the repetitions' medians; p99 and max: the worst repetition.\n")
        md.append(table(["scenario", "N", "p50", "p99", "max", "failed", "release p50", "first failure"],
                        rows))
        md.append("")
    mem = [r for r in d.rows if r.get("section") == "memory"]
    if mem:
        def size(kib):
            kib = num(kib)
            return f"{kib / 1024:.1f} MiB" if kib >= 1024 else f"{kib:.0f} KiB"
        rows = [[r["mode"], size(r["rss_kib"]), size(r["pss_kib"])] for r in mem]
        md.append("### Memory\n")
        md.append(table(["what", "RSS", "PSS"], rows))
        md.append("")
    return md


def targets(d):
    """The issue's targets, as ratios measured in this run: from the medians
    (the verdict) and, in brackets, from the minima (least disturbed by the
    other work on a shared machine)."""
    rows = []

    def ratio(a, b):
        return a / b if a is not None and b else None

    def both(ma, wa, mb, wb, cache="cold", n=1, invert=False):
        out = []
        for fn in (med, mn):
            a, b = fn(d.times(ma, wa, cache, n)), fn(d.times(mb, wb, cache, n))
            out.append(ratio(b, a) if invert else ratio(a, b))
        return out

    def line(what, r, goal, ok_fn, digits=2):
        rm, rmin = r
        if rm is None:
            return
        val = f"{rm:.{digits}f}" + (f" ({rmin:.{digits}f})" if rmin is not None else "")
        rows.append([what, val, goal, "met" if ok_fn(rm) else "not met"])

    for fmt in d.formats:
        line(f"cold import, image ({fmt}, kernel) / local disk",
             both(f"kernel:{fmt}", "import", "local", "import"), "≤ 1.2", lambda r: r <= 1.2)
    for fmt in d.formats:
        line(f"cold import, image ({fmt}, FUSE) / local disk",
             both(f"fuse:{fmt}", "import", "local", "import"), "≤ 1.2", lambda r: r <= 1.2)
    for fmt in d.formats:
        for kind in ("kernel", "fuse"):
            line(f"cold large read, image ({fmt}, {kind}) rate / local rate",
                 both(f"{kind}:{fmt}", "read", "local", "read", invert=True), "≥ 0.5",
                 lambda r: r >= 0.5)
    fuse_kinds = ["fuse"] + sorted({m.split(":")[0] for m in d.modes if ":" in m} -
                                   {"kernel", "fuse", "job-kernel", "job-fuse"})
    for fk in fuse_kinds:
        for fmt in d.formats:
            worst = None
            for w in WORKLOADS:
                for cache in ("cold", "warm"):
                    r = both(f"{fk}:{fmt}", w, f"kernel:{fmt}", w, cache)
                    if r[0] is not None and (worst is None or r[0] > worst[0][0]):
                        worst = (r, f"{w}, {cache}")
            if worst:
                line(f"{fk} / kernel, worst workload ({fmt}: {worst[1]})", worst[0], "≤ 1.3",
                     lambda r: r <= 1.3)
    st = [r for r in d.wl if r["workload"] == "start"]
    if st:
        nmax = max(int(r["n"]) for r in st)
        for m in d.modes:
            if m in ("local", "slowfs"):
                continue
            line(f"{nmax} processes at once, {mode_title(m)} / local",
                 both(m, "start", "local", "start", n=nmax), "≤ 1.5", lambda r: r <= 1.5)
    srun = [r for r in d.rows if r.get("section") == "srun" and num(r.get("seconds")) is not None]
    if srun:
        def sv(name, fn):
            return fn([num(r["seconds"]) for r in srun if r["mode"] == name])
        for n in ("kernel, shared mount", "fuse, shared mount"):
            r = [ratio(sv(n, fn), sv("no image", fn)) for fn in (med, mn)]
            line(f"srun, image already mounted ({n.split(',')[0]}) / plain srun", r, "≤ 1.05",
                 lambda x: x <= 1.05, 3)
    burst = [r for r in d.rows if r.get("section") == "burst"]
    for kind, goal in (("kernel", 30), ("fuse", 60)):
        rs = [r for r in burst if r["mode"] == f"distinct images, {kind}" and int(r["n"]) == 1]
        v = med([num(r["p50_ms"]) for r in rs])
        if v is not None:
            rows.append([f"first mount at squashd ({kind}), one request alone", fmt_ms(v),
                         f"≤ {goal} ms", "met" if v <= goal else "not met"])
    for scen in ("same image, kernel", "same image, fuse", "distinct images, kernel",
                 "distinct images, fuse"):
        rs = [r for r in burst if r["mode"] == scen and int(r["n"]) == 128]
        if rs:
            fails = sum(int(r["failed"]) for r in rs)
            p99 = max(num(r["p99_ms"]) or 0 for r in rs)
            rows.append([f"128 simultaneous job starts, {scen}: failures, squashd p99",
                         f"{fails} of {128 * len(rs)}, {fmt_ms(p99)}", "0, < 100 ms",
                         "met" if fails == 0 and p99 < 100 else "not met"])
    return rows


# ====================================================================== plots

def plots(d, out):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    made = []
    modes = d.main_modes()
    colors = {}
    palette = ["#d62728", "#1f77b4", "#ff7f0e", "#2ca02c", "#9467bd", "#8c564b", "#e377c2",
               "#7f7f7f", "#bcbd22", "#17becf"]
    for i, m in enumerate(d.modes):
        colors[m] = palette[i % len(palette)]

    if modes:
        fig, axes = plt.subplots(1, 2, figsize=(10, 4), dpi=80)
        for ax, cache in zip(axes, ("cold", "warm")):
            ws = [w for w in WORKLOADS if any(d.times(m, w, cache) for m in modes)]
            width = 0.8 / max(len(modes), 1)
            for i, m in enumerate(modes):
                vals = [d.med(m, w, cache) or 0 for w in ws]
                ax.bar([x + i * width for x in range(len(ws))], vals, width, label=mode_title(m),
                       color=colors[m])
            ax.set_xticks([x + width * (len(modes) - 1) / 2 for x in range(len(ws))])
            ax.set_xticklabels(ws)
            ax.set_yscale("log")
            ax.set_ylabel("seconds (log)")
            ax.set_title(f"{cache} (median)")
            ax.grid(axis="y", alpha=0.3)
        axes[0].legend(fontsize=7)
        fig.tight_layout()
        fig.savefig(out / "workloads.png")
        plt.close(fig)
        made.append("workloads.png")

    fmts = [f for f in d.formats if f"kernel:{f}" in d.modes or f"fuse:{f}" in d.modes]
    if len(fmts) > 1:
        ws = [w for w in ("import", "stat", "md5", "read") if d.times(f"kernel:{fmts[0]}", w, "cold")]
        fig, axes = plt.subplots(1, len(ws) + 1, figsize=(2.6 * (len(ws) + 1), 3.3), dpi=80)
        kinds = ["kernel", "fuse"] + sorted({m.split(":")[0] for m in d.modes if ":" in m} -
                                            {"kernel", "fuse", "job-kernel", "job-fuse"})
        for ax, w in zip(axes, ws):
            width = 0.8 / len(kinds)
            for j, kind in enumerate(kinds):
                vals = [d.med(f"{kind}:{f}", w, "cold") or 0 for f in fmts]
                ax.bar([x + j * width for x in range(len(fmts))], vals, width, label=kind)
            lv = d.med("local", w, "cold")
            if lv:
                ax.axhline(lv, color="k", ls="--", lw=1, label="local disk")
            ax.set_xticks([x + width * (len(kinds) - 1) / 2 for x in range(len(fmts))])
            ax.set_xticklabels(fmts, fontsize=8)
            ax.set_title(f"{w}, cold", fontsize=10)
            ax.set_ylabel("seconds")
        axes[0].legend(fontsize=7)
        imgs = d.meta.get("images", {})
        ax = axes[-1]
        ax.bar(range(len(fmts)), [imgs.get(f, {}).get("bytes", 0) / 2**20 for f in fmts], color="gray")
        ax.set_xticks(range(len(fmts)))
        ax.set_xticklabels(fmts, fontsize=8)
        ax.set_title("image size", fontsize=10)
        ax.set_ylabel("MiB")
        fig.tight_layout()
        fig.savefig(out / "formats.png")
        plt.close(fig)
        made.append("formats.png")

    st = [r for r in d.wl if r["workload"] == "start"]
    if st:
        fig, ax = plt.subplots(figsize=(6.5, 4), dpi=80)
        ns = sorted({int(r["n"]) for r in st})
        for m in d.modes:
            vals = [d.med(m, "start", "cold", n) for n in ns]
            if any(v is not None for v in vals):
                ax.plot(ns, vals, marker="o", label=mode_title(m), color=colors[m])
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xticks(ns)
        ax.set_xticklabels([str(n) for n in ns])
        ax.set_xlabel("processes importing at once")
        ax.set_ylabel("seconds until the last is done (log)")
        ax.set_title("start of N processes from one mount, cold")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
        fig.tight_layout()
        fig.savefig(out / "start.png")
        plt.close(fig)
        made.append("start.png")

    burst = [r for r in d.rows if r.get("section") == "burst"]
    if burst:
        fig, ax = plt.subplots(figsize=(6.5, 4), dpi=80)
        names = []
        for r in burst:
            if r["mode"] not in names:
                names.append(r["mode"])
        for i, n in enumerate(names):
            ks = sorted({int(r["n"]) for r in burst if r["mode"] == n})
            p50 = [med([num(r["p50_ms"]) for r in burst if r["mode"] == n and int(r["n"]) == k]) for k in ks]
            p99 = [max([num(r["p99_ms"]) or 0 for r in burst if r["mode"] == n and int(r["n"]) == k])
                   for k in ks]
            c = palette[i]
            ax.plot(ks, p50, marker="o", color=c, label=f"{n}, p50")
            ax.plot(ks, p99, marker="x", ls="--", color=c, label=f"{n}, p99")
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        allk = sorted({int(r["n"]) for r in burst})
        ax.set_xticks(allk)
        ax.set_xticklabels([str(k) for k in allk])
        ax.set_xlabel("simultaneous mount requests")
        ax.set_ylabel("squashd answer time, ms (log)")
        ax.axhline(100, color="k", lw=0.8, ls=":")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=6)
        fig.tight_layout()
        fig.savefig(out / "burst.png")
        plt.close(fig)
        made.append("burst.png")
    return made


# ====================================================================== datasets

DS_TITLE = {"local": "tree on local disk", "slowfs": "tree on slow FS",
            "job-kernel": "kernel bundles, overlayfs (job)",
            "job-fuse-overlay": "FUSE bundles, overlayfs (job, fuse_union = no)",
            "job-fuse-union": "FUSE union (job, fuse_union = yes)",
            "job-fuse": "merged, FUSE bundles (job)"}  # before issue 31: one FUSE column
DS_SHORT = {"local": "local", "slowfs": "slow FS", "job-kernel": "kernel+overlay",
            "job-fuse-overlay": "FUSE+overlay", "job-fuse-union": "FUSE union", "job-fuse": "FUSE"}
DS_ALL_MODES = ["local", "slowfs", "job-kernel", "job-fuse", "job-fuse-overlay", "job-fuse-union"]
# The kinds of job (ds_memory's mode) and their labels in ds_visible.
DS_KINDS = {"kernel": "kernel", "fuse": "FUSE", "fuse-overlay": "FUSE overlay", "fuse-union": "FUSE union"}


def ds_names(d):
    names = []
    for r in d.rows:
        if r.get("section", "").startswith("ds_") and r.get("dataset") not in names:
            names.append(r["dataset"])
    return names


def ds_modes(d):
    """The columns this run measured (or skipped), in their order."""
    seen = {r.get("mode") for r in d.rows if r.get("section") in ("ds_scan", "ds_skip")}
    return [m for m in DS_ALL_MODES if m in seen]


def ds_kinds(d):
    seen = {r.get("mode") for r in d.rows if r.get("section") == "ds_memory"}
    return [k for k in DS_KINDS if k in seen]


def ds_vals(d, section, ds, mode, cache=None, key="seconds"):
    return [num(r.get(key)) for r in d.rows if r.get("section") == section and r.get("dataset") == ds
            and r.get("mode") == mode and (cache is None or r.get("cache") == cache)
            and num(r.get(key)) is not None]


def ds_cell(vals, unit=fmt_s):
    if not vals:
        return "–"
    s = unit(med(vals))
    if len(vals) > 1:
        s += f" ({unit(min(vals))})"
    return s


def ds_label(d, ds):
    info = d.meta.get("datasets", {}).get(ds, {})
    if not info:
        return ds
    return (f"{ds}: {info['entries']:,} files and directories ({info['files']:,} files), "
            f"{info['tops']:,} top-level directories in {info['bundles']:,} bundles")


def ds_skipped(d, ds, mode):
    return [r for r in d.rows if r.get("section") == "ds_skip" and r.get("dataset") == ds
            and r.get("mode") == mode]


def datasets_tables(d):
    md = []
    names = ds_names(d)
    if not names:
        return md
    modes = ds_modes(d)
    info = d.meta.get("datasets", {})
    rows = []
    for ds in names:
        i = info.get(ds, {})
        if i:
            rows.append([ds, f"{i['entries']:,}", f"{i['files']:,}", f"{i['dirs']:,}", f"{i['tops']:,}",
                         f"{i['bundles']:,}", f"{i['bundle_bytes'] / 2**20:.0f} MiB",
                         f"{i['tree_disk_bytes'] / 2**20:.0f} MiB",
                         f"{i['generate_seconds']:.0f} s, {i['pack_seconds']:.0f} s"])
    if rows:
        md.append("### The datasets\n")
        md.append(table(["dataset", "entries", "files", "directories", "top-level dirs", "bundles",
                         "bundles' size", "tree on disk", "generate, pack"], rows))
        md.append("")
    if d.meta.get("fuse_union"):
        md.append(f"squashd's `fuse_union` setting: {d.meta['fuse_union']}.\n")
    if d.meta.get("ds_bind") is not None:
        md.append(f"Every listing and random read ran bound to CPU {d.meta['ds_bind']} "
                  "(`--ds-bind`, taskset), in a job or not.\n")
    # listing and random reads
    rows = []
    for ds in names:
        for what, section, cache in (("find, cold", "ds_scan", "cold"), ("find, warm", "ds_scan", "warm"),
                                     ("10,000 random files, cold", "ds_random", "cold")):
            row = [f"{ds}, {what}"]
            loc = med(ds_vals(d, section, ds, "local", cache))
            for m in modes:
                v = ds_vals(d, section, ds, m, cache)
                cell = ds_cell(v)
                if not v and ds_skipped(d, ds, m):
                    cell = "skipped"
                if v and loc and m != "local":
                    cell += f"; {med(v) / loc:.2f}x local"
                row.append(cell)
            if any(c not in ("–", "skipped") for c in row[1:]):
                rows.append(row)
    if rows:
        md.append("### `find . -print | wc -l` and random reads (median (min) over repetitions; ratio "
                  "of the medians to local disk)\n")
        md.append("Cold: page cache, dentries and inodes dropped, the mounts fresh (the job is the "
                  "first on the node; slowfs remounted); warm: at once again. Random: the caches "
                  "dropped again, then 10,000 files of the dataset (a fixed sample, the same for "
                  "every column) opened and read in one process.\n")
        md.append(table(["dataset"] + [DS_TITLE[m] for m in modes], rows))
        md.append("")
    req = [r for r in d.rows if r.get("section") == "ds_scan" and num(r.get("slowfs_requests"))]
    if req:
        rows = [[ds, f"{med([num(r['slowfs_requests']) for r in req if r['dataset'] == ds]):.0f}"]
                for ds in names if any(r["dataset"] == ds for r in req)]
        md.append("Metadata requests that reached slowfs (cold + warm `find`): " +
                  ", ".join(f"{a} {b}" for a, b in rows) + ".\n")
    skips = [r for r in d.rows if r.get("section") == "ds_skip"]
    if skips:
        md.append("Skipped: " + "; ".join(sorted({f"{r['mode']} ({r['dataset']}): {r.get('note', '')}"
                                                  for r in skips})) + ".\n")
    # visible
    rows = []
    for ds in names:
        base = med(ds_vals(d, "ds_visible", ds, "no image"))
        labels = ["no image"] + [f"{DS_KINDS[k]}, {j} job" for k in DS_KINDS for j in ("first", "second")]
        for m in labels:
            v = ds_vals(d, "ds_visible", ds, m)
            if not v:
                continue
            extra = f"{(med(v) - base) * 1000:+.0f} ms" if base is not None and m != "no image" else ""
            rows.append([ds, m, ds_cell(v), extra, len(v)])
    if rows:
        md.append("### Time until the job sees the merged tree\n")
        md.append("From just before `srun` until the task has found the last top-level directory "
                  "of the merged tree (no image: until the task runs); the first job mounts every "
                  "bundle and merges them (nothing mounted, caches dropped), the second job runs "
                  "while the first holds them. Median (min); the difference to no image of the "
                  "medians.\n")
        md.append(table(["dataset", "job", "visible after", "vs no image", "runs"], rows))
        md.append("")
    # memory
    mem = [r for r in d.rows if r.get("section") == "ds_memory"]
    if mem:
        def delta(ds, kind, state, key):
            out = []
            for rep in {r["rep"] for r in mem}:
                a = [r for r in mem if r["dataset"] == ds and r["mode"] == kind and r["rep"] == rep
                     and r["state"] == "before"]
                b = [r for r in mem if r["dataset"] == ds and r["mode"] == kind and r["rep"] == rep
                     and r["state"] == state]
                if a and b and num(a[0].get(key)) is not None and num(b[0].get(key)) is not None:
                    out.append(num(b[0][key]) - num(a[0][key]))
            return med(out)

        def absval(ds, kind, state, key):
            return med([num(r.get(key)) for r in mem if r["dataset"] == ds and r["mode"] == kind
                        and r["state"] == state])

        def mib(v):
            return "–" if v is None else (f"{v / 1024:.1f} MiB" if abs(v) >= 1024 else f"{v:.0f} KiB")

        def count(v):
            return "–" if v is None else f"{v:.0f}"
        rows = []
        for ds in names:
            for kind in ds_kinds(d):
                for state in ("mounted", "after find", "after random"):
                    if absval(ds, kind, state, "squashd_pss_kib") is None:
                        continue
                    fuse = kind.startswith("fuse")
                    rows.append([ds, kind, state,
                                 f"{count(absval(ds, kind, state, 'node_mounts_squashfs'))} / "
                                 f"{count(absval(ds, kind, state, 'node_mounts_fuse'))} / "
                                 f"{count(absval(ds, kind, state, 'node_mounts_overlay'))}",
                                 f"{mib(absval(ds, kind, state, 'squashd_rss_kib'))} / "
                                 f"{mib(absval(ds, kind, state, 'squashd_pss_kib'))}",
                                 mib(absval(ds, kind, state, "readers_pss_kib")) if fuse else "–",
                                 (f"{count(absval(ds, kind, state, 'readers'))} / "
                                  f"{count(absval(ds, kind, state, 'readers_threads'))}") if fuse else "–",
                                 mib(delta(ds, kind, state, "slab_kib")),
                                 mib(delta(ds, kind, state, "sunreclaim_kib")),
                                 mib(delta(ds, kind, state, "slab_squashfs_inode_cache_kib")),
                                 mib(delta(ds, kind, state, "slab_ovl_inode_kib")),
                                 mib(delta(ds, kind, state, "slab_fuse_inode_kib")),
                                 mib(delta(ds, kind, state, "slab_dentry_kib")),
                                 mib(delta(ds, kind, state, "kernelstack_kib") or 0) + " / " +
                                 mib(delta(ds, kind, state, "percpu_kib") or 0) + " / " +
                                 mib(delta(ds, kind, state, "vmallocused_kib") or 0)])
        md.append("### Node memory with the bundles mounted\n")
        md.append("squashd's node mounts below the cluster (squashfs / FUSE / overlay, from "
                  "mountinfo), squashd's RSS / PSS, the FUSE readers' PSS (sum) and their number / "
                  "threads, then the kernel's: differences to the same node just before the first "
                  "job, caches dropped (/proc/meminfo Slab and SUnreclaim; /proc/slabinfo caches, "
                  "objects x size; KernelStack / Percpu / VmallocUsed), median over repetitions. "
                  "Mounted: the job sees the tree; after find: the job has listed it twice; after "
                  "random: the caches dropped and the random files read. Machine-wide numbers: "
                  "other work moves them by a few MiB.\n")
        md.append(table(["dataset", "bundles", "state", "node mounts sq / FUSE / ovl", "squashd RSS / PSS",
                         "readers PSS", "readers / threads", "Δ slab", "Δ unreclaimable",
                         "Δ squashfs inodes", "Δ overlay inodes", "Δ FUSE inodes", "Δ dentries",
                         "Δ kernel stacks / percpu / vmalloc"], rows))
        md.append("")
    # two jobs at once
    conc = [r for r in d.rows if r.get("section") == "ds_concurrent"]
    if conc:
        rows = []
        keys = []
        for r in conc:
            k = (r["dataset"], r.get("settings", ""), r["mode"])
            if k not in keys:
                keys.append(k)
        for ds, settings, variant in keys:
            rs = [r for r in conc if (r["dataset"], r.get("settings", ""), r["mode"]) == (ds, settings, variant)]
            ok = sum(1 for r in rs if r.get("ok") == "yes")
            seen = [num(r.get(k)) for r in rs for k in ("seen_a", "seen_b") if num(r.get(k)) is not None]
            notes = sorted({str(r.get("note", ""))[:400] for r in rs if r.get("note")})
            rows.append([ds, settings, variant, f"{ok} of {len(rs)}", ds_cell(seen),
                         ds_cell([num(r.get("readers")) for r in rs if num(r.get("readers")) is not None],
                                 lambda v: f"{v:.0f}"),
                         ds_cell([num(r.get("readers_threads")) for r in rs
                                  if num(r.get("readers_threads")) is not None], lambda v: f"{v:.0f}"),
                         ds_cell([num(r.get("node_mounts_fuse")) for r in rs
                                  if num(r.get("node_mounts_fuse")) is not None], lambda v: f"{v:.0f}"),
                         "; ".join(notes) or ""])
        md.append("### Two jobs of one user at once, each with every bundle\n")
        md.append("Both started together (caches dropped, nothing mounted); each waits until it sees "
                  "the merged tree, counts its top-level directories and holds its mounts until "
                  "both have. Same bundles: both jobs name the same files; distinct: the second "
                  "names copies (twice as many images). Both-saw-the-tree runs; time to visible, "
                  "median (min) over both jobs and the repetitions; readers, their threads and "
                  "squashd's FUSE node mounts while both hold them.\n")
        md.append(table(["dataset", "settings", "bundles", "both see the tree", "visible after",
                         "readers", "reader threads", "FUSE node mounts", "failures"], rows))
        md.append("")
    return md


def datasets_goals(d):
    rows = []
    for ds in ds_names(d):
        loc = ds_vals(d, "ds_scan", ds, "local", "cold")
        slow = ds_vals(d, "ds_scan", ds, "slowfs", "cold")
        kern = ds_vals(d, "ds_scan", ds, "job-kernel", "cold")
        bundles = d.meta.get("datasets", {}).get(ds, {}).get("bundles")
        vis_goal = 1.0 if ds == "hcp" else (3.0 if ds == "1m" else None)
        for kind in DS_KINDS:
            v = ds_vals(d, "ds_visible", ds, f"{DS_KINDS[kind]}, first job")
            if v and vis_goal:
                rows.append([f"{ds}: merged tree visible, first job, {DS_KINDS[kind]}"
                             + (f" ({bundles:,} bundles)" if bundles else ""),
                             f"{fmt_s(med(v))} ({fmt_s(min(v))})", f"< {vis_goal:.0f} s",
                             "met" if med(v) < vis_goal else "not met"])
        scan_goal = {"hcp": 1.5, "1m": 2.0}.get(ds, 1.5)
        for m in ds_modes(d):
            if not m.startswith("job-"):
                continue
            a = ds_vals(d, "ds_scan", ds, m, "cold")
            if a and loc:
                r, rmin = med(a) / med(loc), min(a) / min(loc)
                rows.append([f"{ds}: first scan, {DS_SHORT[m]} / local disk", f"{r:.2f} ({rmin:.2f})",
                             f"≤ {scan_goal}" + (" (issue 31)" if m == "job-fuse-union" else ""),
                             "met" if r <= scan_goal else "not met"])
            if a and kern and m == "job-fuse-union":
                r, rmin = med(a) / med(kern), min(a) / min(kern)
                rows.append([f"{ds}: first scan, FUSE union / kernel bundles by overlayfs",
                             f"{r:.2f} ({rmin:.2f})", "≤ 1" + (" (issue 31)" if ds == "hcp" else ""),
                             "met" if r <= 1.0 else "not met"])
            if a and slow:
                r, rmin = med(slow) / med(a), min(slow) / min(a)
                rows.append([f"{ds}: first scan, slow FS / {DS_SHORT[m]}", f"{r:.1f} ({rmin:.1f})",
                             "≥ 6", "met" if r >= 6 else "not met"])
            w = ds_vals(d, "ds_scan", ds, m, "warm")
            sw = ds_vals(d, "ds_scan", ds, "slowfs", "warm")
            if w and sw:
                r = med(sw) / med(w)
                rows.append([f"{ds}: second scan, slow FS / {DS_SHORT[m]}", f"{r:.1f} "
                             f"({min(sw) / min(w):.1f})", "≥ 6", "met" if r >= 6 else "not met"])
    conc = [r for r in d.rows if r.get("section") == "ds_concurrent" and r.get("settings") == "default settings"]
    for variant in sorted({r["mode"] for r in conc}):
        rs = [r for r in conc if r["mode"] == variant]
        ok = sum(1 for r in rs if r.get("ok") == "yes")
        rows.append([f"{rs[0]['dataset']}: two 1,024-bundle jobs of one user at once, {variant}, "
                     "default settings", f"{ok} of {len(rs)} runs both jobs saw the tree",
                     "both see it", "met" if ok == len(rs) else "not met"])
    return rows


def datasets_plot(d, out):
    import matplotlib.pyplot as plt
    names = ds_names(d)
    if not names:
        return None
    modes = ds_modes(d)
    fig, axes = plt.subplots(1, len(names) + 1, figsize=(4.8 * (len(names) + 1), 4.0), dpi=80)
    colors = {"local": "#2ca02c", "slowfs": "#d62728", "job-kernel": "#1f77b4", "job-fuse": "#ff7f0e",
              "job-fuse-overlay": "#ff7f0e", "job-fuse-union": "#9467bd"}
    groups = [("find cold", "ds_scan", "cold"), ("find warm", "ds_scan", "warm"),
              ("random cold", "ds_random", "cold")]
    for ax, ds in zip(axes, names):
        width = 0.8 / max(1, len(modes))
        for i, m in enumerate(modes):
            vals = [med(ds_vals(d, sec, ds, m, c)) or 0 for _, sec, c in groups]
            ax.bar([x + i * width for x in range(len(groups))], vals, width, label=DS_SHORT[m],
                   color=colors.get(m))
        ax.set_xticks([x + width * (len(modes) - 1) / 2 for x in range(len(groups))])
        ax.set_xticklabels([g for g, _, _ in groups])
        ax.set_yscale("log")
        ax.set_ylabel("seconds (log)")
        ax.set_title(f"{ds}: find . | wc -l; 10,000 random files", fontsize=10)
        ax.grid(axis="y", alpha=0.3)
    axes[0].legend(fontsize=7)
    ax = axes[-1]
    labels = ["no image"] + [f"{DS_KINDS[k]}, first job" for k in DS_KINDS]
    labels = [lab for lab in labels if any(ds_vals(d, "ds_visible", ds, lab) for ds in names)]
    width = 0.8 / len(names)
    for j, ds in enumerate(names):
        vals = [med(ds_vals(d, "ds_visible", ds, m)) or 0 for m in labels]
        ax.bar([x + j * width for x in range(len(labels))], vals, width, label=ds)
    ax.set_xticks([x + width * (len(names) - 1) / 2 for x in range(len(labels))])
    ax.set_xticklabels(labels, fontsize=7, rotation=20)
    ax.axhline(1.0, color="k", lw=0.8, ls=":")
    ax.axhline(3.0, color="k", lw=0.8, ls="--")
    ax.set_ylabel("seconds")
    ax.set_title("until the first job sees the merged tree", fontsize=10)
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(out / "datasets.png")
    plt.close(fig)
    return "datasets.png"


# ====================================================================== main

def write(out, rows, meta):
    out = Path(out)
    d = Data(rows, meta)
    md = ["# slurm-squash benchmark", ""]
    m = meta
    md.append(f"- command: `{m.get('command', '')}`")
    md.append(f"- started {m.get('started')}, took {m.get('seconds', '?')} s; host {m.get('host')}, "
              f"kernel {m.get('kernel')}, {m.get('cpus')} CPUs, {m.get('mem_gib')} GiB; "
              f"load average at start {m.get('loadavg_start')}, at end {m.get('loadavg_end')}")
    if m.get("datasets"):
        for name in m["datasets"]:
            md.append(f"- dataset {ds_label(d, name)}; bundles: `mksquashfs {m.get('dataset_mksquashfs', '')}`")
    else:
        md.append(f"- stack: {m.get('stack')} ({m.get('stack_files')} files, "
                  f"{(m.get('stack_bytes') or 0) / 2**20:.0f} MiB): {', '.join(m.get('pins', []))}; "
                  f"import: `{m.get('imports')}`; large file {m.get('bigfile_mib')} MiB")
    a = m.get("args", {})
    md.append(f"- slowfs delay {a.get('delay_us')} µs per metadata request, kernel cache of its "
              f"metadata {a.get('slowfs_cache_s')} s; repetitions {a.get('reps')} "
              f"(start workload {a.get('start_reps')}), srun/sbatch {a.get('cost_reps')} per condition")
    shares = [num(r.get("others_cpu_share")) for r in d.wl
              if num(r.get("others_cpu_share")) is not None and num(r["seconds"]) >= 1.0]
    if shares:
        md.append(f"- shared machine: during the measurements of 1 s or more, other work (other "
                  f"engineers' builds and tests, FUSE servers, kernel threads) used a median "
                  f"{100 * med(shares):.0f}% of the CPUs (max {100 * max(shares):.0f}%; "
                  f"column others_cpu_share of results.csv)")
    if m.get("release"):
        md.append(f"- release: {m['release']}" + (f" (tests/matrix root {m['matrix_suite']})"
                                                   if m.get("matrix_suite") else ""))
    md.append(f"- squashfuse {m.get('squashfuse')}, squashfs-tools {m.get('squashfs_tools')}, "
              f"Slurm {m.get('slurm')}, {m.get('python')}, project {m.get('git')}")
    for fmt, i in (m.get("profiled_images") or {}).items():
        md.append(f"- image with a start profile ({fmt}): `squash-pack {i.get('squash_pack')}`, "
                  f"{i.get('bytes', 0) / 2**20:.0f} MiB in {i.get('build_seconds')} s; its profile "
                  f"{i.get('profile_files')} files, {i.get('profile_bytes', 0) / 2**20:.1f} MiB of them")
    if m.get("product_fuse_reader"):
        md.append(f"- squashd's FUSE server (job, FUSE and part 2): {m['product_fuse_reader']}")
    md.append("")
    if os.environ.get("BENCH_NO_PLOTS"):
        # No matplotlib here (a tests/matrix root): the host makes them,
        # `python tests/bench/report.py OUT` with the benchmark's venv.
        made = []
        md.append("(no plots: made without matplotlib; `$BENCH_CACHE/venv/bin/python "
                  "tests/bench/report.py OUT` makes them)")
        md.append("")
    else:
        made = plots(d, out)
    if d.wl:
        md.append("## Part 1: workloads")
        md.append("")
        md += part1_tables(d, out)
        for p in made:
            if p != "burst.png":
                md.append(f"![{p}]({p})")
        md.append("")
    dsm = datasets_tables(d)
    if dsm:
        md.append("## Datasets: many bundles merged at one target")
        md.append("")
        md += dsm
        if not os.environ.get("BENCH_NO_PLOTS"):
            p = datasets_plot(d, out)
            if p:
                md.append(f"![{p}]({p})")
                md.append("")
        goals_section(md, "### Goals of issues 24 and 31 in this run", datasets_goals(d),
                      "Ratios of the medians (verdict) and, in brackets, of the minima.", "goal")
    p2 = part2_tables(d)
    if p2:
        md.append("## Part 2: the product's own cost")
        md.append("")
        md += p2
    if "burst.png" in made:
        md.append("![burst.png](burst.png)")
        md.append("")
    goals_section(md, "## Targets of issue 7 in this run", targets(d),
                  "Ratios from the medians (verdict) and, in brackets, from the minima.", "target")
    failed = [r for r in rows if str(r.get("note", "")).startswith("failed")]
    if failed:
        md.append("## Failures")
        md.append("")
        for r in failed:
            what = " ".join(str(r.get(k)) for k in ("section", "dataset", "mode", "workload") if r.get(k))
            md.append(f"- {what}: {' '.join(str(r['note']).split())}")
        md.append("")
    (out / "report.md").write_text("\n".join(md) + "\n")


if __name__ == "__main__":
    out = Path(sys.argv[1])
    with open(out / "results.csv") as f:
        rows = list(csv.DictReader(f))
    write(out, rows, json.loads((out / "meta.json").read_text()))
    print(out / "report.md")
