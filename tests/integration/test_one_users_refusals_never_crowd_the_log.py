"""One user's refused requests cost squashd's log a bounded number of
lines (daemon/util/log_budget.c): any local user can send request after
request that squashd refuses, and unbounded, such a flood would fill the
journal and, past journald's rate limit per service, get the lines about
every other user dropped. A flood of 200 malformed requests from one user
is answered in full but logs at most the burst (20 lines) and one line
per 3 s; another user's refusal right after is logged; and the lines left
out are counted and said with that user's next logged line."""

import os
import pwd
import random
import re
import subprocess
import time
from pathlib import Path

import pytest

from conftest import RAWCLIENT, USER1, USER2, run, uid_of, wait_until

pytestmark = pytest.mark.host_release_only("squashd's own log budget, the same on every Slurm release")

FLOOD = 200
BURST = 20          # LOG_BUDGET_BURST, util/log_budget.h
REFILL_S = 3        # LOG_BUDGET_REFILL_MS


def unused_uid():
    """A uid no account has and no earlier test spent a budget of."""
    while True:
        uid = random.randrange(61000, 64000)
        try:
            pwd.getpwuid(uid)
        except KeyError:
            return uid


def as_uid(cluster, uid, *args):
    """squash_rawclient ARGS as uid (no account: only its socket is needed
    for requests squashd refuses before reading a credential)."""
    return run(["setpriv", f"--reuid={uid}", f"--regid={uid}", "--clear-groups",
                cluster.for_user(USER1, RAWCLIENT), "--socket", cluster.socket, *args],
               check=False, timeout=120)


def test_a_flood_of_one_users_bad_requests_logs_a_bounded_count_and_others_still_log(cluster):
    if cluster.multinode:
        pytest.skip("the flood's uid has no account: one-node layout only")
    u1, u2 = unused_uid(), uid_of(USER2)
    offset = len(cluster.squashd_log())
    t = time.monotonic()
    p = as_uid(cluster, u1, "garbage", str(FLOOD))
    flood_s = time.monotonic() - t
    answers = p.stdout.splitlines()
    assert len(answers) == FLOOD and all(a.startswith("bad-request") for a in answers), \
        (p.returncode, p.stdout[-500:], p.stderr[-500:])
    q = cluster.rawclient("garbage", user=USER2)
    assert q.stdout.startswith("bad-request"), q.stdout

    ours = rf"bad request from uid {u1} pid \d+"
    wait_until(lambda: re.search(rf"bad request from uid {u2} pid \d+", cluster.squashd_log()[offset:]),
               10, what="the other user's refusal in squashd's log")
    logged = len(re.findall(ours, cluster.squashd_log()[offset:]))
    assert BURST <= logged <= BURST + flood_s / REFILL_S + 1, (logged, flood_s)

    # A budget's line later: it says how many were left out.
    time.sleep(REFILL_S + 0.2)
    assert as_uid(cluster, u1, "garbage").stdout.startswith("bad-request")
    said = rf"(\d+) more lines about requests from uid {u1} were not logged"
    wait_until(lambda: re.search(said, cluster.squashd_log()[offset:]), 10,
               what="the count of the lines left out")
    log = cluster.squashd_log()[offset:]
    logged = len(re.findall(ours, log))
    left_out = sum(int(n) for n in re.findall(said, log))
    assert logged + left_out == FLOOD + 1, (logged, left_out)


def log_after_anothers_refusal(cluster, offset):
    """squashd's log from offset on, once another user's refusal is in it
    (logged, whatever the first user spent of their budget)."""
    q = cluster.rawclient("garbage", user=USER2)
    assert q.stdout.startswith("bad-request"), q.stdout
    wait_until(lambda: re.search(rf"bad request from uid {uid_of(USER2)} pid \d+", cluster.squashd_log()[offset:]),
               10, what="the other user's refusal in squashd's log")
    return cluster.squashd_log()[offset:]


def budgeted_lines(log, *marks):
    """The info, warning and error lines of log naming one of marks (debug
    lines are on no budget; the count of those left out is not one)."""
    return [line for line in log.splitlines()
            if any(m in line for m in marks) and ": debug: " not in line and "were not logged" not in line]


