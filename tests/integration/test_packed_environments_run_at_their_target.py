"""Environments built in a user's directory, packed with
`squash-pack --target /squash/NAME`, run at that target in a job: a Python
venv with a pip-installed console script, a conda-style prefix (a script
whose shebang and configuration name the prefix, a compiled program with an
RPATH to the prefix's lib) and a Spack-like tree (a program with a
RUNPATH). The build directory is renamed before the job, so nothing can
fall back to it. The same job builds a venv at its target instead, in an
empty image written to through :rw=DIR, and packs it there (docs/user.md,
"Images that work at their target"). One job."""

import base64
import hashlib
import io
import zipfile

import pytest

from conftest import REPO, USER1

PACK = REPO / "contrib" / "squash-pack"
PYTHON = "/usr/bin/python3"  # the node's, which the job's user can run

pytestmark = pytest.mark.host_release_only(
    "squash-pack's rewriting and the images' contents: the same on every release")


def wheel(path):
    """A tiny wheel of hellotool 1.0 with a console script, made here: pip
    installs it with --no-index, no network."""
    files = {
        "hellotool/__init__.py": (
            "import sys\n"
            "def main():\n"
            "    print('hellotool', sys.prefix, __file__)\n"),
        "hellotool-1.0.dist-info/METADATA": (
            "Metadata-Version: 2.1\nName: hellotool\nVersion: 1.0\n"),
        "hellotool-1.0.dist-info/WHEEL": (
            "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\n"
            "Tag: py3-none-any\n"),
        "hellotool-1.0.dist-info/entry_points.txt": (
            "[console_scripts]\nhellotool = hellotool:main\n"),
    }
    record = io.StringIO()
    for name, text in files.items():
        digest = base64.urlsafe_b64encode(hashlib.sha256(text.encode()).digest())
        record.write(f"{name},sha256={digest.decode().rstrip('=')},{len(text.encode())}\n")
    record.write("hellotool-1.0.dist-info/RECORD,,\n")
    files["hellotool-1.0.dist-info/RECORD"] = record.getvalue()
    with zipfile.ZipFile(path, "w") as z:
        for name, text in files.items():
            z.writestr(name, text)


