"""`squashctl list --json` is valid JSON whatever bytes an image path holds:
a real job's image whose name has the byte 0xff is listed, parsed by
Python's json module, and its path comes back byte for byte through
os.fsencode (the \\udcXX escaping documented in squashctl(8))."""

import json
import os
import subprocess

import pytest

from conftest import SQUASHCTL, USER1, blocking_jobs, run

FILES = {"hello.txt": "hello from the image\n"}


@pytest.mark.host_release_only("squashctl's own output: the same on every release")
def test_list_json_parses_for_a_path_that_is_not_utf8(cluster):
    d = cluster.workdir(USER1, "img")
    raw = os.fsencode(d) + b"/caf\xc3\xa9-\xff-x.sqfs"
    img = cluster.make_image(os.fsdecode(raw), FILES, owner=USER1)
    with blocking_jobs(cluster, (USER1, f"{img}:/squash/odd", "cat /squash/odd/hello.txt\n")) as (blk,):
        out = cluster.squashctl("list", "--json").stdout
        assert "\\udcff" in out and "caf\u00e9" in out, out
        mounts = json.loads(out)["mounts"]
        assert [os.fsencode(m["image"]) for m in mounts] == [raw], mounts
        assert mounts[0]["jobs"] == [blk.job.id]
        # The table shows the path's bytes (control bytes would be \\xNN).
        table = subprocess.run([SQUASHCTL, "--socket", cluster.socket, "--munge-socket",
                                cluster.munge_socket, "list"], stdout=subprocess.PIPE,
                               check=True).stdout
        assert raw in table  # no control character in it: shown as it is
        # squashd's own log writes the byte as \xff: the log stays UTF-8 text.
        log = (cluster.dir / "log" / "squashd.log").read_bytes()
        assert b"\xff" not in log
        assert b"caf\xc3\xa9-\\xff-x.sqfs" in log
        blk.release()
        assert blk.job.state == "COMPLETED", blk.job.output()
        assert blk.job.output() == FILES["hello.txt"]


@pytest.mark.host_release_only("squashctl's own checks: the same on every release")
def test_number_arguments_are_checked(cluster):
    base = [SQUASHCTL, "--socket", cluster.socket, "--munge-socket", cluster.munge_socket]
    for args, message in [
        (["--timeout", "abc", "status"], "--timeout takes whole seconds from 1 to 3600, not 'abc'"),
        (["--timeout", "0", "status"], "--timeout takes whole seconds from 1 to 3600, not '0'"),
        (["--timeout", "99999999999999999999", "status"], "not '99999999999999999999'"),
        (["job", "12x"], "'12x' is not a job id"),
        (["release", "-1"], "'-1' is not a job id"),
        (["release", "4294967296"], "'4294967296' is not a job id"),
        (["job", ""], "'' is not a job id"),
    ]:
        p = run(base + args, check=False)
        assert p.returncode == 2, (args, p.returncode, p.stderr)
        assert message in p.stderr, (args, p.stderr)
