"""squash-reader's union of bundles (`squash-reader --union`) shows the
tree the kernel's overlayfs shows for the same bundles as lower layers
(each loop-mounted by the kernel's squashfs, the last on top). The bundles
hold what a dataset's may: the same directories in several bundles
(merged), files shadowed by later bundles, a file over a directory and a
directory over a file, whiteouts (character devices 0/0) at the top of a
merged directory and deeper, opaque directories (trusted.overlay.opaque =
y), a name whited out and brought back higher up, xattrs on files and on
merged directories, hard links and symlinks. Both views must agree on
every entry: stat (mode, uid, gid, size, nlink, mtime; inode numbers and
devices are each file system's own), readdir's names (overlayfs lists a
merged directory in an order of its own), file contents, link targets,
xattr names and values (overlayfs' own trusted.overlay.* hidden), and the
errors of absent names. Runs the reader alone, as root, without a
cluster; everything it mounts is unmounted whatever happens."""

import contextlib
import errno
import hashlib
import os
import shutil
import stat
import subprocess
import tempfile
from pathlib import Path

import pytest

from conftest import mountinfo, run, wait_until
from reader_and_kernel import READER, fuse_mount, mounted, unmount_and_wait

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="mounts: needs root")


def whiteout(p):
    os.mknod(p, stat.S_IFCHR | 0o600, os.makedev(0, 0))


def opaque(p):
    os.setxattr(p, "trusted.overlay.opaque", b"y")


def data(n, seed):
    return hashlib.shake_256(seed.encode()).digest(n)


def write(p, n, seed=None):
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_bytes(data(n, seed or str(p)))


def make_bundles(root):
    """Three bundle trees, the first lowest; returns their directories."""
    b = [root / f"b{i}" for i in range(3)]
    for d in b:
        d.mkdir()
    # bundle 0
    write(b[0] / "shared" / "a", 100)
    write(b[0] / "shared" / "b", 5000)
    write(b[0] / "shared" / "sub" / "x", 10)
    write(b[0] / "shared" / "sub" / "deep" / "only0", 7)
    write(b[0] / "gone", 20)
    write(b[0] / "back", 21)
    write(b[0] / "opq" / "old1", 30)
    (b[0] / "opq" / "olddir").mkdir()
    write(b[0] / "dir-then-file" / "inside", 40)
    write(b[0] / "file-then-dir", 50)
    write(b[0] / "only0" / "tree" / "f", 60)
    write(b[0] / "hard" / "one", 300 * 1024)
    os.link(b[0] / "hard" / "one", b[0] / "hard" / "two")
    os.symlink("shared/a", b[0] / "link")
    os.symlink("nowhere", b[0] / "dangling")
    os.setxattr(b[0] / "shared", "user.layer", b"0")
    os.setxattr(b[0] / "shared" / "a", "user.note", b"bottom a")
    # bundle 1
    write(b[1] / "shared" / "b", 6000, "b1")            # shadows bundle 0's
    write(b[1] / "shared" / "c", 70)
    write(b[1] / "shared" / "sub" / "y", 11)
    whiteout(b[1] / "shared" / "a")                      # hides bundle 0's
    whiteout(b[1] / "gone")
    whiteout(b[1] / "back")
    (b[1] / "opq").mkdir()
    opaque(b[1] / "opq")                                 # hides bundle 0's opq/*
    write(b[1] / "opq" / "new1", 31)
    write(b[1] / "dir-then-file", 41)                    # a file over a directory
    os.setxattr(b[1] / "dir-then-file", "user.note", b"middle file")
    write(b[1] / "file-then-dir" / "z", 51)              # a directory over a file
    write(b[1] / "only1" / "f", 61)
    whiteout(b[1] / "shared" / "sub" / "deep")           # a whole directory hidden
    os.setxattr(b[1] / "shared", "user.layer", b"1")
    os.setxattr(b[1] / "shared", "user.extra", data(300, "x"))
    os.setxattr(b[1] / "shared" / "c", "user.note", b"middle c")
    os.symlink("../shared/c", b[1] / "only1" / "up")
    # bundle 2 (top)
    write(b[2] / "shared" / "c", 80, "c2")               # shadows bundle 1's
    write(b[2] / "shared" / "sub" / "z", 12)
    (b[2] / "back").mkdir()                              # whited out below, back as a directory
    write(b[2] / "back" / "again", 22)
    write(b[2] / "opq" / "new2", 32)                     # merges with the opaque one below
    write(b[2] / "hard" / "three", 33)
    os.symlink("shared/c", b[2] / "link")                # shadows a symlink
    os.chmod(b[2] / "shared", 0o750)
    os.chown(b[2] / "shared" / "c", 1234, 5678)
    os.chmod(b[2] / "shared" / "c", 0o640)
    for i, d in enumerate(b):
        for j, p in enumerate(sorted(d.rglob("*"))):
            os.utime(p, (0, 1_600_000_000 + i * 100_000 + j * 61), follow_symlinks=False)
        os.utime(d, (0, 1_600_000_000 + i), follow_symlinks=False)
    return b


