"""Only root's own descriptor of a root-controlled file below a trusted
prefix, reached by squashd itself in its own mount namespace, gets a
kernel squashfs mount (daemon/core/trusted_image.c). Every other way a
user can present a root-owned file under a trusted name goes to FUSE, with
the reason in squashd's log (docs/security.md, "Trusted images")."""

import os
import re
import shutil
import struct
import subprocess
import tempfile
from pathlib import Path

import pytest

from conftest import (BUILD, USER1, BlockingJob, loop_backing_files, run, send_hup_and_wait,
                      setting, uid_of, wait_until)

pytestmark = pytest.mark.host_release_only("squashd's trust walk and the kernel's mounts: the same on every release")

FILES = {"hello.txt": "hello from the image\n"}
SLOWFS = BUILD / "tests" / "bench" / "slowfs"
# Job ids no real job of the session uses.
FAKE_JOB = 990101


def mode_of(cluster, image):
    """'kernel' or 'fuse' for the node's mount of image, from squashctl's
    listing and /proc mountinfo."""
    rows = [line for line in cluster.squashctl("list").stdout.splitlines()
            if re.search(rf"(^|\s){re.escape(str(image))}(\s|$)", line)]
    assert len(rows) == 1, cluster.squashctl("list").stdout
    fstypes = {m["fstype"] for m in cluster.node_mounts()}
    return rows[0].split()[0], fstypes


def mount_as(cluster, job, user, image, target):
    p = cluster.rawclient("mount", job, uid_of(user), f"{image}:{target}")
    assert p.returncode == 0, p.stdout + p.stderr
    return p


def outer_image_holding(cluster, user, inner):
    """A user's own image (FUSE) that holds a copy of inner, stored as root's
    0644 file: bytes the user serves, dressed as a trusted image."""
    d = cluster.workdir(user, "outer")
    src = Path(tempfile.mkdtemp(prefix="outer.", dir=cluster.dir))
    try:
        src.chmod(0o755)
        shutil.copy(inner, src / inner.name)
        (src / inner.name).chmod(0o644)
        run(["mksquashfs", src, d / "outer.sqfs", "-noappend", "-quiet", "-no-progress",
             "-all-root"])
    finally:
        shutil.rmtree(src)
    os.chown(d / "outer.sqfs", uid_of(user), -1)
    return d / "outer.sqfs"


def test_a_root_file_the_user_serves_under_a_trusted_name_is_never_the_kernels(cluster):
    """The attack of issue 22: in a user and mount namespace of their own,
    the user binds their FUSE mount over the trusted prefix and names the
    file through /proc/PID/root. A genuine trusted image of the same name
    exists in squashd's namespace, so the name matches and only the objects
    (device, inode, mount id) tell the two apart. The file is on a mount
    squashd's namespace does not list, so it is refused before it is
    opened (issue 30; the trust walk gave it FUSE before that); never a
    kernel mount."""
    os.chmod(cluster.trusted, 0o755)
    genuine = cluster.make_image(cluster.trusted / "evil.sqfs", FILES, owner="root")
    evil_src = cluster.make_image(cluster.workdir("root", "evil") / "evil.sqfs",
                                  {"hello.txt": "bytes the user serves\n"}, owner="root")
    outer = outer_image_holding(cluster, USER1, evil_src)
    ns_pid_file = outer.parent / "nspid"
    # The job binds its own view of the user's image over the trusted
    # prefix in a namespace of its own, and waits there.
    before = (f'unshare -Urm sh -c \'mount --bind /squash/outer {cluster.trusted} && '
              f'echo $$ > {ns_pid_file} && exec sleep 300\' &\n'
              f'for i in $(seq 1 100); do [ -s {ns_pid_file} ] && break; sleep 0.1; done\n')
    blk = BlockingJob(cluster, USER1, f"{outer}:/squash/outer", before=before)
    try:
        blk.wait_ready()
        ns_pid = int(ns_pid_file.read_text())
        forged = f"/proc/{ns_pid}/root{cluster.trusted}/evil.sqfs"
        # The user's namespace really shows the user's bytes under that name.
        seen = run(["runuser", "-u", USER1, "--", "cmp", forged, evil_src], check=False)
        assert seen.returncode == 0, seen.stdout + seen.stderr
        loops_before = set(loop_backing_files())
        p = cluster.rawclient("mount", FAKE_JOB, uid_of(USER1), f"{forged}:/squash/evil")
        assert p.stdout.startswith("user-error") and "is on a mount of another mount namespace" in p.stdout, \
            p.stdout + p.stderr
        assert not [m for m in cluster.list_mounts() if m["image"] == forged], cluster.list_mounts()
        # No loop device for it: the kernel parsed none of the user's bytes.
        new_loops = {d: f for d, f in loop_backing_files().items() if d not in loops_before}
        assert not new_loops, new_loops
        # The genuine file of that name still gets the kernel.
        mount_as(cluster, FAKE_JOB + 1, USER1, genuine, "/squash/genuine")
        assert mode_of(cluster, genuine)[0] == "kernel"
        assert str(genuine) in loop_backing_files().values(), loop_backing_files()
    finally:
        cluster.rawclient("release", FAKE_JOB)
        cluster.rawclient("release", FAKE_JOB + 1)
        blk.release()
        genuine.unlink()


