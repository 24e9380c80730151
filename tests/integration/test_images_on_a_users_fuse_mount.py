"""Images on a FUSE file system a user mounted (fusermount3: user_id= the
user, no allow_other) are refused, decided from the mount id and
mountinfo: squashd never holds a descriptor that only the user's server can
let go of (closing a FUSE file sends FLUSH and waits for its answer).
Issue 30, item 1; issue 37: mountinfo read exactly, and the mounts below
an overlay judged too."""

import ctypes
import os
import pwd
import re
import signal
import subprocess
import time

import pytest

from conftest import BUILD, RAWCLIENT, USER1, USER2, mountinfo, run, uid_of, wait_until
from test_squash_shell import shell_cmd

pytestmark = pytest.mark.host_release_only("squashd's mountinfo checks: the same on every release")

FILES = {"hello.txt": "hello from the image\n"}
HANG_FUSE = BUILD / "tests" / "tools" / "hang_fuse"


class UserFuse:
    """squashfuse_ll run by a user over an image holding images, mounted as
    fusermount3 mounts for a user (user_id=UID, no allow_other). /dev/fuse
    is root's only here, so the test opens it and mounts, as fusermount3
    would, and hands the connection to the user's server (/dev/fd/N)."""

    def __init__(self, cluster, user, names, source="squashfuse_ll", allow_other=False):
        src = cluster.workdir(user, "ufsrc")
        for n in names:
            (src / n).parent.mkdir(exist_ok=True)
            cluster.make_image(src / n, FILES, owner=user)
        outer = cluster.workdir(user, "ufimg") / "outer.sqfs"
        run(["mksquashfs", src, outer, "-noappend", "-quiet", "-no-progress"])
        run(["chown", user, outer])
        self.mnt = cluster.workdir(user, "ufmnt")
        pw = pwd.getpwnam(user)
        fd = os.open("/dev/fuse", os.O_RDWR)
        try:
            opts = f"fd={fd},rootmode=40000,user_id={pw.pw_uid},group_id={pw.pw_gid}" \
                   f"{',allow_other' if allow_other else ''}".encode()
            libc = ctypes.CDLL(None, use_errno=True)
            if libc.mount(source.encode(), str(self.mnt).encode(), b"fuse.squashfuse_ll",
                          ctypes.c_ulong(2 | 4), opts) != 0:
                raise OSError(ctypes.get_errno(), "mount")
            self.proc = subprocess.Popen(["runuser", "-u", user, "--", "squashfuse_ll", "-f", str(outer),
                                          f"/dev/fd/{fd}"], pass_fds=(fd,))
        finally:
            os.close(fd)
        wait_until(lambda: run(["runuser", "-u", user, "--", "test", "-e", self.mnt / names[0]],
                               check=False).returncode == 0, 10, what="the user's FUSE server")
        self.minor = [line.split()[2].split(":")[1] for line in open("/proc/self/mountinfo")
                      if line.split()[4] == str(self.mnt)][0]

    def path(self, name):
        return self.mnt / name

    def server_pid(self):
        """squashfuse_ll itself (runuser's child)."""
        return int(run(["pgrep", "-P", str(self.proc.pid), "-x", "squashfuse_ll"]).stdout.split()[0])

    def close(self):
        # Abort the connection (a stopped server included), then unmount.
        minor = self.minor
        try:
            os.kill(self.server_pid(), signal.SIGCONT)
        except Exception:
            pass
        if minor:
            try:
                with open(f"/sys/fs/fuse/connections/{minor}/abort", "w") as f:
                    f.write("1")
            except OSError:
                pass
        run(["umount", "-l", self.mnt], check=False)
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(10)


FAKE_JOB = 990301


