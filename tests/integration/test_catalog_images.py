"""Catalog images (docs/user.md, "Catalog images"): an admin publishes two
versions of an image to a site catalog named in /etc/squash-images.conf;
a user finds, inspects (its metadata too) and lists them with
squash-images, and a job that names the image as @NAME gets the newest
version's file, resolved at submission, with the environment squash-pack
wrote into it active in the batch script and every task (squash-shell takes @NAME/VERSION too). An unknown name gets
near matches at submission, a name typed without '@' gets the '@'
suggested, and a "site" catalog a user can write is refused, even when it
comes first and holds the same name."""

import json
import os
import shutil
from pathlib import Path

import pytest

from conftest import BUILD, REPO, USER1, run, uid_of

pytestmark = pytest.mark.host_release_only(
    "the catalog is read by the plugin at submission and by squash-images: the same on every release")

SQUASH_IMAGES = BUILD / "daemon" / "squash-images"
PACK = REPO / "contrib" / "squash-pack"
SITE_CONF = Path("/etc/squash-images.conf")


@pytest.fixture
def site_catalogs(cluster):
    """A trusted site catalog below trusted_prefixes and a user-writable
    one, both named in the site file (the writable one first); the site
    file is removed afterwards (or the one found restored)."""
    good = cluster.trusted / "catalog"
    bad = cluster.work / "writable-catalog"
    saved = SITE_CONF.read_bytes() if SITE_CONF.exists() else None
    good.mkdir(mode=0o755)
    bad.mkdir()
    os.chown(bad, uid_of(USER1), -1)
    bad.chmod(0o755)
    SITE_CONF.write_text(f"# test_catalog_images.py\ncatalog {bad}\ncatalog {good}\n")
    SITE_CONF.chmod(0o644)
    yield good, bad
    if saved is None:
        SITE_CONF.unlink()
    else:
        SITE_CONF.write_bytes(saved)
    shutil.rmtree(good)
    shutil.rmtree(bad)


# publish reads the image's metadata with squash-reader --cat: the build's.
READER_ENV = dict(os.environ, SQUASH_READER=str(BUILD / "daemon" / "reader" / "squash-reader"))


def test_publish_warns_of_another_target_and_refuses_metadata_jobs_would_refuse(cluster):
    """An image packed for /squash/gnu published as prgenv-gnu (jobs mount
    @prgenv-gnu at /squash/prgenv-gnu) is published with a warning that
    names both places and the fix, its metadata read as nobody from the
    descriptor publish copies (the file is root's and 0600); its metadata's
    description is the index's without --description, and the name it
    gives there (gnu) differs from the published one: a warning; one whose
    /.squash/meta does not parse, or whose default environment sets LD_*
    (every job using it would fail), is not published at all."""
    src = cluster.workdir("root", "publish-src")
    catalog = cluster.trusted / "publish-catalog"
    catalog.mkdir(mode=0o755)
    try:
        tree = src / "gnu"
        (tree / "bin").mkdir(parents=True)
        (tree / "bin" / "hello").write_text("#!/bin/sh\necho hello\n")
        gnu = src / "gnu.sqfs"
        p = run([PACK, "--quiet", "--version", "25.5", "--description", "GNU compilers, MPI", tree, gnu],
                check=False)
        assert p.returncode == 0, p.stdout + p.stderr
        gnu.chmod(0o600)
        p = run([SQUASH_IMAGES, "publish", gnu, "prgenv-gnu/25.5", "--catalog", catalog], check=False,
                env=READER_ENV)
        assert p.returncode == 0, p.stdout + p.stderr
        assert ("was packed for /squash/gnu, but jobs naming @prgenv-gnu mount it at "
                "/squash/prgenv-gnu") in p.stderr, p.stderr
        assert "--target /squash/prgenv-gnu" in p.stderr and "@prgenv-gnu/25.5:/squash/gnu" in p.stderr, \
            p.stderr
        assert ("the metadata of %s names it gnu, version 25.5, but it is published as @prgenv-gnu/25.5: "
                "check that it is the image you meant" % gnu) in p.stderr, p.stderr
        assert "prgenv-gnu\t25.5\tprgenv-gnu/25.5.sqfs\tGNU compilers, MPI\n" in (catalog / "index.tsv").read_text()

        # A uenv image: its description from its meta/env.json, and what to
        # do about the place it was built for.
        ue = cluster.make_image(src / "ue.sqfs", {"meta/env.json": (
            '{"name": "ue", "description": "a uenv stack", "mount": "/user-environment", "views": '
            '{"default": {"env": {"values": {"list": {}, "scalar": {"A": "b"}}}}}}')})
        p = run([SQUASH_IMAGES, "publish", ue, "ue/1", "--catalog", catalog], check=False, env=READER_ENV)
        assert p.returncode == 0, p.stdout + p.stderr
        assert ("was built for /user-environment (its /meta/env.json), but jobs naming @ue mount it at "
                "/squash/ue") in p.stderr and "@ue/1:/user-environment" in p.stderr, p.stderr
        assert "ue\t1\tue/1.sqfs\ta uenv stack\n" in (catalog / "index.tsv").read_text()

        broken = cluster.make_image(src / "broken.sqfs", {".squash/meta": "format 1\nname x\ncolour blue\n"})
        p = run([SQUASH_IMAGES, "publish", broken, "broken/1", "--catalog", catalog], check=False,
                env=READER_ENV)
        assert p.returncode == 1, p.stdout + p.stderr
        assert "unknown key 'colour'" in p.stderr and "every job using the image would fail" in p.stderr, \
            p.stderr
        assert "broken" not in (catalog / "index.tsv").read_text()
        assert not (catalog / "broken").exists()

        loader = cluster.make_image(src / "loader.sqfs", {".squash/meta": (
            "format 1\nname loader\ndefault-env default\nenv default prepend-path LD_LIBRARY_PATH lib\n")})
        p = run([SQUASH_IMAGES, "publish", loader, "loader/1", "--catalog", catalog], check=False,
                env=READER_ENV)
        assert p.returncode == 1, p.stdout + p.stderr
        assert "environment default sets LD_LIBRARY_PATH" in p.stderr, p.stderr
        assert "loader" not in (catalog / "index.tsv").read_text()
    finally:
        shutil.rmtree(catalog)