def test_trusted_names_reached_through_links_or_user_directories_get_fuse(cluster):
    """A symbolic link below the prefix (squashd follows none when it walks),
    and a root-owned image in a directory below the prefix that a user
    controls (the user could swap it), both go to FUSE."""
    os.chmod(cluster.trusted, 0o755)
    real = cluster.make_image(cluster.workdir("root", "real") / "real.sqfs", FILES,
                              owner="root")
    hop = cluster.trusted / "hop"
    userdir = cluster.trusted / "userdir"
    userdir.mkdir(mode=0o755)
    os.chown(userdir, uid_of(USER1), -1)
    hop.symlink_to(real.parent)
    in_userdir = cluster.make_image(userdir / "root-owned.sqfs", FILES, owner="root")
    offset = len(cluster.squashd_log())
    try:
        # Through the link: the user's descriptor names the real file,
        # which lies outside the prefix: no candidate, plain FUSE.
        mount_as(cluster, FAKE_JOB + 2, USER1, hop / "real.sqfs", "/squash/hop")
        assert mode_of(cluster, hop / "real.sqfs")[0] == "fuse"
        mount_as(cluster, FAKE_JOB + 3, USER1, in_userdir, "/squash/userdir")
        assert mode_of(cluster, in_userdir)[0] == "fuse"
        log = cluster.squashd_log()[offset:]
        assert re.search(r"goes to FUSE, not the kernel: .*directory userdir is not root-controlled "
                         rf"\(owner uid {uid_of(USER1)}", log), log
    finally:
        cluster.rawclient("release", FAKE_JOB + 2)
        cluster.rawclient("release", FAKE_JOB + 3)
        hop.unlink()
        shutil.rmtree(userdir)


def test_trusted_image_on_a_file_system_type_not_allowed_gets_fuse(cluster):
    """kernel_fs_types: a trusted image on a file system the admin did not
    list goes to FUSE, the log names the type; the setting applies at
    reload, for mounts made from then on."""
    os.chmod(cluster.trusted, 0o755)
    img = cluster.make_image(cluster.trusted / "fstype.sqfs", FILES, owner="root")
    conf = cluster.dir / "squashd.conf"
    original = conf.read_text()
    offset = len(cluster.squashd_log())
    try:
        conf.write_text(original + "kernel_fs_types = lustre gpfs\n")
        send_hup_and_wait(cluster, "setting(s) applied")
        assert setting(cluster, "kernel_fs_types") == "lustre gpfs"
        mount_as(cluster, FAKE_JOB + 4, USER1, img, "/squash/fstype")
        assert mode_of(cluster, img)[0] == "fuse"
        log = cluster.squashd_log()[offset:]
        assert re.search(r"goes to FUSE, not the kernel: .*fstype\.sqfs is on a \S+ file system, "
                         r"not one of kernel_fs_types", log), log
        # FUSE is no type kernel mounts may read from, whatever the admin writes.
        conf.write_text(original + "kernel_fs_types = ext4 fuse\n")
        log = send_hup_and_wait(cluster, "keeping the settings in force")
        assert "a FUSE server's bytes are never trusted" in log, log
    finally:
        cluster.rawclient("release", FAKE_JOB + 4)
        conf.write_text(original)
        send_hup_and_wait(cluster, "setting(s) applied")
        img.unlink()
    # Restored: the default list again.
    assert "ext4" in setting(cluster, "kernel_fs_types")