def test_an_image_on_a_users_fuse_mount_is_refused_by_mount_not_by_asking_it(cluster):
    idle = re.search(r"(\d+) in progress", cluster.squashctl("status").stdout).group(1)
    uf = UserFuse(cluster, USER1, ["inner.sqfs"])
    fake = []
    try:
        img = uf.path("inner.sqfs")
        reason = r"is on a FUSE file system that uid \d+ mounted; squashd does not open images served " \
                 r"by a user's FUSE server"
        want = rf"image {re.escape(str(img))} {reason}"
        # sbatch refuses it before the job is queued (the plugin's check).
        err = cluster.sbatch_refuses(USER1, img)
        assert re.search(rf"squash: {re.escape(str(img))}: {reason}", err), err
        # squash-shell and root's request for the user: squashd refuses.
        p = cluster.as_user(USER1, shell_cmd(cluster, img, "--", "cat", "/squash/inner/hello.txt"),
                            timeout=60)
        assert p.returncode == 125, (p.stdout, p.stderr)
        assert re.search(want, p.stderr), p.stderr
        fake.append(FAKE_JOB)
        p = cluster.rawclient("mount", FAKE_JOB, uid_of(USER1), f"{img}:/squash/inner")
        assert p.stdout.startswith("user-error") and re.search(want, p.stdout), p.stdout
        assert cluster.list_mounts() == []
        assert re.search(r"(\d+) in progress", cluster.squashctl("status").stdout).group(1) == idle

        # Its server stopped (it answers nothing, FLUSH included): 16
        # squash-shell sessions and 32 prolog-like requests from root ask at
        # once (the counts); each ends within request_timeout (10 s here) + 5 s with the
        # reason, nothing stays in progress, another user's job runs
        # meanwhile, squashd stops and starts within 10 s.
        os.kill(uf.server_pid(), signal.SIGSTOP)
        t = time.monotonic()
        shells = [subprocess.Popen(["runuser", "-u", USER1, "--",
                                    *map(str, shell_cmd(cluster, img, "--", "true"))],
                                   stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
                  for _ in range(16)]
        mounts = []
        for i in range(1, 33):
            fake.append(FAKE_JOB + i)
            mounts.append(subprocess.Popen([RAWCLIENT, "--socket", cluster.socket, "--munge-socket",
                                            cluster.munge_socket, "mount", str(FAKE_JOB + i),
                                            str(uid_of(USER1)), f"{img}:/squash/inner"],
                                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
        other = cluster.make_image(cluster.workdir(USER2, "img") / "fine.sqfs", FILES, owner=USER2)
        t2 = time.monotonic()
        job = cluster.run_job(USER2, "cat /squash/fine/hello.txt\n", [f"--squash-image={other}"])
        assert job.state == "COMPLETED", job.output()
        print(f"another user's job meanwhile: {time.monotonic() - t2:.1f} s")
        for sh in shells:
            _, err = sh.communicate(timeout=30)
            assert sh.returncode == 125 and re.search(want, err), err
        for m in mounts:
            out, _ = m.communicate(timeout=30)
            assert out.startswith("user-error") and re.search(want, out), out
        print(f"16 sessions and 32 mounts on a stopped user's server: all ended after "
              f"{time.monotonic() - t:.1f} s")
        assert time.monotonic() - t < 15
        assert re.search(r"(\d+) in progress", cluster.squashctl("status").stdout).group(1) == idle
        node = cluster.nodes[0]
        t = time.monotonic()
        node.squashd_stop()
        node.squashd_start()
        print(f"squashd stop and start with the user's server stopped: {time.monotonic() - t:.1f} s")
        assert time.monotonic() - t < 10
    finally:
        for j in fake:
            cluster.rawclient("release", j)
        uf.close()


def test_an_image_reached_through_another_mount_namespace_is_refused(cluster):
    """A path through /proc/PID/root of a user's process in a mount
    namespace of its own names a mount squashd's mountinfo does not list,
    where the user may have mounted anything (their own FUSE file system
    among them): refused, at submission and in squashd, without opening
    it. Here the user's namespace holds a tmpfs with a copy of a good
    image, which would otherwise be mounted."""
    img = cluster.make_image(cluster.workdir(USER1, "elsewhere") / "good.sqfs", FILES, owner=USER1)
    ready = cluster.workdir(USER1, "ns") / "ready"
    ns = subprocess.Popen(["runuser", "-u", USER1, "--", "unshare", "-Urm", "sh", "-c",
                           f"mount -t tmpfs t /mnt && cp {img} /mnt/good.sqfs && touch {ready} && "
                           "exec sleep 120"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        wait_until(lambda: ready.exists() or ns.poll() is not None, 10, what="the user's namespace")
        if not ready.exists():
            pytest.skip(f"no user namespace for {USER1} here: {ns.stderr.read()}")
        sleeper = int(run(["pgrep", "-P", str(ns.pid), "-x", "sleep"]).stdout.split()[0]) \
            if run(["pgrep", "-P", str(ns.pid), "-x", "sleep"], check=False).returncode == 0 else None
        # runuser's child is unshare, which exec'd sh, which exec'd sleep.
        pid = sleeper or int(run(["pgrep", "-P", str(ns.pid)]).stdout.split()[0])
        path = f"/proc/{pid}/root/mnt/good.sqfs"
        reason = r"is on a mount of another mount namespace \(a path through /proc/PID/root\?\)"
        # sbatch resolves the path first: /proc/PID/root reads as "/",
        # where the file is not.
        err = cluster.sbatch_refuses(USER1, path)
        assert re.search(rf"squash: {re.escape(path)}: (No such file or directory|{reason})", err), err
        p = cluster.rawclient("mount", FAKE_JOB + 100, uid_of(USER1), f"{path}:/squash/elsewhere")
        assert p.stdout.startswith("user-error") and re.search(rf"image {re.escape(path)} {reason}",
                                                                p.stdout), p.stdout
        assert cluster.list_mounts() == []
        # The same image by its own path is fine.
        p = cluster.rawclient("mount", FAKE_JOB + 101, uid_of(USER1), f"{img}:/squash/elsewhere")
        assert p.returncode == 0 and p.stdout.startswith("ok"), p.stdout
    finally:
        cluster.rawclient("release", FAKE_JOB + 100)
        cluster.rawclient("release", FAKE_JOB + 101)
        ns.kill()
        run(["pkill", "-u", USER1, "-x", "sleep"], check=False)
        ns.wait(10)


def super_options(mount_point):
    """The super options (after " - ", the third field) of the mount at
    mount_point in this namespace's mountinfo."""
    for line in open("/proc/self/mountinfo"):
        left, right = line.rstrip("\n").split(" - ", 1)
        if left.split(" ")[4] == str(mount_point):
            return right.split(" ", 2)[2]
    raise AssertionError(f"{mount_point} not in mountinfo")


USERS_FUSE = r"a FUSE file system that uid {uid} mounted; squashd does not open images served by a user's " \
             r"FUSE server"
USER_FUSE_REASON = "is on " + USERS_FUSE


def test_a_users_fuse_mount_whose_source_reads_like_allow_other_is_still_the_users(cluster):
    """fusermount3 lets a user name the source (fsname=). mountinfo was read
    with fixed widths: a source of 15 characters and then "allow_other"
    shifted the fields, the rest of the source was taken for the super
    options, and the user's mount passed as root's with allow_other. The
    fields are now read as proc(5) defines them: refused at submission and
    by squashd, with the user's uid."""
    source = "x" * 15 + "allow_other"
    uf = UserFuse(cluster, USER1, ["inner.sqfs"], source=source)
    try:
        line = [m for m in mountinfo() if m["mount_point"] == str(uf.mnt)]
        assert line and line[0]["source"] == source, line
        assert f"user_id={uid_of(USER1)}" in super_options(uf.mnt).split(",")
        img = uf.path("inner.sqfs")
        reason = USER_FUSE_REASON.format(uid=uid_of(USER1))
        err = cluster.sbatch_refuses(USER1, img)
        assert re.search(rf"squash: {re.escape(str(img))}: {reason}", err), err
        p = cluster.rawclient("mount", FAKE_JOB + 200, uid_of(USER1), f"{img}:/squash/inner")
        assert p.stdout.startswith("user-error") and re.search(rf"image {re.escape(str(img))} {reason}",
                                                                p.stdout), p.stdout
        assert cluster.list_mounts() == []
    finally:
        cluster.rawclient("release", FAKE_JOB + 200)
        uf.close()


def test_an_image_on_an_overlay_or_a_bind_over_a_users_fuse_mount_is_refused(cluster):
    """An overlay whose lower layer is a directory of a user's FUSE mount
    shows as "overlay" in mountinfo, yet its files are read, and flushed on
    close, by that user's server. Root mounts one here, in squashd's
    namespace, over a user's mount with allow_other (fusermount3 makes such
    mounts for users when fuse.conf has user_allow_other; without it root
    could not reach the layer). The check follows the overlay's layers
    through mountinfo: refused at submission and by squashd. A bind of a
    directory of the user's mount is the same superblock: mountinfo shows
    it as the user's FUSE mount (checked here, not assumed), and an image
    reached through it is refused as one."""
    uid = uid_of(USER1)
    uf = UserFuse(cluster, USER1, ["sub/inner.sqfs"], allow_other=True)
    base = cluster.workdir("root", "stack")
    empty, merged, bound = base / "empty", base / "merged", base / "bound"
    for d in (empty, merged, bound):
        d.mkdir()
    mounted = []
    try:
        run(["mount", "-t", "overlay", "overlay", "-o", f"lowerdir={uf.mnt}/sub:{empty}", merged])
        mounted.append(merged)
        run(["mount", "--bind", uf.mnt / "sub", bound])
        mounted.append(bound)
        by_point = {m["mount_point"]: m for m in mountinfo()}
        assert by_point[str(merged)]["fstype"] == "overlay", by_point[str(merged)]
        assert by_point[str(bound)]["fstype"] == "fuse.squashfuse_ll", by_point[str(bound)]
        assert by_point[str(bound)]["root"] == "/sub", by_point[str(bound)]
        assert f"user_id={uid}" in super_options(bound).split(",")

        img = merged / "inner.sqfs"
        reason = rf"is on overlay at {re.escape(str(merged))}, with the layer {re.escape(str(uf.mnt))}/sub, " \
                 rf"which is on {USERS_FUSE.format(uid=uid)}"
        err = cluster.sbatch_refuses(USER1, img)
        assert re.search(rf"squash: {re.escape(str(img))}: {reason}", err), err
        p = cluster.rawclient("mount", FAKE_JOB + 300, uid, f"{img}:/squash/inner")
        assert p.stdout.startswith("user-error") and re.search(rf"image {re.escape(str(img))} {reason}",
                                                                p.stdout), p.stdout

        img = bound / "inner.sqfs"
        p = cluster.rawclient("mount", FAKE_JOB + 301, uid, f"{img}:/squash/inner")
        assert p.stdout.startswith("user-error") and re.search(
            rf"image {re.escape(str(img))} {USER_FUSE_REASON.format(uid=uid)}", p.stdout), p.stdout
        assert cluster.list_mounts() == []
    finally:
        cluster.rawclient("release", FAKE_JOB + 300)
        cluster.rawclient("release", FAKE_JOB + 301)
        for m in reversed(mounted):
            run(["umount", m], check=False)
        uf.close()


def test_a_users_fuse_server_that_never_answers_a_lookup_is_never_asked(cluster):
    """A user's FUSE server that reads each LOOKUP and never answers
    (tests/tools/hang_fuse over a directory holding an image, mounted for
    the user as fusermount3 would): a process waiting for that answer
    cannot even be killed. squashd's opener child (as the user) looked the
    image's path up with open(2) and stayed so, in squashd's cgroup, one
    per request (found by a review, 2026-11-30). It now walks the path a
    component at a time and judges each mount before looking anything up
    in it (proto/user_fuse_walk.c): the request is refused at once with
    the reason, and no process of the user's waits. The same for an upper
    directory there (:rw=DIR, daemon/mount/overlay_upper.c)."""
    src = cluster.workdir(USER1, "hangsrc")
    cluster.make_image(src / "a.sqfs", FILES, owner=USER1)
    mnt = cluster.workdir(USER1, "hangmnt")
    pw = pwd.getpwnam(USER1)
    fd = os.open("/dev/fuse", os.O_RDWR)
    server = None
    try:
        opts = f"fd={fd},rootmode=40000,user_id={pw.pw_uid},group_id={pw.pw_gid}".encode()
        libc = ctypes.CDLL(None, use_errno=True)
        if libc.mount(b"hang_fuse", str(mnt).encode(), b"fuse.hang", ctypes.c_ulong(1 | 2 | 4), opts) != 0:
            raise OSError(ctypes.get_errno(), "mount")
        server = subprocess.Popen(["runuser", "-u", USER1, "--", cluster.for_user(USER1, HANG_FUSE), src,
                                   f"/dev/fd/{fd}", "--hang", "lookup", "--uid", "any"],
                                  pass_fds=(fd,), stdout=subprocess.PIPE, text=True)
    finally:
        os.close(fd)
    minor = [line.split()[2].split(":")[1] for line in open("/proc/self/mountinfo")
             if line.split()[4] == str(mnt)][0]
    try:
        assert server.stdout.readline().strip() == "ready"
        img = mnt / "a.sqfs"
        want = rf"image {re.escape(str(img))} is on a FUSE file system that uid \d+ mounted"
        t = time.monotonic()
        p = cluster.rawclient("mount", FAKE_JOB + 100, uid_of(USER1), f"{img}:/squash/a")
        took = time.monotonic() - t
        assert p.stdout.startswith("user-error") and re.search(want, p.stdout), p.stdout
        assert took < 5, f"refused after {took:.1f} s"
        # An upper directory there (:rw=DIR), opened as the user the same way.
        good = cluster.make_image(cluster.workdir(USER1, "good") / "g.sqfs", FILES, owner=USER1)
        upper = mnt / "upper"
        t = time.monotonic()
        p = cluster.rawclient("mount", FAKE_JOB + 101, uid_of(USER1), f"{good}:/squash/g:rw={upper}")
        took = time.monotonic() - t
        assert p.stdout.startswith("user-error") and re.search(
            rf"upper directory {re.escape(str(upper))} is on a FUSE file system that uid \d+ mounted",
            p.stdout), p.stdout
        assert took < 5, f"refused after {took:.1f} s"
        cluster.rawclient("release", FAKE_JOB + 101)
        assert cluster.list_mounts() == []
        time.sleep(0.5)
        uid = uid_of(USER1)
        waiting = []
        for pid in filter(str.isdigit, os.listdir("/proc")):
            try:
                status = open(f"/proc/{pid}/status").read()
            except OSError:
                continue
            state = re.search(r"^State:\s+(\S)", status, re.M).group(1)
            uids = re.search(r"^Uid:\s+(\d+)", status, re.M).group(1)
            if state == "D" and int(uids) == uid:
                waiting.append((pid, open(f"/proc/{pid}/comm").read().strip()))
        assert waiting == [], f"processes of uid {uid} waiting on the hung server: {waiting}"
    finally:
        cluster.rawclient("release", FAKE_JOB + 100)
        cluster.rawclient("release", FAKE_JOB + 101)
        try:
            with open(f"/sys/fs/fuse/connections/{minor}/abort", "w") as f:
                f.write("1")
        except OSError:
            pass
        run(["umount", "-l", mnt], check=False)
        server.kill()
        server.wait(10)


def test_a_target_in_a_users_fuse_mount_fails_the_job_without_looking_into_it(cluster):
    """A target outside squashd's base directory (a site's allowed_targets
    may list other prefixes) is walked from / as root by the job's task
    (spank/path_walk.c). Where the walk would enter a FUSE file system a
    user mounted with allow_other (fuse.conf's user_allow_other) and whose
    server never answers, the task's lookup would wait for ever, not even
    SIGKILL ending it, and the unkillable task would drain the node. The
    walk judges each mount it enters from its mount id and mountinfo
    first: the job fails, saying why, and the node stays up (found by a
    review, 2026-12-02)."""
    from test_an_exact_target_the_site_allows import allowed_targets_too
    c = cluster
    if c.multinode:
        pytest.skip("one-node layout: the user's mount is made in slurmd's namespace")
    scratch = c.dir / "scratch"
    scratch.mkdir(mode=0o755, exist_ok=True)
    mnt = scratch / USER1
    mnt.mkdir(exist_ok=True)
    pw = pwd.getpwnam(USER1)
    os.chown(mnt, pw.pw_uid, pw.pw_gid)
    src = c.workdir(USER1, "tgtsrc")
    (src / "x").mkdir(exist_ok=True)
    img = c.make_image(c.workdir(USER1, "tgtimg") / "a.sqfs", FILES, owner=USER1)
    # Mounted as fusermount3 mounts for a user with user_allow_other, in
    # slurmd's mount namespace (the cluster's slurmd runs in one of its own,
    # which the host's mounts do not reach), where the job's steps start.
    in_slurmd = ["nsenter", "-t", (c.dir / "run" / "slurmd.pid").read_text().strip(), "-m", "--"]
    opts = f"rootmode=40000,user_id={pw.pw_uid},group_id={pw.pw_gid},allow_other"
    mount = ("import ctypes, sys\n"
             "libc = ctypes.CDLL(None, use_errno=True)\n"
             "if libc.mount(b'hang_fuse', sys.argv[1].encode(), b'fuse.hang', ctypes.c_ulong(1 | 2 | 4),\n"
             "              sys.argv[2].encode()) != 0:\n"
             "    sys.exit(f'mount: errno {ctypes.get_errno()}')\n")
    fd = os.open("/dev/fuse", os.O_RDWR)
    server = None
    try:
        p = subprocess.run([*in_slurmd, "python3", "-c", mount, str(mnt), f"fd={fd},{opts}"], pass_fds=(fd,),
                           capture_output=True, text=True, timeout=30)
        assert p.returncode == 0, p.stderr
        server = subprocess.Popen(["runuser", "-u", USER1, "--", c.for_user(USER1, HANG_FUSE), src,
                                   f"/dev/fd/{fd}", "--hang", "lookup", "--uid", "any"],
                                  pass_fds=(fd,), stdout=subprocess.PIPE, text=True)
    finally:
        os.close(fd)
    slurmd_mounts = run([*in_slurmd, "cat", "/proc/self/mountinfo"]).stdout.splitlines()
    minor = [line.split()[2].split(":")[1] for line in slurmd_mounts if line.split()[4] == str(mnt)][0]
    try:
        assert server.stdout.readline().strip() == "ready"
        with allowed_targets_too(c, str(scratch)):
            d = c.workdir(USER1, "tgtjob")
            job = c.sbatch(USER1, c.write_script(d, "echo ran\n"), [f"--squash-image={img}:{mnt}/x"], cwd=d)
            assert not isinstance(job, subprocess.CompletedProcess), job.stderr
            job.wait(timeout=60)
            out = job.output()
            assert job.state == "FAILED", (job.state, out)
            assert "ran" not in out.split(), out
            assert (f"{mnt} is on a FUSE file system that a user mounted, one mounted without "
                    "allow_other, or a mount that cannot be checked") in out, out
            assert c.node_state() == "idle"
    finally:
        try:
            with open(f"/sys/fs/fuse/connections/{minor}/abort", "w") as f:
                f.write("1")
        except OSError:
            pass
        run([*in_slurmd, "umount", "-l", mnt], check=False)
        if server:
            server.kill()
            server.wait(10)
        mnt.rmdir()
        scratch.rmdir()
