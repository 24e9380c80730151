#!/usr/bin/env python3
"""EROFS against squashfs, cold, through the kernel: is a second image
format worth it? Not part of run.sh; needs erofs-utils (mkfs.erofs) and
the full stack and its lz4 image that `run.sh --formats lz4:128K` leaves
in BENCH_CACHE. As root:

    tests/bench/erofs.py [REPS]        (default 3; about 2 minutes each)

Builds EROFS images of the tree (lz4 and lz4hc, --all-root, no xattrs)
once, then runs the import, stat, md5 and read workloads cold (caches
dropped, mount fresh) from the squashfs image (loop mount), the EROFS
images mounted file-backed (mount(2) on the image file itself, no loop
device: CONFIG_EROFS_FS_BACKED_BY_FILE) and the tree on local disk,
interleaved with the order rotated, and prints median (min) per mode."""
import ctypes
import json
import os
import shutil
import statistics
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
CACHE = Path(os.environ.get("BENCH_CACHE", "/var/tmp/squash-bench"))
TREE = CACHE / "trees" / "full-1024m"
SQFS = CACHE / "images" / "full-1024m.lz4-128k.sqfs"
IMPORTS = "numpy,scipy.stats,pandas,matplotlib.pyplot,sympy,PIL.Image"
MNT = CACHE / "mnt" / "erofs-cmp"
libc = ctypes.CDLL(None, use_errno=True)


def erofs_image(comp):
    img = CACHE / "images" / f"full-1024m.erofs-{comp}.erofs"
    if not img.exists():
        subprocess.run(["mkfs.erofs", "--quiet", "--all-root", "-x", "-1", f"-z{comp}",
                        f"{img}.tmp", TREE], check=True)
        os.rename(f"{img}.tmp", img)
        os.chmod(img, 0o644)
    return img


def mount(kind, src):
    if kind == "local":
        return src
    if kind == "squashfs":
        subprocess.run(["mount", "-t", "squashfs", "-o", "loop,ro", src, MNT], check=True)
    elif libc.mount(str(src).encode(), str(MNT).encode(), b"erofs", 1, None) != 0:  # MS_RDONLY
        raise OSError(ctypes.get_errno(), f"mount -t erofs {src}")
    return MNT


def main():
    reps = int(sys.argv[1]) if len(sys.argv) > 1 else 3
    if os.geteuid() != 0:
        sys.exit("erofs.py: run as root (mounts, drop_caches)")
    if not shutil.which("mkfs.erofs"):
        sys.exit("erofs.py: mkfs.erofs not found: apt-get install erofs-utils")
    if not (TREE.is_dir() and SQFS.exists()):
        sys.exit(f"erofs.py: {TREE} or {SQFS} missing: run tests/bench/run.sh --formats lz4:128K first")
    MNT.mkdir(parents=True, exist_ok=True)
    modes = {"squashfs lz4 128K (loop)": ("squashfs", SQFS),
             "EROFS lz4hc (file-backed)": ("erofs", erofs_image("lz4hc")),
             "EROFS lz4 (file-backed)": ("erofs", erofs_image("lz4")),
             "tree on local disk": ("local", TREE)}
    for name, (kind, src) in modes.items():
        if kind != "local":
            print(f"{name}: {src.stat().st_size / 2**20:.0f} MiB", flush=True)
    names = list(modes)
    res = {}
    for rep in range(reps):
        for wl in ("import", "stat", "md5", "read"):
            for name in names[rep % len(names):] + names[:rep % len(names)]:
                kind, src = modes[name]
                root = mount(kind, src)
                try:
                    Path("/proc/sys/vm/drop_caches").write_text("3\n")
                    cmd = ["/usr/bin/python3", HERE / "workload.py", wl, root, "--times", "1"]
                    if wl == "import":
                        cmd += ["--imports", IMPORTS]
                    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
                    secs = json.loads(out.splitlines()[0])["seconds"]
                    res.setdefault((name, wl), []).append(secs)
                    print(f"rep {rep} {wl:6} {name:28} {secs:.3f} s", flush=True)
                finally:
                    if kind != "local":
                        subprocess.run(["umount", "-d", MNT], check=True)
    print("\n| workload, cold | " + " | ".join(names) + " |")
    print("|---" * (len(names) + 1) + "|")
    for wl in ("import", "stat", "md5", "read"):
        cells = [f"{statistics.median(v):.3f} s ({min(v):.3f})" for v in (res[(n, wl)] for n in names)]
        print(f"| {wl} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
