"""--squash-image syntax at its edges: nested or repeated targets are refused
(by sbatch and by squashd), ',' and ':' in file names work when escaped and
are explained when not, and control characters are shown escaped, never
raw."""

import re

from conftest import USER1, uid_of

FILES = {"hello.txt": "hello from the image\n"}
FAKE_JOB = 990101


def refused(cluster, option):
    """sbatch refuses --squash-image=option (one argument); its stderr."""
    return cluster.sbatch_refuses(USER1, option)


def two_images(cluster):
    d = cluster.workdir(USER1, "img")
    a = cluster.make_image(d / "a.sqfs", {"which": "a\n"}, owner=USER1)
    b = cluster.make_image(d / "b.sqfs", {"which": "b\n"}, owner=USER1)
    return a, b


def test_nested_targets_refused_at_submit(cluster):
    a, b = two_images(cluster)
    for option in (f"{a}:/squash/x,{b}:/squash/x/y", f"{b}:/squash/x/y,{a}:/squash/x"):
        err = refused(cluster, option)
        assert (f"squash: target /squash/x/y of {b} lies inside target /squash/x of {a}; "
                f"nested targets are not supported") in err, err
        assert f"give {b} a target outside /squash/x (IMAGE:TARGET)" in err, err
    # /squash/x and /squash/xy are side by side, not nested.
    job = cluster.run_job(USER1, "cat /squash/x/which /squash/xy/which\n",
                          [f"--squash-image={a}:/squash/x,{b}:/squash/xy"])
    assert job.state == "COMPLETED", job.output()
    assert job.output() == "a\nb\n"


def test_same_default_target_twice_refused_at_submit(cluster):
    """The same TARGET written twice merges the images (test_merged_images);
    two images that only share a file name (the same default target) are
    refused."""
    a, _ = two_images(cluster)
    d = cluster.workdir(USER1, "img")
    (d / "sub").mkdir()
    c = cluster.make_image(d / "sub" / "a.sqfs", FILES, owner=USER1)
    err = refused(cluster, f"{a},{c}")
    assert (f"squash: {a} and {c} would both be mounted on /squash/a (their default target); "
            "give one of them another target, or write the same TARGET for both to merge "
            "them") in err, err
    err = refused(cluster, f"{a}:/squash/a,{c}")
    assert "(their default target)" in err, err


def test_nested_targets_refused_by_squashd(cluster):
    """The plugin's check is only for early errors: squashd refuses nested
    targets itself, whoever asks."""
    a, b = two_images(cluster)
    p = cluster.rawclient("mount", FAKE_JOB, uid_of(USER1), f"{a}:/squash/n",
                          f"{b}:/squash/n/inner")
    try:
        assert p.returncode == 1, p.stdout + p.stderr
        assert p.stdout.startswith("user-error"), p.stdout
        assert f"target /squash/n/inner of {b} lies inside target /squash/n of {a}" in p.stdout
        assert not cluster.node_mounts()
    finally:
        cluster.rawclient("release", FAKE_JOB)


def test_escaped_comma_and_colon_in_image_path(cluster):
    d = cluster.workdir(USER1, "img")
    img = cluster.make_image(d / "run,2:b.sqfs", FILES, owner=USER1)
    escaped = str(img).replace(",", "\\,").replace(":", "\\:")
    job = cluster.run_job(USER1, 'echo "IMAGES=$SQUASH_IMAGES"\ncat /squash/run2/hello.txt\n',
                          [f"--squash-image={escaped}:/squash/run2"])
    out = job.output()
    assert job.state == "COMPLETED", out
    assert f"IMAGES={img}\n" in out
    assert "hello from the image\n" in out


def test_unescaped_comma_and_colon_are_explained(cluster):
    d = cluster.workdir(USER1, "img")
    img = cluster.make_image(d / "run,2.sqfs", FILES, owner=USER1)
    err = refused(cluster, str(img))
    # The path was cut at the ',': say so and say how to write it.
    assert f"squash: {d}/run: No such file or directory" in err, err
    assert "write it as '\\,' or '\\:'" in err, err
    # A default mount point cannot hold the ':' of a file name.
    img2 = cluster.make_image(d / "t:1.sqfs", FILES, owner=USER1)
    err = refused(cluster, str(img2).replace(":", "\\:"))
    assert "target '/squash/t:1' contains ':'; mount points may not contain ',' or ':'" in err, err
    # A stray backslash names the rule.
    err = refused(cluster, f"{d}/a\\b.sqfs")
    assert "a '\\' must be followed by ',' ':' or '\\'" in err, err


def test_control_characters_shown_escaped(cluster):
    d = cluster.workdir(USER1, "img")
    for option, shown in ((f"{d}/a\x1b[31mred.sqfs", "\\x1b"),
                          (f"{d}/ok.sqfs:/squash/t\nsquash: forged line", "\\x0a"),
                          (f"{d}/bell\x07.sqfs", "\\x07")):
        err = refused(cluster, option)
        assert not re.search(r"[\x00-\x08\x0b-\x1f\x7f]", err), repr(err)
        assert "forged line\n" not in err and "\nsquash: forged" not in err, repr(err)
        assert shown in err, err
        assert "contains a control character" in err, err