def test_a_users_session_loop_logs_a_bounded_count_and_others_still_log(cluster):
    """Not only refusals: what squashd logs for a user's own requests and
    processes (a squash-shell session's mounts, its end, its unmounts on
    the user's thread) draws on the same budget (util/log.h,
    log_context_peer). Unbounded, a loop of sessions of a few images each
    logged ten lines a session. Root's requests (Slurm's) never do."""
    from test_squash_shell import shell_cmd
    sessions, images = 12, 4
    d = cluster.workdir(USER1, "log-loop")
    imgs = [cluster.make_image(d / f"l{i}.sqfs", {"f.txt": f"{i}\n"}, owner=USER1) for i in range(images)]
    spec = ",".join(f"{img}:/squash/l{i}" for i, img in enumerate(imgs))
    offset = len(cluster.squashd_log())
    t = time.monotonic()
    for _ in range(sessions):
        p = run(["runuser", "-u", USER1, "--", *[str(x) for x in shell_cmd(cluster, spec, "--", "true")]],
                check=False, timeout=60, cwd=d, env=cluster.env)
        assert p.returncode == 0, p.stderr
    wait_until(lambda: not cluster.list_mounts(), 30, 0.1, "the sessions' mounts to go")
    took = time.monotonic() - t
    log = log_after_anothers_refusal(cluster, offset)
    ours = budgeted_lines(log, str(d), f"uid {uid_of(USER1)}")
    print(f"{sessions} sessions of {images} images in {took:.1f} s: {len(ours)} lines logged")
    assert len(ours) <= BURST + took / REFILL_S + 2, "\n".join(ours)


def image_its_reader_cannot_open(cluster, d, owner):
    """A user's image whose superblock passes every check and whose inode
    table is garbage: the squash-shell client takes it, squashd's reader
    refuses it, after the images named before it were mounted."""
    src = d / "unreadable.src"
    src.mkdir(exist_ok=True)
    (src / "f.txt").write_text("f\n")
    img = d / "unreadable.sqfs"
    run(["mksquashfs", src, img, "-noappend", "-quiet", "-no-progress", "-all-root"])
    data = bytearray(img.read_bytes())
    inode_table = int.from_bytes(data[64:72], "little")
    for i in range(inode_table + 2, min(inode_table + 66, len(data))):
        data[i] ^= 0x5A
    img.write_bytes(bytes(data))
    run(["chown", f"{owner}:", img])
    return img


def test_a_users_failed_sessions_unmount_kernel_mounts_on_that_users_budget(cluster):
    """A squash-shell request that fails lets go of what it mounted, the
    kernel mounts of trusted images too, which are nobody's and come down
    on nobody's thread (core/owner_teardown.c). Their lines were on no
    budget: a user looping such requests logged a line per image per
    request, without end. They are the user's now (struct teardown's
    log_peer). The user is nobody, not the test users: their budgets
    are for the other tests' lines."""
    from test_squash_shell import SQUASH_SHELL
    user, uid = "nobody", pwd.getpwnam("nobody").pw_uid
    shell = [str(cluster.for_user(user, SQUASH_SHELL)), "--socket", str(cluster.socket),
             "--munge-socket", str(cluster.munge_socket)]
    sessions, images = 12, 4
    os.chmod(cluster.trusted, 0o755)
    trusted = [cluster.make_image(cluster.trusted / f"logloop{i}.sqfs", {"f.txt": f"{i}\n"}, owner="root")
               for i in range(images)]
    d = cluster.workdir(user, "log-loop-failed")
    bad = image_its_reader_cannot_open(cluster, d, user)
    spec = ",".join([f"{img}:/squash/t{i}" for i, img in enumerate(trusted)] + [f"{bad}:/squash/bad"])
    offset = len(cluster.squashd_log())
    t = time.monotonic()
    for _ in range(sessions):
        p = run(["runuser", "-u", user, "--", *shell, spec, "--", "true"],
                check=False, timeout=60, cwd=d, env=cluster.env)
        assert p.returncode != 0 and "unreadable.sqfs" in p.stderr, (p.returncode, p.stderr)
    wait_until(lambda: not cluster.list_mounts(), 30, 0.1, "the sessions' mounts to go")
    took = time.monotonic() - t
    log = log_after_anothers_refusal(cluster, offset)
    # Every request made its kernel mounts (debug lines: on no budget).
    loops = re.findall(r": debug: mounted /dev/loop\d+ on ", log)
    assert len(loops) == sessions * images, log[-3000:]
    ours = budgeted_lines(log, str(d), str(cluster.trusted / "logloop"), f"uid {uid}")
    print(f"{sessions} failed sessions of {images} trusted images in {took:.1f} s: {len(ours)} lines logged")
    assert len(ours) <= BURST + took / REFILL_S + 2, "\n".join(ours)