@contextlib.contextmanager
def overlay_and_union(images, where):
    """Yields (overlayfs mount, union mount) of images (the last on top;
    of one image, its kernel mount and the union).
    Unmounts everything (loop devices go with their mounts: autoclear) and
    stops the reader whatever the test did; the reader must exit 0 on its
    unmount."""
    lowers = [where / f"lower{i}" for i in range(len(images))]
    odir, udir = where / "overlay", where / "union"
    log = where / "reader.log"
    reader = None
    for d in lowers + [odir, udir]:
        d.mkdir()
    try:
        for img, d in zip(images, lowers):
            run(["mount", "-t", "squashfs", "-o", "loop,ro", img, d])
        if len(lowers) > 1:
            # mount(2), not the new mount API: libmount 2.39 and later use
            # fsconfig(), whose string values stop at 256 bytes, too short
            # for 64 lowers in one lowerdir= (Debian 13 and sid).
            run(["mount", "-t", "overlay", "overlay", "-o",
                 "ro,lowerdir=" + ":".join(str(d) for d in reversed(lowers)), odir],
                env=dict(os.environ, LIBMOUNT_FORCE_MOUNT2="always"))
        else:  # overlayfs wants two lower layers at least
            odir = lowers[0]
        with open(log, "wb") as out:
            reader = subprocess.Popen([READER, "--union", *images, udir], stdout=out,
                                      stderr=subprocess.STDOUT)
        wait_until(lambda: reader.poll() is not None or mounted(udir), 10, what="the union's mount")
        assert reader.poll() is None, log.read_text()
        yield odir, udir
    finally:
        rc = unmount_and_wait(reader, [udir, odir] + lowers)
    assert rc == 0, f"squash-reader exited {rc} on its unmount: {log.read_text()}"
    assert not any(mounted(d) for d in [udir, odir] + lowers), mountinfo()


def view(root):
    """{relative path: what is seen of it} for every entry under root."""
    out = {}
    for dp, dns, fns in os.walk(root):
        for n in [""] + sorted(dns + fns):
            p = os.path.join(dp, n) if n else dp
            st = os.lstat(p)
            e = {"stat": (st.st_mode, st.st_uid, st.st_gid, st.st_size, st.st_nlink, st.st_mtime_ns)}
            try:
                names = sorted(os.listxattr(p, follow_symlinks=False))
                e["xattrs"] = {x: os.getxattr(p, x, follow_symlinks=False).hex() for x in names}
            except OSError as err:  # a bundle packed without any xattr
                e["xattrs"] = err.errno
            for x in ("trusted.overlay.opaque", "user.absent"):
                try:
                    os.getxattr(p, x, follow_symlinks=False)
                    e[x] = 0
                except OSError as err:
                    e[x] = err.errno
            if stat.S_ISLNK(st.st_mode):
                e["target"] = os.readlink(p)
            elif stat.S_ISREG(st.st_mode):
                with open(p, "rb") as f:
                    e["sha256"] = hashlib.sha256(f.read()).hexdigest()
            elif stat.S_ISDIR(st.st_mode) and not n:
                e["readdir"] = sorted(os.listdir(p))
            out[os.path.relpath(p, root)] = e
    return out


def diff(a, b):
    """What differs, field by field: {path: {field: (a's, b's)}}."""
    out = {}
    for k in sorted(set(a) | set(b)):
        x, y = a.get(k) or {}, b.get(k) or {}
        d = {f: (x.get(f), y.get(f)) for f in sorted(set(x) | set(y)) if x.get(f) != y.get(f)}
        if d or (k in a) != (k in b):
            out[k] = d or ("only in " + ("the first" if k in a else "the second"))
    return out