def test_links_swapped_while_squashd_checks_never_give_the_kernel_other_bytes(cluster):
    """A user flips a symbolic link of theirs between a genuine trusted
    image and a root-owned copy on their own FUSE mount (named through
    their job's /proc/PID/root) while squashd opens and checks it, and
    hard-links what they can. Whatever each request
    caught, a kernel mount only ever reads the genuine file."""
    os.chmod(cluster.trusted, 0o755)
    genuine = cluster.make_image(cluster.trusted / "raced.sqfs", FILES, owner="root")
    evil_src = cluster.make_image(cluster.workdir("root", "evil") / "raced.sqfs",
                                  {"hello.txt": "bytes the user serves\n"}, owner="root")
    outer = outer_image_holding(cluster, USER1, evil_src)
    d = outer.parent
    link = d / "flip"
    # A directory link: the image itself may not be a link (refused).
    flipper = (f"while [ ! -e {d}/stop ]; do ln -sfn {genuine.parent} {link}.a && mv -T {link}.a {link}; "
               f"ln -sfn /proc/$$/root/squash/outer {link}.b && mv -T {link}.b {link}; done")
    # A hard link of root's trusted image into the user's directory: the
    # kernel refuses it (protected_hardlinks), or it is simply not below
    # the prefix.
    hard = run(["runuser", "-u", USER1, "--", "ln", genuine, d / "hard.sqfs"], check=False)
    blk = BlockingJob(cluster, USER1, f"{outer}:/squash/outer", before=f"({flipper}) &\n")
    kernel_seen = 0
    outcomes = []
    try:
        blk.wait_ready()
        wait_until(link.is_symlink, 10, what="the user's link to flip")
        # Each request catches the link at one of its two targets, about
        # half and half; go on until one has caught the genuine file (the
        # race's other side is refused: a path into another mount namespace).
        for i in range(64):
            if i >= 8 and 0 in outcomes:
                break
            job = FAKE_JOB + 100 + i
            p = cluster.rawclient("mount", job, uid_of(USER1), f"{link}/raced.sqfs:/squash/raced{i}")
            outcomes.append(p.returncode)
            if p.returncode == 0:
                for row in cluster.squashctl("list").stdout.splitlines():
                    if row.startswith("kernel "):
                        kernel_seen += 1
                        assert str(genuine) in loop_backing_files().values(), \
                            (row, loop_backing_files())
                assert not any(str(d) in f or "/squash/" in f
                               for f in loop_backing_files().values()), loop_backing_files()
            cluster.rawclient("release", job)
        if hard.returncode == 0:
            mount_as(cluster, FAKE_JOB + 30, USER1, d / "hard.sqfs", "/squash/hard")
            assert mode_of(cluster, d / "hard.sqfs")[0] == "fuse"
            cluster.rawclient("release", FAKE_JOB + 30)
        print(f"{len(outcomes)} requests through a flipping link: exit codes {outcomes}, {kernel_seen} "
              f"kernel mounts, all of the genuine file; hard link: "
              f"{'made' if hard.returncode == 0 else 'refused'}")
        assert 0 in outcomes, outcomes
    finally:
        (d / "stop").touch()
        blk.release()
        genuine.unlink()