def test_venv_conda_prefix_and_spack_tree_run_at_their_target(cluster):
    d = cluster.workdir(USER1, "reloc")
    build = d / "build"

    def as_user(*cmd, **kw):
        p = cluster.as_user(USER1, [str(c) for c in cmd], timeout=180, **kw)
        assert p.returncode == 0, f"{cmd}: {p.stdout}{p.stderr}"
        return p

    as_user("mkdir", "-p", build)
    # A venv, the console script pip-installed from a local wheel.
    whl = d / "hellotool-1.0-py3-none-any.whl"
    wheel(whl)
    venv = build / "venv"
    as_user(PYTHON, "-m", "venv", venv)
    as_user(venv / "bin" / "pip", "install", "--no-index", "--no-cache-dir",
            "--disable-pip-version-check", "-q", whl)
    assert (venv / "bin" / "hellotool").read_text().startswith(f"#!{venv}/bin/python")

    # A conda-style prefix: bin/condarun runs with the prefix's sh, reads
    # the prefix from etc/, and runs a program that finds its library by
    # its RPATH.
    conda = build / "conda"
    script = f"""set -e
mkdir -p {conda}/bin {conda}/lib {conda}/etc {conda}/share/data {conda}/conda-meta
ln -s /bin/sh {conda}/bin/sh
echo 'the data' >{conda}/share/data/msg
echo 'datadir={conda}/share/data' >{conda}/etc/condarun.conf
printf '#!{conda}/bin/sh\\n. {conda}/etc/condarun.conf\\necho "conda: $(cat $datadir/msg); $({conda}/bin/cprog)"\\n' >{conda}/bin/condarun
chmod 755 {conda}/bin/condarun
cd {d}
echo 'const char *greeting(void) {{ return "greeting from libgreet"; }}' >greet.c
printf '#include <stdio.h>\\nconst char *greeting(void);\\nint main(void) {{ puts(greeting()); return 0; }}\\n' >main.c
gcc -shared -fPIC -o {conda}/lib/libgreet.so greet.c
gcc -o {conda}/bin/cprog main.c -L{conda}/lib -lgreet -Wl,--disable-new-dtags,-rpath,{conda}/lib
"""
    # A Spack-like tree: one package per prefix, found by RUNPATH.
    spack = build / "spack"
    pkg = spack / "linux-x86_64" / "gcc-12" / "hello-1.0-abcdefgh"
    script += f"""mkdir -p {pkg}/bin {pkg}/lib
echo 'const char *who(void) {{ return "spack hello"; }}' >who.c
printf '#include <stdio.h>\\nconst char *who(void);\\nint main(void) {{ puts(who()); return 0; }}\\n' >hello.c
gcc -shared -fPIC -o {pkg}/lib/libwho.so who.c
gcc -o {pkg}/bin/hello hello.c -L{pkg}/lib -lwho -Wl,--enable-new-dtags,-rpath,{pkg}/lib
"""
    as_user("bash", "-c", script)

    images = {}
    for name, src in (("venv", venv), ("conda", conda), ("spack", spack)):
        images[name] = d / f"{name}.sqfs"
        p = as_user(PACK, "--target", f"/squash/{name}", src, images[name])
        assert "relocation: rewrote" in p.stdout, p.stdout
    p = as_user("unsquashfs", "-cat", images["venv"], ".squash/meta")
    assert "\ntarget /squash/venv\n" in p.stdout and \
        "\nenv default set-path VIRTUAL_ENV .\n" in p.stdout, p.stdout

    # Seen away from its target: the conda image again, at /squash/moved,
    # gets a note once per step; a data image (metadata, no environment)
    # at another target than its default gets none.
    as_user("cp", images["conda"], d / "conda-copy.sqfs")
    as_user("bash", "-c", f"mkdir -p {d}/data && echo 1,2 >{d}/data/values.csv && chmod -R a+rX {d}/data")
    as_user(PACK, d / "data", d / "data.sqfs")

    # Built at its target instead (docs/user.md): an empty image of the
    # user's, writable at the target in the job, packed there.
    as_user("mkdir", d / "empty", d / "built-changes")
    as_user(PACK, "--keep-owners", "--no-meta", d / "empty", d / "empty.sqfs")
    built = d / "built.sqfs"
    spec = ",".join(f"{images[n]}:/squash/{n}" for n in images)
    spec += f",{d / 'empty.sqfs'}:/squash/built:rw={d / 'built-changes'}"
    spec += f",{d / 'conda-copy.sqfs'}:/squash/moved,{d / 'data.sqfs'}:/squash/input"

    # Nothing may fall back to the build directory.
    as_user("mv", build, d / "build.moved")
    job = cluster.run_job(USER1, (
        "/squash/venv/bin/hellotool\n"
        "/squash/conda/bin/condarun\n"
        "/squash/spack/linux-x86_64/gcc-12/hello-1.0-abcdefgh/bin/hello\n"
        f"{PYTHON} -m venv --without-pip /squash/built\n"
        f"{cluster.for_user(USER1, PACK)} -q /squash/built {built} && echo packed\n"
        "srun -n2 cat /squash/input/values.csv\n"),
        args=[f"--squash-image={spec}", "-n2"])
    out = job.output()
    assert job.state == "COMPLETED", out
    note = ("squash: note: the image at /squash/moved was packed for /squash/conda: paths "
            "squash-pack rewrote in it lead there, not here; mount it at /squash/conda "
            "(IMAGE:/squash/conda), or pack it again with --target /squash/moved")
    # The batch step's and the two-task step's first tasks: one each.
    assert out.count(note) == 2, out
    assert out.count("squash: note:") == 2, out
    lines = [line for line in out.splitlines() if line != note]
    assert lines[-2:] == ["1,2", "1,2"], out
    assert lines[0].startswith("hellotool /squash/venv /squash/venv/lib/python3."), out
    assert lines[0].endswith("/site-packages/hellotool/__init__.py"), out
    assert lines[1] == "conda: the data; greeting from libgreet", out
    assert lines[2] == "spack hello", out
    assert lines[3] == "packed", out
    p = as_user("unsquashfs", "-cat", built, "pyvenv.cfg")
    assert "/squash/built" in p.stdout, p.stdout
    p = as_user("unsquashfs", "-cat", built, ".squash/meta")
    assert "\ntarget /squash/built\n" in p.stdout, p.stdout
