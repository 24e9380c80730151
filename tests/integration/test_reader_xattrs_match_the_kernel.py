"""A job reading a user's image through squash-reader sees the same
extended attributes as the kernel's squashfs mount of the same image:
names (listxattr), values (getxattr, inline and out-of-line ones),
ENODATA for an absent name, security.capability included; trusted.* is
listed to neither (the job runs as the user). On every release: the
xattr requests go through each release's libfuse."""

import json
import os

from conftest import USER1, run

# What the job and the test print: {path: [sorted names, {name: value hex}, absent errno]}.
DUMP = r"""
import errno, json, os, sys
root = sys.argv[1]
out = {}
for dp, dns, fns in os.walk(root):
    for n in [""] + sorted(dns + fns):
        p = os.path.join(dp, n) if n else dp
        names = sorted(os.listxattr(p, follow_symlinks=False))
        vals = {x: os.getxattr(p, x, follow_symlinks=False).hex() for x in names}
        try:
            os.getxattr(p, "user.absent", follow_symlinks=False)
            absent = 0
        except OSError as e:
            absent = e.errno
        out[os.path.relpath(p, root)] = [names, vals, absent]
print("XATTRS " + json.dumps(out, sort_keys=True))
"""


def test_job_sees_the_kernels_xattrs(cluster):
    d = cluster.workdir(USER1, "xattrs")
    src = d / "src"
    (src / "dir").mkdir(parents=True)
    (src / "a").write_text("a\n")
    (src / "b").write_text("b\n")
    (src / "link").symlink_to("a")
    os.setxattr(src / "a", "user.one", b"1")
    os.setxattr(src / "a", "user.empty", b"")
    # The same 300-byte value twice: mksquashfs stores the second out of line.
    os.setxattr(src / "a", "user.shared", b"v" * 300)
    os.setxattr(src / "b", "user.shared", b"v" * 300)
    os.setxattr(src / "dir", "user.on_a_dir", b"d")
    # As setcap cap_net_raw+ep writes it; and one the user may not list.
    os.setxattr(src / "b", "security.capability", bytes([1, 0, 0, 2, 0, 0x20]) + bytes(14))
    os.setxattr(src / "a", "trusted.hidden", b"t")
    img = d / "x.sqfs"
    run(["mksquashfs", src, img, "-noappend", "-quiet", "-no-progress", "-all-root"])
    run(["chown", f"{USER1}:", img])
    script = d / "dump.py"
    script.write_text(DUMP)
    os.chmod(script, 0o644)

    job = cluster.run_job(USER1, f"python3 {script} /squash/x\n", [f"--squash-image={img}:/squash/x"])
    out = job.output()
    assert job.state == "COMPLETED", out
    line = next(x for x in out.splitlines() if x.startswith("XATTRS "))
    fuse = json.loads(line[len("XATTRS "):])

    kdir = d / "kernel"
    kdir.mkdir()
    run(["mount", "-t", "squashfs", "-o", "loop,ro", img, kdir])
    try:
        p = cluster.as_user(USER1, ["python3", script, kdir])
    finally:
        run(["umount", kdir])
    assert p.returncode == 0, p.stderr
    kernel = json.loads(p.stdout.split("XATTRS ", 1)[1])
    assert fuse == kernel, (fuse, kernel)
    assert fuse["a"][0] == ["user.empty", "user.one", "user.shared"], fuse
    assert fuse["b"][1]["security.capability"].startswith("01000002"), fuse
    assert fuse["a"][2] == 61  # ENODATA
