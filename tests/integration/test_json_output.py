"""`squashctl list --json` is valid JSON whatever bytes an image path holds:
a real job's image whose name has the byte 0xff is listed, parsed by
Python's json module, and its path comes back byte for byte through
os.fsencode (the \\udcXX escaping documented in squashctl(8))."""

import json
import os
import pwd
import shutil
import signal
import subprocess

import pytest

from conftest import SQUASHCTL, USER1, blocking_jobs, run, wait_until
from test_squash_shell import sessions, shell_cmd

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


@pytest.mark.host_release_only("squashctl's own output: the same on every release")
def test_a_list_longer_than_one_answer_is_cut_at_whole_mounts_and_says_so(cluster):
    """squashd answers in one frame (192 KiB): a longer list keeps the
    first mounts that fit, whole, and says it was cut (the JSON's
    "truncated", a line on stderr under the table). 70 images with 3 KiB
    paths, in 7 squash-shell sessions of 10, are about 420 KiB of answer
    (each path twice: the image and its session's bind)."""
    c = cluster
    deep = c.workdir(USER1, "long")
    for i in range(14):
        deep = deep / (f"{i:02d}" + "x" * 198)
    deep.mkdir(parents=True, mode=0o755)
    first = c.make_image(deep / "l00.sqfs", FILES, owner=USER1)
    imgs = [first]
    for i in range(1, 70):
        copy = deep / f"l{i:02d}.sqfs"  # a file of its own: a mount of its own
        shutil.copyfile(first, copy)
        os.chown(copy, pwd.getpwnam(USER1).pw_uid, -1)
        imgs.append(copy)
    holds, procs = [], []
    try:
        for s in range(7):
            hold = c.workdir(USER1, "long-held") / "pid"
            holds.append(hold)
            procs.append(subprocess.Popen(
                ["runuser", "-u", USER1, "--", *[str(x) for x in shell_cmd(
                    c, ",".join(str(i) for i in imgs[10 * s:10 * s + 10]), "--", "bash", "-c",
                    f"echo $$ > {hold}; exec sleep 300")]],
                cwd=deep.parent, env=c.env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                text=True))
            wait_until(hold.exists, 60, 0.1, f"session {s} to start")
        out = json.loads(c.squashctl("list", "--json").stdout)
        listed = out["mounts"]
        assert out.get("truncated") is True and 30 < len(listed) < 70, (len(listed), out.get("truncated"))
        # The first ones, whole, in squashd's order.
        assert len({m["image"] for m in listed}) == len(listed)
        assert all(m["image"].startswith(str(deep)) and m["sessions"] for m in listed)
        table = subprocess.run([SQUASHCTL, "--socket", c.socket, "--munge-socket", c.munge_socket, "list"],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, check=True)
        assert len(table.stdout.splitlines()) == len(listed) + 1, table.stdout[-500:]
        assert (f"squashctl: only the first {len(listed)} mounts are listed: squashd's answer holds "
                "at most 192 KiB (squashctl status counts them all)") in table.stderr, table.stderr
        assert "mounts: 0 kernel, 70 fuse, 0 dead" in c.squashctl("status").stdout
    finally:
        for pid in sessions(c):
            os.kill(pid, signal.SIGKILL)
        for p in procs:
            p.kill()
            p.communicate(timeout=60)
        wait_until(lambda: not c.list_mounts(), 60, 0.2, "the sessions' mounts to go")