SUBUIDS = 150      # more than the 128 uids log_budget.h tracks at once
RANGE = 300000     # the namespace's uid 0, outside


def test_the_uids_of_a_users_namespace_share_that_users_log_budget(cluster):
    """A user with a subordinate uid range (rootless Podman, Apptainer
    --fakeroot) has 65,536 uids. Each had its own budget, so one bad
    request from each of 150 of them logged 128 lines, held every slot of
    log_budget.h's table for a minute and spent the one the uids past it
    share: another user's refusal, from a uid without a slot, was left
    out. The uids of a namespace a user made answer as that user (util/peer.c):
    its burst in all, and the other user's line is logged."""
    if cluster.multinode:
        pytest.skip("the other uid has no account: one-node layout only")
    # The namespace's owner: a uid of no account, whose budget no other
    # test reads (the namespace spends it).
    u1, other = unused_uid(), unused_uid()
    client = str(cluster.for_user(USER1, RAWCLIENT))
    offset = len(cluster.squashd_log())
    # u1 makes the namespace; root maps its uids 1.. over RANGE+1.., as
    # newuidmap does with a user's /etc/subuid range.
    script = (f"read go; for k in $(seq 1 {SUBUIDS}); do "
              f"setpriv --reuid=$k --regid=$k --clear-groups {client} --socket {cluster.socket} garbage & "
              "done; wait")
    p = subprocess.Popen(["setpriv", f"--reuid={u1}", f"--regid={u1}", "--clear-groups",
                          "unshare", "--user", "--", "sh", "-c", script],
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        def made():
            try:
                return os.readlink(f"/proc/{p.pid}/ns/user") != os.readlink("/proc/self/ns/user") \
                    and Path(f"/proc/{p.pid}/comm").read_text().strip() == "sh"
            except OSError:
                return False
        wait_until(lambda: made() or p.poll() is not None, 10, 0.02, "the namespace")
        if p.poll() is not None:
            pytest.skip(f"no user namespace for a user here: {p.stderr.read()}")
        # As newuidmap maps a rootless container: u1 is root inside.
        Path(f"/proc/{p.pid}/uid_map").write_text(f"0 {u1} 1\n1 {RANGE + 1} {SUBUIDS}\n")
        Path(f"/proc/{p.pid}/gid_map").write_text(f"0 {u1} 1\n1 {RANGE + 1} {SUBUIDS}\n")
        out, err = p.communicate("go\n", timeout=120)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    # Each is answered, or closed unread when the user's 16 connections
    # not yet read are open (which are the user's too, not each uid's).
    answers = [a for a in out.splitlines() if a.startswith("bad-request") or a == "closed"]
    assert len(answers) == SUBUIDS, (out[-500:], err[-500:])
    q = as_uid(cluster, other, "garbage")
    assert q.stdout.startswith("bad-request"), q.stdout
    wait_until(lambda: re.search(rf"bad request from uid {other} pid \d+", cluster.squashd_log()[offset:]),
               10, what="the other user's refusal in squashd's log")
    log = cluster.squashd_log()[offset:]
    theirs = [u for u in map(int, re.findall(r"bad request from uid (\d+) pid \d+", log))
              if RANGE < u <= RANGE + SUBUIDS]
    assert len(theirs) <= BURST + 2, f"{len(theirs)} lines of USER1's namespace logged"
