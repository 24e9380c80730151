"""squash-reader --plus dirs and --plus auto (issue 38; docs/performance.md
section 15) send a listing's files unlinked (node id 0 in READDIRPLUS: the
kernel builds no inode or dentry for them), and a walk still sees what the
kernel's squashfs shows: every name, type and inode number of readdir
(os.scandir, which find and os.walk rely on), then every lstat. With the
kernel's FUSE tracepoint (a tracefs instance of the test's own, filtered
to the reader's connection), also that the files really went unlinked: a
walk by names sends no LOOKUP, and stat'ing the files afterwards sends one
per file with dirs, none with all, and only a first directory's with auto
(the stat'ing thread gets everything linked from then on)."""

import os
import shutil
import tempfile
from pathlib import Path

import pytest

from reader_and_kernel import FuseRequests, kernel_and_reader, packed, stats

DIRS, FILES_PER_DIR = 8, 40


def scan(root):
    """Names, types and dirent inode numbers of every directory, by
    readdir alone (no stat)."""
    out, todo = {}, [root]
    while todo:
        d = todo.pop()
        with os.scandir(d) as it:
            for e in it:
                rel = os.path.relpath(e.path, root)
                out[rel] = (e.inode(), e.is_dir(follow_symlinks=False), e.is_symlink(),
                            e.is_file(follow_symlinks=False))
                if e.is_dir(follow_symlinks=False):
                    todo.append(e.path)
    return out


@pytest.fixture(scope="module")
def image():
    def fill(src):
        for i in range(DIRS):
            d = src / f"d{i}" / "sub"
            d.mkdir(parents=True)
            for j in range(FILES_PER_DIR):
                (src / f"d{i}" / f"f{j:03d}").write_text(f"{i} {j}\n")
            os.symlink("../f000", d / "link")
            os.mkfifo(d / "fifo")

    with packed("unlinked.", fill) as img:
        yield img


def traced(fdir):
    """The requests on fdir's connection, None without the tracepoint."""
    return FuseRequests(fdir, "unlinked") if FuseRequests.available() else None


@pytest.mark.parametrize("plus", ["all", "dirs", "auto"])
def test_a_walk_sees_unlinked_files_as_the_kernel_shows_them(image, plus):
    where = Path(tempfile.mkdtemp(prefix=f"unlinked-{plus}.", dir="/dev/shm"))
    files = DIRS * (FILES_PER_DIR + 2)  # each directory's files, its sub's link and fifo
    lookups = None
    try:
        # A walk by names, then a stat of everything it listed.
        (where / "1").mkdir()
        with kernel_and_reader(image, where / "1", ["--plus", plus]) as (kdir, fdir):
            lookups = traced(fdir)
            listed = scan(fdir)
            assert listed == scan(kdir)
            assert sum(1 for v in listed.values() if not v[1]) == files
            if lookups:
                took = lookups.take()
                n, plusses = took["LOOKUP"], took["READDIRPLUS"]
                assert plusses > 0 and n == 0, (n, plusses)
            fs, ks = stats(fdir), stats(kdir)
            assert fs == ks, {k: (fs.get(k), ks.get(k)) for k in set(fs) | set(ks)
                              if fs.get(k) != ks.get(k)}
            assert (fdir / "d3" / "f007").read_text() == "3 7\n"
            if lookups:
                # The kernel cached the listings (no READDIRPLUS again):
                # every file listed unlinked is looked up once.
                n = lookups.take()["LOOKUP"]
                assert n == {"all": 0, "dirs": files, "auto": files}[plus], n
                lookups.close()
                lookups = None
        # A stat walk on a fresh mount: auto links everything for the
        # walker once it has looked up the files of its first directory
        # (d0, after the root's directories).
        (where / "2").mkdir()
        with kernel_and_reader(image, where / "2", ["--plus", plus]) as (kdir, fdir):
            lookups = traced(fdir)
            fs, ks = stats(fdir), stats(kdir)
            assert fs == ks
            if lookups:
                n = lookups.take()["LOOKUP"]
                assert n == {"all": 0, "dirs": files, "auto": FILES_PER_DIR}[plus], n
    finally:
        if lookups:
            lookups.close()
        shutil.rmtree(where)
