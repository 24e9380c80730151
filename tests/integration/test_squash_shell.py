"""squash-shell: a user runs a command with an image mounted at its target,
in a namespace of their own, under the job policy; the mount goes when
squash-shell ends, however it ends."""

import json
import os
import re
import signal
import subprocess

import pytest

from conftest import BUILD, USER1, USER2, mountinfo, run, uid_of, wait_until
from test_writable_overlay import squashd_with

SQUASH_SHELL = BUILD / "daemon" / "squash-shell"
FILES = {"hello.txt": "hello from the image\n", "sub/deep.txt": "deep\n"}


def shell_cmd(c, *args):
    # The test users run it: a copy where they can reach it, if need be.
    return [c.for_user(USER1, SQUASH_SHELL), "--socket", c.socket, "--munge-socket",
            c.munge_socket, *args]


def sessions(c):
    """{pid: image} of the squash-shell sessions squashd lists."""
    res = {}
    for m in c.list_mounts():
        for pid in m.get("sessions", []):
            res[pid] = m["image"]
    return res


def refused_and_others_start(c, cwd, img, reason, held, other):
    """The user's next session (of img) is refused with reason and starts
    nothing; another user's session (of other, their own) reads meanwhile."""
    p = c.as_user(USER1, shell_cmd(c, img, "--", "true"), cwd=cwd)
    assert p.returncode == 125, (p.stdout, p.stderr)
    assert reason in p.stderr, p.stderr
    assert len(sessions(c)) == held
    p = c.as_user(USER2, [c.for_user(USER2, SQUASH_SHELL), "--socket", c.socket, "--munge-socket",
                          c.munge_socket, other, "--", "cat", "/squash/theirs/hello.txt"])
    assert p.returncode == 0 and p.stdout == FILES["hello.txt"], (p.stdout, p.stderr)


def wait_clean(c):
    wait_until(lambda: not c.list_mounts() and not c.node_mounts(), 15, 0.1,
               "the session's mounts to be released")
    assert os.listdir(c.state_dir / "sessions") == []


def test_command_sees_the_image_and_the_mount_goes_with_it(cluster):
    c = cluster
    d = c.workdir(USER1, "sh")
    img = c.make_image(d / "tools.sqfs", FILES, owner=USER1, mode=0o600)
    p = c.as_user(USER1, shell_cmd(c, img, "--", "bash", "-c",
                                   'cat /squash/tools/hello.txt /squash/tools/sub/deep.txt; '
                                   'echo "M=$SQUASH_MOUNTS I=$SQUASH_IMAGES"; id -u; '
                                   'touch /squash/tools/x 2>&1 || echo read-only; '
                                   # Even as root of a nested user namespace the
                                   # kernel keeps ro, nosuid and nodev locked.
                                   'unshare -rm sh -c "mount -o remount,bind,dev,suid /squash/tools '
                                   '2>/dev/null && echo LIFTED || echo LOCKED"'), cwd=d)
    assert p.returncode == 0, p.stderr
    lines = p.stdout.splitlines()
    assert lines[:3] == ["hello from the image", "deep", f"M=/squash/tools I={img}"], p.stdout
    assert lines[3] == str(os.stat(img).st_uid), p.stdout  # runs as the user, not root
    assert "read-only" in p.stdout.lower(), p.stdout
    assert p.stdout.endswith("LOCKED\n"), p.stdout
    # The host never sees the target; the session is gone once the command is.
    assert not [m for m in c.stray_mounts() if m["mount_point"].startswith("/squash")]
    # Released (its log line is on the user's log budget, which the
    # tests of that budget spend: not looked for here).
    wait_clean(c)