def test_an_image_promoted_while_its_former_owner_holds_it_open_for_writing_gets_fuse(cluster):
    """Issue 30's measured hole: a user keeps their image open read-write
    while an admin promotes it (chown root, chmod 0644, mv below the
    prefix). Owner and mode now pass, but the user's descriptor could still
    rewrite every byte the kernel would parse: no read lease can be taken
    on a file open for writing, so squashd gives it FUSE and says why. Once
    the writer is gone the same file gets the kernel."""
    os.chmod(cluster.trusted, 0o755)
    d = cluster.workdir(USER1, "promote")
    img = cluster.make_image(d / "promoted.sqfs", FILES, owner=USER1)
    ready = d / "writer-ready"
    writer = subprocess.Popen(["python3", "-c",
                               "import os, sys, time\n"
                               f"fd = os.open({str(img)!r}, os.O_RDWR)\n"
                               f"open({str(ready)!r}, 'w').close()\n"
                               "time.sleep(120)\n"], user=uid_of(USER1))
    promoted = cluster.trusted / "promoted.sqfs"
    offset = len(cluster.squashd_log())
    try:
        wait_until(ready.exists, 10, 0.1, "the user's writer to open the image")
        os.chown(img, 0, 0)
        os.chmod(img, 0o644)
        os.rename(img, promoted)  # the same inode, below the prefix
        mount_as(cluster, FAKE_JOB + 20, USER1, promoted, "/squash/promoted")
        assert mode_of(cluster, promoted)[0] == "fuse"
        log = cluster.squashd_log()[offset:]
        assert re.search(r"goes to FUSE, not the kernel: .*promoted\.sqfs is open for writing somewhere",
                         log), log
        cluster.rawclient("release", FAKE_JOB + 20)
        wait_until(lambda: not cluster.list_mounts(), 20, 0.1, "the FUSE mount to go")
        writer.kill()
        writer.wait(10)
        mount_as(cluster, FAKE_JOB + 21, USER1, promoted, "/squash/promoted")
        assert mode_of(cluster, promoted)[0] == "kernel"
    finally:
        if writer.poll() is None:
            writer.kill()
            writer.wait(10)
        cluster.rawclient("release", FAKE_JOB + 20)
        cluster.rawclient("release", FAKE_JOB + 21)
        wait_until(lambda: not cluster.list_mounts(), 20, 0.1, "the mounts to go")
        promoted.unlink(missing_ok=True)


def posix_acl(entries):
    """The kernel's system.posix_acl_access value: version 2, then (tag,
    perm, id) per entry."""
    return struct.pack("<I", 2) + b"".join(struct.pack("<HHI", tag, perm, ident)
                                           for tag, perm, ident in entries)


def test_a_trusted_image_carrying_an_acl_gets_fuse(cluster):
    """Issue 30: an ACL can grant write that the mode bits do not show (the
    mode's group bits are only the ACL's mask), so a file below the prefix
    that carries one goes to FUSE, with the reason; without it, the kernel."""
    os.chmod(cluster.trusted, 0o755)
    img = cluster.make_image(cluster.trusted / "acl.sqfs", FILES, owner="root")
    undefined = 0xFFFFFFFF
    acl = posix_acl([(0x01, 6, undefined),     # user::rw-
                     (0x02, 6, uid_of(USER1)),  # user:squser1:rw-
                     (0x04, 4, undefined),     # group::r--
                     (0x10, 4, undefined),     # mask::r-- (the mode stays 0644)
                     (0x20, 4, undefined)])    # other::r--
    try:
        os.setxattr(img, "system.posix_acl_access", acl)
    except OSError as e:
        img.unlink()
        pytest.skip(f"the file system of {cluster.trusted} takes no POSIX ACL: {e}")
    offset = len(cluster.squashd_log())
    try:
        assert os.stat(img).st_mode & 0o7777 == 0o644
        mount_as(cluster, FAKE_JOB + 30, USER1, img, "/squash/acl")
        assert mode_of(cluster, img)[0] == "fuse"
        log = cluster.squashd_log()[offset:]
        assert re.search(r"goes to FUSE, not the kernel: .*acl\.sqfs carries an ACL "
                         r"\(system\.posix_acl_access\)", log), log
        cluster.rawclient("release", FAKE_JOB + 30)
        wait_until(lambda: not cluster.list_mounts(), 20, 0.1, "the FUSE mount to go")
        os.removexattr(img, "system.posix_acl_access")
        mount_as(cluster, FAKE_JOB + 31, USER1, img, "/squash/acl")
        assert mode_of(cluster, img)[0] == "kernel"
    finally:
        cluster.rawclient("release", FAKE_JOB + 30)
        cluster.rawclient("release", FAKE_JOB + 31)
        wait_until(lambda: not cluster.list_mounts(), 20, 0.1, "the mounts to go")
        img.unlink(missing_ok=True)