@pytest.fixture(scope="module")
def bundles():
    where = Path(tempfile.mkdtemp(prefix="union-bundles.", dir="/dev/shm"))
    try:
        trees = make_bundles(where)
        images = []
        for t in trees:
            img = where / (t.name + ".sqfs")
            run(["mksquashfs", t, img, "-noappend", "-quiet", "-no-progress", "-comp", "zstd", "-xattrs"])
            images.append(img)
        yield images
    finally:
        shutil.rmtree(where)


def test_union_shows_what_overlayfs_shows(bundles):
    where = Path(tempfile.mkdtemp(prefix="union-vs-overlay.", dir="/tmp"))
    try:
        with overlay_and_union(bundles, where) as (odir, udir):
            ov, uv = view(odir), view(udir)
            assert uv == ov, diff(uv, ov)
            # Directories have inode numbers of their own, as in overlayfs:
            # `find` takes a directory numbered like an ancestor for a loop
            # (the root and the first merged directory once shared one).
            dirs = {}
            for dp, _, _ in os.walk(udir):
                dirs.setdefault(os.lstat(dp).st_ino, []).append(dp)
            assert all(len(v) == 1 for v in dirs.values()), [v for v in dirs.values() if len(v) > 1]
            # The tree had what the comparison is about.
            assert sorted(ov["shared"]["readdir"]) == ["b", "c", "sub"]
            assert ov["shared"]["stat"][4] == 1              # merged: nlink 1
            # A merged directory has its topmost directory's xattrs (bundle
            # 2 has none at all), a file its own bundle's.
            assert ov["shared"]["xattrs"] == errno.EOPNOTSUPP
            assert ov["dir-then-file"]["xattrs"] == {"user.note": b"middle file".hex()}
            assert "old1" not in ov["opq"]["readdir"] and "new1" in ov["opq"]["readdir"]
            assert stat.S_ISREG(ov["dir-then-file"]["stat"][0])
            assert stat.S_ISDIR(ov["file-then-dir"]["stat"][0])
            assert ov["back"]["readdir"] == ["again"] and "gone" not in ov
            assert "shared/sub/deep" not in ov and ov["shared/sub"]["readdir"] == ["x", "y", "z"]
            assert ov["hard/one"]["stat"][4] == 2 and ov["link"]["target"] == "shared/c"
            # Absent and whited-out names are absent from the union too.
            assert ov["only1"]["readdir"] == ["f", "up"]
            for name in ("gone", "shared/a", "shared/sub/deep", "opq/old1", "nothing"):
                for root in (odir, udir):
                    with pytest.raises(OSError) as e:
                        os.lstat(root / name)
                    assert e.value.errno == errno.ENOENT, (root, name)
    finally:
        shutil.rmtree(where)


def test_one_bundle_alone_is_itself(bundles):
    """A union of one image shows that image as the kernel's squashfs does."""
    where = Path(tempfile.mkdtemp(prefix="union-one.", dir="/tmp"))
    try:
        with overlay_and_union(bundles[:1], where) as (odir, udir):
            ov, uv = view(odir), view(udir)
            assert uv == ov, diff(uv, ov)
    finally:
        shutil.rmtree(where)


def test_many_bundles_merge_at_the_root(tmp_path_factory):
    """64 bundles of one top-level directory each plus one directory they
    all share: every name found once, each file from its own bundle."""
    where = Path(tempfile.mkdtemp(prefix="union-many.", dir="/dev/shm"))
    try:
        images = []
        for i in range(64):
            t = where / f"t{i:03d}"
            write(t / f"subject{i:03d}" / "T1w" / "data", 100 + i)
            write(t / "common" / f"part{i:03d}", 10 + i)
            img = where / f"bundle_{i:03d}.sqfs"
            run(["mksquashfs", t, img, "-noappend", "-quiet", "-no-progress", "-comp", "zstd"])
            images.append(img)
        mnt = Path(tempfile.mkdtemp(prefix="union-many-mnt.", dir="/tmp"))
        try:
            with overlay_and_union(images, mnt) as (odir, udir):
                ov, uv = view(odir), view(udir)
                assert uv == ov, diff(uv, ov)
                assert len(ov["."]["readdir"]) == 65 and len(ov["common"]["readdir"]) == 64
        finally:
            shutil.rmtree(mnt)
    finally:
        shutil.rmtree(where)


