"""A damaged block in a user's image: the job reading that file gets EIO
(Input/output error), every other file reads fine, and the FUSE reader
neither crashes nor hangs (same server before and after)."""

import re

from conftest import USER1, run


def damaged_image(cluster):
    d = cluster.workdir(USER1, "img")
    src = d / "damaged.src"
    src.mkdir()
    # a_bad.bin is first in the image: its compressed data starts right
    # after the 96-byte superblock.
    (src / "a_bad.bin").write_bytes(b"".join(b"line %d of a compressible file\n" % i
                                             for i in range(20000)))
    (src / "good.txt").write_text("still readable\n")
    img = d / "damaged.sqfs"
    run(["mksquashfs", src, img, "-noappend", "-quiet", "-no-progress", "-all-root",
         "-comp", "gzip", "-no-fragments"])
    data = bytearray(img.read_bytes())
    for i in range(200, 400):
        data[i] ^= 0x5A
    img.write_bytes(bytes(data))
    run(["chown", f"{USER1}:", img])
    return img


def test_damaged_block_is_eio_and_the_reader_lives_on(cluster):
    img = damaged_image(cluster)
    body = ("cat /squash/d/good.txt\n"
            "cat /squash/d/a_bad.bin > /dev/null; echo \"bad rc=$?\"\n"
            "ls /squash/d\n"
            "cat /squash/d/good.txt\n")
    offset = len(cluster.squashd_log())
    job = cluster.run_job(USER1, body, [f"--squash-image={img}:/squash/d"])
    out = job.output()
    assert job.state == "COMPLETED", out
    assert re.search(r"cat: /squash/d/a_bad.bin: Input/output error", out), out
    assert "bad rc=1" in out, out
    assert out.count("still readable") == 2, out
    assert "a_bad.bin" in out and "good.txt" in out, out
    # The reader did not die on it (no restart, no dead mount).
    log = cluster.squashd_log()[offset:]
    assert "restarted as pid" not in log and "is dead" not in log and "are dead" not in log, log[-2000:]