def test_a_sticky_directory_below_the_prefix_is_not_trusted(cluster):
    """Issue 30: in a sticky world-writable directory users cannot rename
    root's files, but they can make entries of their own and mount on them;
    so the exemption holds only above a prefix (/tmp on the way to
    /tmp/images), never below it: a root-owned image in a 1777 directory
    below the prefix goes to FUSE, with the reason."""
    os.chmod(cluster.trusted, 0o755)
    sticky = cluster.trusted / "scratch"
    sticky.mkdir()
    sticky.chmod(0o1777)
    img = cluster.make_image(sticky / "sticky.sqfs", FILES, owner="root")
    offset = len(cluster.squashd_log())
    try:
        mount_as(cluster, FAKE_JOB + 32, USER1, img, "/squash/sticky")
        assert mode_of(cluster, img)[0] == "fuse"
        log = cluster.squashd_log()[offset:]
        assert re.search(r"goes to FUSE, not the kernel: .*directory scratch is not root-controlled "
                         r"\(owner uid 0, mode 1777\)", log), log
    finally:
        cluster.rawclient("release", FAKE_JOB + 32)
        wait_until(lambda: not cluster.list_mounts(), 20, 0.1, "the mounts to go")
        shutil.rmtree(sticky)


def test_the_walk_never_asks_a_fuse_server_on_its_way(cluster):
    """Issue 30, item 4: squashd's walk to a trusted file reads each
    mount's type from mountinfo before it looks anything up below it, and
    enters no FUSE mount. Here an allow_other FUSE mount of root's (slowfs,
    which never answers uid 0) lies below the prefix and serves a
    root-owned image: the user's opener reads it, squashd's walk stops at
    the mount without a request to it, and the image is served by the
    user's reader. The old walk looked the file up and opened it as root,
    and the request hung with the server."""
    src = Path(tempfile.mkdtemp(prefix="hung-src.", dir=cluster.dir))
    src.chmod(0o755)
    img = cluster.make_image(src / "inner.sqfs", FILES, owner="root")
    img.chmod(0o644)
    os.chmod(cluster.trusted, 0o755)
    mnt = cluster.trusted / "hung"
    mnt.mkdir()
    server = subprocess.Popen([SLOWFS, src, mnt, "-f", "-o", "allow_other,delay_us=0,stall_uid=0"])
    job = FAKE_JOB + 40
    idle = re.search(r"(\d+) in progress", cluster.squashctl("status").stdout).group(1)
    try:
        wait_until(lambda: run(["runuser", "-u", USER1, "--", "test", "-r", mnt / "inner.sqfs"],
                               check=False).returncode == 0, 10, 0.1, "slowfs to serve the user")
        offset = len(cluster.squashd_log())
        p = cluster.rawclient("mount", job, uid_of(USER1), f"{mnt / 'inner.sqfs'}:/squash/hung", timeout=30)
        assert p.returncode == 0, p.stdout + p.stderr
        assert mode_of(cluster, mnt / "inner.sqfs")[0] == "fuse"
        log = cluster.squashd_log()[offset:]
        assert re.search(r"goes to FUSE, not the kernel: .*hung is on a FUSE mount \(fuse\.slowfs\); "
                         r"squashd's walk enters none", log), log
        assert re.search(r"(\d+) in progress", cluster.squashctl("status").stdout).group(1) == idle
    finally:
        cluster.rawclient("release", job)
        wait_until(lambda: not cluster.list_mounts(), 20, 0.1, "the mounts to go")
        # Abort the connection (its stalled workers included), then unmount.
        minor = [line.split()[2].split(":")[1] for line in open("/proc/self/mountinfo")
                 if line.split()[4] == str(mnt)]
        for m in minor:
            try:
                with open(f"/sys/fs/fuse/connections/{m}/abort", "w") as f:
                    f.write("1")
            except OSError:
                pass  # no fusectl here: killing the server ends the connection
        run(["umount", "-l", mnt], check=False)
        server.kill()
        server.wait(10)
        mnt.rmdir()
        shutil.rmtree(src)