@pytest.mark.host_release_only("squash-shell's own exit status, no Slurm release in it")
def test_a_command_that_cannot_run_exits_as_with_env(cluster):
    """127 when the command is not found, 126 when it is found but cannot
    be run (as env(1)); 125 stays squash-shell's own. The images were bound
    before the exec: the session goes all the same. Options after the
    image are the command."""
    c = cluster
    d = c.workdir(USER1, "sh")
    img = c.make_image(d / "cmd.sqfs", FILES, owner=USER1)
    for args, status, err in (
            (["--", "no-such-command-here"], 127, "no-such-command-here: No such file or directory"),
            (["--", "/squash/cmd/sub"], 126, "/squash/cmd/sub: Permission denied"),
            (["--env", "none"], 127, "--env: No such file or directory")):
        # A PATH of directories the user may search: one it may not makes
        # execvp say EACCES (126) for a command found nowhere, as env does.
        p = c.as_user(USER1, ["env", "PATH=/usr/bin:/bin", *shell_cmd(c, img, *args)], cwd=d)
        assert (p.returncode, p.stdout) == (status, ""), (args, p.stderr)
        assert f"squash-shell: {err}\n" in p.stderr, (args, p.stderr)
        wait_clean(c)


def test_sigkill_of_squash_shell_releases_and_others_stay_out(cluster):
    c = cluster
    d = c.workdir(USER1, "sh")
    img = c.make_image(d / "kill.sqfs", FILES, owner=USER1)
    pidfile = d / "inner"
    proc = subprocess.Popen(
        ["runuser", "-u", USER1, "--", *[str(x) for x in shell_cmd(
            c, f"{img}:/squash/k", "--", "bash", "-c", f"echo $$ > {pidfile}; exec sleep 300")]],
        cwd=d, env=c.env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        wait_until(lambda: pidfile.exists() and sessions(c), 30, 0.1, "the session to start")
        (pid, image), = sessions(c).items()
        assert image == str(img)
        assert "squash-shell sessions: 1\n" in c.squashctl("status").stdout
        assert re.search(r"^squashd_sessions 1$", c.squashctl("metrics").stdout, re.M)
        # A budget of the user's, 32 at most (core/holders.h).
        rows = json.loads(c.squashctl("status", "--json").stdout)["user_budgets"]
        (mine,) = [r for r in rows if r["uid"] == uid_of(USER1)]
        assert mine["budgets"]["squash-shell sessions"] == {"used": 1, "limit": 32}, mine
        inner = int(pidfile.read_text())
        assert "/squash/k" in [line.split()[4] for line in open(f"/proc/{inner}/mountinfo")]
        # The session's directory: its user may enter it, not write in it;
        # other users may not even enter it.
        sdir = c.state_dir / "sessions" / str(pid)
        p = c.as_user(USER1, ["cat", sdir / "0" / "hello.txt"])
        assert p.stdout == "hello from the image\n", (p.stdout, p.stderr)
        p = c.as_user(USER1, ["touch", sdir / "junk"])
        assert p.returncode != 0 and "Permission denied" in p.stderr, (p.stdout, p.stderr)
        p = c.as_user(USER2, ["ls", sdir / "0"])
        assert p.returncode != 0 and "Permission denied" in p.stderr, (p.stdout, p.stderr)
        os.kill(pid, signal.SIGKILL)
        wait_clean(c)
        # The command went with it (it dies with its parent).
        wait_until(lambda: not os.path.exists(f"/proc/{inner}"), 10, 0.1, "the command to end")
    finally:
        proc.kill()
        proc.communicate(timeout=30)


@pytest.mark.host_release_only("squashd's own budget, no Slurm release in it")
def test_a_users_33rd_session_is_refused_and_others_still_start(cluster):
    """32 squash-shell sessions per user at most (core/holders.h): the
    33rd is refused saying so and mounts nothing more; another user's
    session starts meanwhile; all go with their processes."""
    c = cluster
    d = c.workdir(USER1, "sh")
    img = c.make_image(d / "many.sqfs", FILES, owner=USER1)
    other = c.make_image(c.workdir(USER2, "sh") / "theirs.sqfs", FILES, owner=USER2)
    procs = []
    try:
        for i in range(32):
            pidfile = d / f"held-{i}"
            procs.append(subprocess.Popen(
                ["runuser", "-u", USER1, "--", *[str(x) for x in shell_cmd(
                    c, img, "--", "bash", "-c", f"echo $$ > {pidfile}; exec sleep 300")]],
                cwd=d, env=c.env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True))
        wait_until(lambda: len(sessions(c)) == 32, 60, 0.2, "32 sessions to start")
        refused_and_others_start(c, d, img, "too many squash-shell sessions of this user on this node (at most 32)",
                                 32, other)
    finally:
        # squash-shell itself (runuser does not pass SIGKILL on); its
        # command dies with it.
        for pid in sessions(c):
            os.kill(pid, signal.SIGKILL)
        for proc in procs:
            proc.kill()
            proc.communicate(timeout=30)
    wait_clean(c)


@pytest.mark.host_release_only("squashd's own budget, the same on every Slurm release")
def test_a_users_session_binds_past_their_budget_are_refused_and_others_still_start(cluster):
    """Every image a session binds is a mount in the node's table, copied
    into every namespace that receives /run's mounts: max_session_binds_per_user
    bounds one user's sessions together (registry/usage.h). Past it, that
    user's next session is refused naming the setting and mounts nothing;
    another user's session starts; status shows the row."""
    c = cluster
    d = c.workdir(USER1, "sh")
    imgs = [c.make_image(d / f"bind-{n}.sqfs", FILES, owner=USER1) for n in "ab"]
    other = c.make_image(c.workdir(USER2, "sh") / "theirs.sqfs", FILES, owner=USER2)
    pidfile = d / "held"
    with squashd_with(c, "max_session_binds_per_user = 2\n"):
        held = subprocess.Popen(
            ["runuser", "-u", USER1, "--", *[str(x) for x in shell_cmd(
                c, ",".join(str(i) for i in imgs), "--", "bash", "-c", f"echo $$ > {pidfile}; exec sleep 300")]],
            cwd=d, env=c.env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        try:
            wait_until(lambda: pidfile.exists() and sessions(c), 30, 0.1, "the session to start")
            rows = json.loads(c.squashctl("status", "--json").stdout)["user_budgets"]
            mine, = [r for r in rows if r["uid"] == uid_of(USER1)]
            assert mine["budgets"]["session binds"] == {"used": 2, "limit": 2}, mine
            refused_and_others_start(c, d, imgs[0], "the squash-shell sessions of this user on this node "
                                     "already bind 2 images, as many as max_session_binds_per_user = 2",
                                     1, other)
        finally:
            for pid in sessions(c):
                os.kill(pid, signal.SIGKILL)
            held.kill()
            held.communicate(timeout=30)
        wait_clean(c)


def test_image_the_user_cannot_read_is_refused(cluster):
    c = cluster
    d = c.workdir(USER2, "sh")
    img = c.make_image(d / "secret.sqfs", FILES, owner=USER2, mode=0o600)
    p = c.as_user(USER1, shell_cmd(c, img, "--", "cat", "/squash/secret/hello.txt"))
    assert p.returncode == 125, (p.stdout, p.stderr)
    assert p.stdout == ""
    assert f"squash-shell: image {img}: not readable by user {USER1}" in p.stderr, p.stderr
    assert c.list_mounts() == []


def test_target_outside_allowed_prefixes_is_refused(cluster):
    c = cluster
    d = c.workdir(USER1, "sh")
    img = c.make_image(d / "t.sqfs", FILES, owner=USER1)
    p = c.as_user(USER1, shell_cmd(c, f"{img}:/etc/x", "--", "true"))
    assert p.returncode == 125 and "squash-shell: " in p.stderr and "/etc/x" in p.stderr, p.stderr
    assert c.list_mounts() == []


def test_writable_images_are_refused_and_nothing_is_mounted(cluster):
    """:rw and :rw=DIR are for jobs: squash-shell refuses them rather than
    mount the image read-only behind the user's back."""
    c = cluster
    d = c.workdir(USER1, "sh")
    img = c.make_image(d / "w.sqfs", FILES, owner=USER1)
    upper = d / "upper"
    c.as_user(USER1, ["mkdir", upper], check=True)
    ran = d / "ran"
    sessions_logged = c.squashd_log().count("session of pid")
    for spec, flag in ((f"{img}:/squash/w:rw", ":rw"), (f"{img}::rw", ":rw"),
                       (f"{img}:/squash/w:rw={upper}", ":rw=DIR")):
        p = c.as_user(USER1, shell_cmd(c, spec, "--", "touch", ran), cwd=d)
        assert p.returncode == 125, (spec, p.stdout, p.stderr)
        assert p.stderr == (f"squash-shell: {img}: cannot use {flag} here: writable images are "
                            "for jobs only (sbatch, salloc, or an srun that creates the job); "
                            "squash-shell mounts images read-only\n"), p.stderr
        assert not ran.exists(), spec  # the command never ran
        assert c.list_mounts() == [] and c.node_mounts() == [], spec
        assert os.listdir(c.state_dir / "sessions") == [], spec
        assert os.listdir(upper) == [], spec
    assert c.squashd_log().count("session of pid") == sessions_logged  # squashd never asked
    # The same image without :rw is fine.
    p = c.as_user(USER1, shell_cmd(c, f"{img}:/squash/w", "--", "cat", "/squash/w/hello.txt"),
                  cwd=d)
    assert p.returncode == 0 and p.stdout == "hello from the image\n", (p.stdout, p.stderr)
    wait_clean(c)


def test_two_images_on_one_default_target_are_refused_as_at_submission(cluster):
    """As sbatch (test_option_syntax.py): images that only share a file name
    are not merged; naming one TARGET for both is how a merge is asked for."""
    c = cluster
    d = c.workdir(USER1, "sh")
    a = c.make_image(d / "tools.sqfs", {"a.txt": "a\n"}, owner=USER1, mode=0o600)
    b = c.make_image(d / "tools.squashfs", {"b.txt": "b\n"}, owner=USER1, mode=0o600)
    a, b = os.path.realpath(a), os.path.realpath(b)
    for spec in (f"{a},{b}", f"{a}:/squash/tools,{b}"):
        p = c.as_user(USER1, shell_cmd(c, spec, "--", "true"), cwd=d)
        assert p.returncode == 125, (spec, p.stdout, p.stderr)
        assert (f"squash-shell: {a} and {b} would both be mounted on /squash/tools "
                "(their default target); ") in p.stderr, p.stderr
        assert c.list_mounts() == []
    p = c.as_user(USER1, shell_cmd(c, f"{a}:/squash/tools,{b}:/squash/tools", "--",
                                   "cat", "/squash/tools/a.txt", "/squash/tools/b.txt"), cwd=d)
    assert p.returncode == 0 and p.stdout == "a\nb\n", (p.stdout, p.stderr)
    wait_clean(c)


def test_session_survives_a_squashd_restart_and_still_ends_with_its_process(cluster):
    c = cluster
    d = c.workdir(USER1, "sh")
    img = c.make_image(d / "rs.sqfs", FILES, owner=USER1)
    pidfile = d / "inner"
    proc = subprocess.Popen(
        ["runuser", "-u", USER1, "--", *[str(x) for x in shell_cmd(
            c, img, "--", "bash", "-c", f"echo $$ > {pidfile}; exec sleep 300")]],
        cwd=d, env=c.env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        wait_until(lambda: pidfile.exists() and sessions(c), 30, 0.1, "the session to start")
        (pid, _), = sessions(c).items()
        c.cluster_sh("squashd-stop")
        c.cluster_sh("squashd-start")
        wait_until(lambda: c.squashd_pid(), 30, 0.1, "squashd to start")
        assert list(sessions(c)) == [pid], c.list_mounts()
        inner = int(pidfile.read_text())
        assert open(f"/proc/{inner}/root/squash/rs/hello.txt").read() == "hello from the image\n"
        os.kill(pid, signal.SIGKILL)
        wait_clean(c)
    finally:
        proc.kill()
        proc.communicate(timeout=30)


@pytest.mark.host_release_only("squash-shell and squashd alone, no Slurm release in it")
def test_a_sessions_binds_leave_every_namespace_they_reached(cluster):
    """Under systemd /run is a shared mount: a session's binds below it reach
    every mount namespace that receives /run's mounts (a service's
    PrivateTmp=, a user's namespace), as the node-level mounts do. squashd's
    detach must reach those copies too, or each session leaves its mount
    there for good (core/sessions.c). This machine's / is private, so the
    sessions directory is made a shared mount here, and a peer namespace
    receives its mounts."""
    c = cluster
    sdir = str(c.state_dir / "sessions")
    d = c.workdir(USER1, "sh")
    img = c.make_image(d / "spread.sqfs", FILES, owner=USER1)
    pidfile = d / "inner"
    run(["mount", "--bind", sdir, sdir])
    peer = proc = None
    try:
        run(["mount", "--make-shared", sdir])
        peer = subprocess.Popen(["unshare", "-m", "--propagation", "unchanged", "sleep", "300"])
        wait_until(lambda: os.readlink(f"/proc/{peer.pid}/ns/mnt") != os.readlink("/proc/self/ns/mnt"),
                   10, 0.05, "the peer namespace")

        def reached():
            return [m["mount_point"] for m in mountinfo(peer.pid) if m["mount_point"].startswith(sdir + "/")]
        proc = subprocess.Popen(
            ["runuser", "-u", USER1, "--", *[str(x) for x in shell_cmd(
                c, img, "--", "bash", "-c", f"echo $$ > {pidfile}; exec sleep 300")]],
            cwd=d, env=c.env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        wait_until(lambda: pidfile.exists() and sessions(c), 30, 0.1, "the session to start")
        (pid, _), = sessions(c).items()
        assert reached() == [f"{sdir}/{pid}/0"], mountinfo(peer.pid)
        os.kill(pid, signal.SIGKILL)
        wait_clean(c)
        assert reached() == [], "the session's bind stayed in the peer namespace"
    finally:
        if proc:
            proc.kill()
            proc.communicate(timeout=30)
        if peer:
            peer.kill()
            peer.wait()
        run(["umount", "-l", sdir])


@pytest.mark.host_release_only("squash-shell and squashd alone, no Slurm release in it")
def test_an_ended_sessions_binds_left_by_a_stop_are_detached_at_start(cluster):
    """An ended session's directory is moved aside (.ended-PID-N) under the
    registry lock and its binds detached after it, on the thread that tears
    its mounts down (core/sessions.c), so that nobody's request waits
    behind up to 1,024 detaches, and a process reusing the pid gets a
    directory of its own. A squashd stopped in between leaves that
    directory: the next one detaches and removes it at start."""
    c = cluster
    sdir = c.state_dir / "sessions"
    src = c.workdir(USER1, "ended-src")
    left = sdir / ".ended-4000000-0"
    c.cluster_sh("squashd-stop")
    try:
        (left / "0").mkdir(parents=True)
        run(["mount", "--bind", str(src), str(left / "0")])
        assert any(m["mount_point"] == str(left / "0") for m in mountinfo())
        c.cluster_sh("squashd-start")
        wait_until(lambda: c.squashd_pid(), 30, 0.1, "squashd to start")
        wait_until(lambda: not left.exists(), 15, 0.1, "the ended session's directory to go")
        assert not [m for m in mountinfo() if m["mount_point"].startswith(str(left))]
    finally:
        if left.exists():
            subprocess.run(["umount", "-l", str(left / "0")], check=False)
            subprocess.run(["rm", "-rf", "--one-file-system", str(left)], check=False)
        if not c.squashd_pid():
            c.cluster_sh("squashd-start")


@pytest.mark.host_release_only("squash-shell and squashd alone, no Slurm release in it")
def test_image_environments_apply_as_in_jobs(cluster):
    """The image's default-env, as a job's tasks get it; --env none: none;
    a name no image defines is refused before the command runs."""
    c = cluster
    d = c.workdir(USER1, "sh")
    img = c.make_image(d / "envtool.sqfs", {
        "bin/mytool.sh": "#!/bin/sh\necho tool ran\n",
        ".squash/meta": "format 1\ndefault-env run\nenv run prepend-path PATH bin\n"
                        "env run set TOOL_MODE fast\nenv dev set TOOL_MODE dev\n",
    }, owner=USER1)
    probe = 'mytool.sh 2>/dev/null || echo no tool; echo "MODE=${TOOL_MODE-unset}"'

    p = c.as_user(USER1, shell_cmd(c, img, "--", "sh", "-c", probe), cwd=d)
    assert (p.returncode, p.stdout) == (0, "tool ran\nMODE=fast\n"), p.stderr
    p = c.as_user(USER1, shell_cmd(c, "--env", "none", img, "--", "sh", "-c", probe), cwd=d)
    assert (p.returncode, p.stdout) == (0, "no tool\nMODE=unset\n"), p.stderr
    p = c.as_user(USER1, shell_cmd(c, "--env", "nosuch", img, "--", "sh", "-c", probe), cwd=d)
    assert (p.returncode, p.stdout) == (125, ""), p.stderr
    assert ("squash-shell: --env=nosuch: no image given defines the environment nosuch (the "
            "images' environments: /squash/envtool (run, dev))") in p.stderr, p.stderr
    wait_clean(c)


def test_without_a_command_it_runs_the_users_shell(cluster):
    c = cluster
    d = c.workdir(USER1, "sh")
    img = c.make_image(d / "env.sqfs", FILES, owner=USER1)
    p = c.as_user(USER1, ["SHELL=/bin/sh", *shell_cmd(c, img)], cwd=d,
                  input='cat "$SQUASH_MOUNT/hello.txt"; exit 3\n')
    assert p.returncode == 3, (p.stdout, p.stderr)
    assert p.stdout == "hello from the image\n", (p.stdout, p.stderr)
    wait_clean(c)


def restart_squashd(c):
    c.cluster_sh("squashd-stop")
    c.cluster_sh("squashd-start")
    wait_until(lambda: c.squashd_pid(), 30, 0.1, "squashd to start")


def test_default_targets_follow_squashds_base_dir(cluster):
    """BASE of squash-shell's default targets BASE/NAME is squashd's
    base_dir (squashd.conf), which jobs' default targets follow too, not a
    fixed /squash."""
    c = cluster
    d = c.workdir(USER1, "sh")
    img = c.make_image(d / "based.sqfs", FILES, owner=USER1)
    conf = c.dir / "squashd.conf"
    original = conf.read_text()
    base = c.targets / "site-base"
    assert "base_dir = /squash\n" in original, original
    try:
        conf.write_text(original.replace("base_dir = /squash\n", f"base_dir = {base}\n"))
        restart_squashd(c)
        p = c.as_user(USER1, shell_cmd(c, img, "--", "bash", "-c",
                                       'echo "$SQUASH_MOUNT"; cat "$SQUASH_MOUNT/hello.txt"'), cwd=d)
        assert p.returncode == 0, p.stderr
        assert p.stdout == f"{base}/based\nhello from the image\n", p.stdout
        wait_clean(c)
    finally:
        conf.write_text(original)
        restart_squashd(c)