def test_a_whiteout_in_a_directory_of_one_bundle_is_hidden():
    """The one deliberate difference: overlayfs passes a directory that
    only one lower layer holds straight through, so a whiteout in it is
    listed (a character device) but cannot be looked up; the union hides
    it from both, as it does in a merged directory."""
    where = Path(tempfile.mkdtemp(prefix="union-stray.", dir="/dev/shm"))
    try:
        images = []
        for i in range(2):
            t = where / f"t{i}"
            write(t / f"only{i}" / "f", 10)
            if i == 1:
                whiteout(t / "only1" / "stray")
            img = where / f"t{i}.sqfs"
            run(["mksquashfs", t, img, "-noappend", "-quiet", "-no-progress"])
            images.append(img)
        mnt = where / "mnt"
        mnt.mkdir()
        with overlay_and_union(images, mnt) as (odir, udir):
            assert sorted(os.listdir(odir / "only1")) == ["f", "stray"]
            assert sorted(os.listdir(udir / "only1")) == ["f"]
            for root in (odir, udir):
                with pytest.raises(FileNotFoundError):
                    os.lstat(root / "only1" / "stray")
    finally:
        shutil.rmtree(where)


def send_union(sock, rid, image_fds, fuse_fd, part=248):
    """A union request in parts (proto/reader_wire.h)."""
    import socket
    import struct
    magic, union_flag = 0x73716d31, 2
    for first in range(0, len(image_fds), part):
        fds = image_fds[first:first + part]
        if first + part >= len(image_fds):
            fds = fds + [fuse_fd]
        sock.sendmsg([struct.pack("<5I", magic, rid, union_flag, len(image_fds), first)],
                     [(socket.SOL_SOCKET, socket.SCM_RIGHTS, struct.pack(f"<{len(fds)}i", *fds))])


def test_a_union_served_over_squashds_socket(bundles):
    """squashd's way (--serve): a union of 260 images sent in two parts
    over the socket is answered once and serves the same tree as the
    command line's union of the distinct images (bundle 0 258 times, then
    1 and 2: directories of bundle 0 alone now merge, so their nlink is
    1, and nothing else changes). A malformed part is refused with a
    reason and nothing leaks."""
    import socket
    import struct
    where = Path(tempfile.mkdtemp(prefix="union-serve.", dir="/tmp"))
    mnt = where / "served"
    mnt.mkdir()
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    log = where / "serve.log"
    reader = None
    fds = []
    try:
        with open(log, "wb") as out:
            reader = subprocess.Popen([READER, "--serve", f"/dev/fd/{theirs.fileno()}"],
                                      pass_fds=[theirs.fileno()], stdout=out, stderr=subprocess.STDOUT)
        theirs.close()
        # A part of a union whose first part never came: refused, answered.
        f = os.open(bundles[0], os.O_RDONLY | os.O_CLOEXEC)
        ours.sendmsg([struct.pack("<5I", 0x73716d31, 7, 2, 300, 248)],
                     [(socket.SOL_SOCKET, socket.SCM_RIGHTS, struct.pack("<i", f))])
        os.close(f)
        reply = ours.recv(256)
        magic, rid, err = struct.unpack("<IIi", reply[:12])
        assert (rid, err) == (7, errno.EINVAL), reply
        assert b"start never came" in reply[12:]
    except BaseException:
        ours.close()
        if reader:
            reader.kill()
            reader.wait(10)
        shutil.rmtree(where)
        raise
    try:
        fds = [os.open(b, os.O_RDONLY | os.O_CLOEXEC) for b in [bundles[0]] * 258 + bundles[1:]]
        fuse_fd = fuse_mount(mnt)
        send_union(ours, 42, fds, fuse_fd)
        for f in fds + [fuse_fd]:
            os.close(f)
        fds = []
        reply = ours.recv(256)
        magic, rid, err = struct.unpack("<IIi", reply[:12])
        assert (magic, rid, err) == (0x73716d31, 42, 0), reply[12:].split(b"\0")[0]
        cli = where / "cli"
        cli.mkdir()
        with overlay_and_union(bundles, cli) as (odir, udir):
            sv, ov = view(mnt), view(odir)
        for k, e in ov.items():  # bundle 0's own directories merge with themselves now
            if stat.S_ISDIR(e["stat"][0]):
                e["stat"] = e["stat"][:4] + (sv.get(k, e)["stat"][4],) + e["stat"][5:]
        assert sv == ov, diff(sv, ov)
    finally:
        for f in fds:
            os.close(f)
        if mounted(mnt):
            run(["umount", mnt], check=False)
        ours.close()
        if reader:
            try:
                reader.wait(10)
            except subprocess.TimeoutExpired:
                reader.kill()
                reader.wait(10)
        assert not mounted(mnt)
        shutil.rmtree(where)
    assert reader.returncode == 0, log.read_text()
