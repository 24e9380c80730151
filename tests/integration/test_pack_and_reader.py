"""An image made with contrib/squash-pack is read by a job, and
`squashctl list` names the reader squashd chose for each mount."""

import os
import pwd
import re

from conftest import REPO, USER1, BlockingJob, run

PACK = REPO / "contrib" / "squash-pack"


def test_job_reads_a_squash_pack_image_and_list_names_each_reader(cluster):
    d = cluster.workdir(USER1, "pack")
    src = d / "stack"
    (src / "lib").mkdir(parents=True)
    (src / "lib" / "hello.py").write_text("print('hello from a packed image')\n")
    (src / "bin").mkdir()
    (src / "bin" / "tool").write_text("#!/bin/sh\necho tool ran\n")
    (src / "bin" / "tool").chmod(0o755)
    pw = pwd.getpwnam(USER1)
    for root, dirs, files in os.walk(src):
        for name in [root, *(os.path.join(root, x) for x in dirs + files)]:
            os.chown(name, pw.pw_uid, pw.pw_gid)
            if os.path.isdir(name):
                os.chmod(name, 0o755)

    # The user packs the image: defaults, choices printed.
    img = d / "stack.sqfs"
    p = cluster.as_user(USER1, [PACK, src, img], timeout=120)
    assert p.returncode == 0, p.stdout + p.stderr
    assert "squash-pack: compression: zstd" in p.stdout, p.stdout
    assert "squash-pack: owners: root" in p.stdout, p.stdout
    sb = run(["unsquashfs", "-s", img]).stdout
    assert re.search(r"^Compression zstd$", sb, re.M) and "Block size 131072" in sb, sb

    trusted = cluster.make_image(cluster.trusted / "tools.sqfs", {"which.txt": "trusted tools\n"})
    blk = BlockingJob(cluster, USER1, f"{img},{trusted}", after=(
        "python3 /squash/stack/lib/hello.py; /squash/stack/bin/tool; "
        "stat -c '%u:%g %a %n' /squash/stack/lib/hello.py; cat /squash/tools/which.txt"))
    try:
        blk.wait_ready()
        mounts = {m["mode"]: m for m in cluster.list_mounts()}
        assert set(mounts) == {"fuse", "kernel"}, mounts
        assert mounts["kernel"]["reader"] == "kernel squashfs", mounts
        fuse_reader = mounts["fuse"]["reader"]
        # The project's own reader by default (fuse_reader in squashd.conf).
        assert re.fullmatch(r"squash-reader \d+\.\d+\.\d+, multithreaded", fuse_reader), mounts
        # The same squashd found at start and logged, for the configured binary.
        assert re.search(r"FUSE mounts are served by /\S*squash-reader \(" + re.escape(fuse_reader)
                         + r"\)", cluster.squashd_log()), cluster.squashd_log()[-2000:]
        table = cluster.squashctl("list").stdout
        assert re.search(r"^fuse .*" + re.escape(fuse_reader) + r" .*" + re.escape(str(img)),
                         table, re.M), table
        assert re.search(r"^kernel .*kernel squashfs .*" + re.escape(str(trusted)), table, re.M), \
            table
    finally:
        blk.release()
    out = blk.job.output()
    assert blk.job.state == "COMPLETED", out
    assert "hello from a packed image\n" in out, out
    assert "tool ran\n" in out, out
    assert "0:0 644 /squash/stack/lib/hello.py\n" in out, out
    assert "trusted tools\n" in out, out