def images(cluster, user, *args):
    # inspect runs squash-reader --cat: the build's, not an installed one.
    reader = cluster.for_user(user, BUILD / "daemon" / "reader" / "squash-reader")
    return cluster.as_user(user, ["env", f"SQUASH_READER={reader}", cluster.for_user(user, SQUASH_IMAGES),
                                  *args], timeout=30)


def test_admin_publishes_user_finds_inspects_and_runs_the_newest(cluster, site_catalogs):
    good, bad = site_catalogs
    src = cluster.workdir("root", "catalog-src")
    old = cluster.make_image(src / "old.sqfs", {"version.txt": "tools 1.9\n"})
    # The newest is packed by squash-pack, with metadata: its default
    # environment puts bin/ first in PATH and sets a variable.
    tree = src / "tools"
    (tree / "bin").mkdir(parents=True)
    (tree / "version.txt").write_text("tools 1.10\n")
    (tree / "bin" / "tools-version").write_text('#!/bin/sh\necho "tools-version $TOOLS_FLAVOUR"\n')
    (tree / "bin" / "tools-version").chmod(0o755)
    new = src / "new.sqfs"
    p = run([PACK, "--quiet", "--name", "tools", "--version", "1.10", "--target", "/squash/tools",
             "--description", "what the packer said",
             "--env", "default:set:TOOLS_FLAVOUR=gnu", tree, new], check=False)
    assert p.returncode == 0, p.stdout + p.stderr
    new.chmod(0o644)
    # The admin publishes into the site's first trusted catalog (no --catalog).
    for image, ref in ((old, "tools/1.9"), (new, "tools/1.10")):
        p = run([SQUASH_IMAGES, "publish", image, ref, "--description", "Build tools"], check=False,
                env=READER_ENV)
        assert p.returncode == 0, p.stdout + p.stderr
        assert str(good) in p.stdout
        assert "warning" not in p.stderr, p.stderr  # packed for /squash/tools, or no metadata
    p = run([SQUASH_IMAGES, "publish", new, "tools/1.10"], check=False)
    assert p.returncode != 0 and "published already" in p.stderr
    assert (good / "index.tsv").stat().st_uid == 0
    # An explicit --description wins over the metadata's.
    assert "tools\t1.10\ttools/1.10.sqfs\tBuild tools\n" in (good / "index.tsv").read_text()
    # The writable catalog names the same image with the user's own bytes.
    evil = cluster.make_image(bad / "evil.sqfs", {"version.txt": "not the site's\n"}, owner=USER1)
    (bad / "index.tsv").write_text(f"tools 9.9 {evil.name}\nextra 1 {evil.name}\n")
    os.chown(bad / "index.tsv", uid_of(USER1), -1)

    found = images(cluster, USER1, "find", "tool")
    assert found.returncode == 0, found.stderr
    rows = [line.split()[:2] for line in found.stdout.splitlines()[1:]]
    assert rows == [["@tools/1.10", "site"], ["@tools/1.9", "site"]], found.stdout
    assert f"site catalog {bad} is not used" in found.stderr
    assert "not owned by root" in found.stderr

    shown = images(cluster, USER1, "inspect", "@tools")
    assert shown.returncode == 0, shown.stderr
    assert "@tools/1.10 (the newest)" in shown.stdout
    assert f"file:        {good}/tools/1.10.sqfs" in shown.stdout
    assert "compression: zstd" in shown.stdout, shown.stdout
    # Its metadata, read without mounting it.
    assert "metadata (/.squash/meta):\n  name: tools\n  version: 1.10\n" in shown.stdout, shown.stdout
    assert "    prepend-path PATH bin\n" in shown.stdout, shown.stdout
    assert "    set TOOLS_FLAVOUR gnu\n" in shown.stdout, shown.stdout

    # NAME/VERSION without its '@' (uenv's way): a file path, and the '@' suggested.
    missed = images(cluster, USER1, "inspect", "tools/1.9")
    assert missed.returncode == 1 and missed.stderr == (
        "squash-images: tools/1.9: No such file or directory: an image is a file; the catalog image "
        "of that name is written @tools/1.9\n"), missed.stderr

    # inspect FILE opens no catalog (a hung catalog file system cannot
    # hold it); a missing FILE shaped like NAME/VERSION reads them for the hint.
    def catalogs_opened(what):
        reader = cluster.for_user(USER1, BUILD / "daemon" / "reader" / "squash-reader")
        p = cluster.as_user(USER1, ["strace", "-f", "-qq", "-e", "trace=openat,open",
                                    "env", f"SQUASH_READER={reader}", cluster.for_user(USER1, SQUASH_IMAGES),
                                    "inspect", what], timeout=30)
        return "index.tsv" in p.stderr, p
    opened, p = catalogs_opened(f"{good}/tools/1.10.sqfs")
    assert p.returncode == 0 and not opened, p.stderr
    opened, p = catalogs_opened("tools/1.9")
    assert p.returncode == 1 and opened, p.stderr

    # find without TEXT: every image, as list (uenv image find's habit).
    everything = images(cluster, USER1, "find")
    assert everything.returncode == 0, everything.stderr
    assert everything.stdout == images(cluster, USER1, "list").stdout, everything.stdout
    assert [line.split()[0] for line in everything.stdout.splitlines()[1:]] == ["@tools/1.10", "@tools/1.9"], \
        everything.stdout

    listed = images(cluster, USER1, "list", "--json")
    data = json.loads(listed.stdout)
    assert [(i["reference"], i["newest"], i["source"]) for i in data["images"]] == [
        ("@tools/1.10", True, "site"), ("@tools/1.9", False, "site")]
    assert [c["problem"] is not None for c in data["catalogs"][:2]] == [True, False]

    # The job gets the newest version's file, not the writable catalog's,
    # with its default environment in the batch script and every task.
    job = cluster.run_job(USER1, 'cat "$SQUASH_MOUNT/version.txt"; echo "at $SQUASH_MOUNT"\n'
                          'tools-version\nsrun -n2 tools-version\n',
                          ["--squash-image=@tools", "-n2"])
    assert job.state == "COMPLETED", job.output()
    lines = job.output().splitlines()
    assert lines[:3] == ["tools 1.10", "at /squash/tools", "tools-version gnu"], job.output()
    assert lines[3:5] == ["tools-version gnu"] * 2, job.output()

    # squash-shell takes the same names.
    shell = [cluster.for_user(USER1, BUILD / "daemon" / "squash-shell"), "--socket", cluster.socket,
             "--munge-socket", cluster.munge_socket, "@tools/1.9", "--", "cat",
             "/squash/tools/version.txt"]
    p = cluster.as_user(USER1, shell)
    assert p.returncode == 0 and p.stdout == "tools 1.9\n", (p.stdout, p.stderr)

    # An unknown name: near matches, at submission.
    err = cluster.sbatch_refuses(USER1, "@tols")
    assert "no image named tols" in err and "did you mean @tools?" in err, err
    # A name from the writable catalog is not the site's.
    err = cluster.sbatch_refuses(USER1, "@extra")
    assert f"site catalog {bad} is not used" in err and "no image named extra" in err, err
    # Typed as uenv users do: images are files, and the '@' is suggested.
    err = cluster.sbatch_refuses(USER1, "tools/1.9:/squash/t")
    assert "an image is a file" in err and "written @tools/1.9" in err, err
    assert "\\:" not in err, err
    # uenv's system and tag: the character named, and the form to write.
    no_tags = "(no systems or tags here: write @NAME/VERSION, optionally :/TARGET)"
    err = cluster.sbatch_refuses(USER1, "@tools/1.9@zen2")
    assert f"version '1.9@zen2' holds '@' (a version is made of letters, digits and . _ + -) {no_tags}" \
        in err, err
    err = cluster.sbatch_refuses(USER1, "@tools/1.9:v1")
    assert f"target 'v1' is not an absolute path {no_tags}" in err, err
    p = cluster.as_user(USER1, shell[:-4] + ["tools/1.9", "--", "true"])
    assert p.returncode == 125 and "squash-shell: tools/1.9: No such file or directory: an image is a file; " \
        "the catalog image of that name is written @tools/1.9" in p.stderr, p.stderr
    p = cluster.as_user(USER1, shell[:-4] + ["@tools/1.9:v1", "--", "true"])
    assert p.returncode == 125 and f"@tools/1.9: target 'v1' is not an absolute path {no_tags}" in p.stderr, \
        p.stderr
    # A file's relative target is no tag: no hint.
    err = cluster.sbatch_refuses(USER1, f"{new}:v1")
    assert "target 'v1' is not an absolute path" in err and "no systems or tags" not in err, err
