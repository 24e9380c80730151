"""An upgrade with jobs running, against the previous release built from the
repository's own history (NEWS.md: 0.1.0 is commit 7b2afcc, tag v0.1.0; no
network): 0.1.0's squashd mounts a job's images and is replaced by this
build's while the job holds them (the job keeps reading, its epilog
releases them), on the one-node site-like cluster and on one node of the
three-node cluster, where jobs of 0.1.0's plugin run across old and new
squashds and then against this build's alone; and the downgrade, measured.
docs/admin.md, "Upgrading slurm-squash itself", says what each mixed case
does.

0.1.0's squashd and plugin are built once into the build directory
(BUILD/prev-0.1.0-COMMIT: autoreconf, configure with this build's
options, proto/, squashd and the plugin only; about 20 s on 2 cores) and
reused by later runs. 0.1.0 predates the checks for newer libslurm and C
libraries, so its source gets the smallest patches that let it build on
the matrix's newer releases, each touching only a call or a name the newer
headers changed, never what squashd does (release_0.1.0_on_*.patch here):
c23 everywhere (GCC 15's C23 <stdlib.h> declares call_once), slurm_23.11
from Slurm 23.11 (hostlist_t, slurm_get_errno), slurm_26.05 from 26.05
(slurm_load_job takes a step id). Skipped where it cannot be built: no git
history (a release tarball); a failed build is remembered next to it and
shown."""

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from conftest import BUILD, CLUSTER_SH, REPO, USER1, BlockingJob, blocking_jobs, run, wait_until

PREV = "7b2afcc"  # 0.1.0 (NEWS.md)
HERE = Path(__file__).resolve().parent
# release_0.1.0_on_NAME.patch, applied from this Slurm release on.
PATCHES = [("c23", (0, 0)), ("slurm_23.11", (23, 11)), ("slurm_26.05", (26, 5))]
FILES = {"hello.txt": "hello from the image\n"}


def _configure_args():
    """This build's configure options (config.status knows them)."""
    try:
        out = subprocess.run([BUILD / "config.status", "--config"], text=True,
                             stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        return []
    return [a.strip("'") for a in out.split()]


def _build_previous():
    """(squashd, spank_squash.so) of 0.1.0, built once; pytest.skip when it
    cannot be."""
    built_for = re.search(r'^#define SQUASH_SLURM_BUILD_VERSION "(\d+)\.(\d+)',
                          (BUILD / "config.h").read_text(), re.M)
    slurm = (int(built_for.group(1)), int(built_for.group(2))) if built_for else (0, 0)
    patches = [name for name, since in PATCHES if slurm >= since]
    git = shutil.which("git")
    if not git:
        pytest.skip("no git: cannot build 0.1.0 from the history")
    commit = subprocess.run([git, "-C", REPO, "rev-parse", "--verify", "-q", f"{PREV}^{{commit}}"],
                            text=True, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL).stdout.strip()
    if not commit:
        pytest.skip(f"no commit {PREV} (0.1.0) in {REPO}: not a git checkout with history")
    top = BUILD / f"prev-0.1.0-{commit[:12]}-{'-'.join(patches)}"
    squashd, plugin = top / "b" / "daemon" / "squashd", top / "b" / "spank" / ".libs" / "spank_squash.so"
    failed = top / "FAILED"
    if failed.exists():
        pytest.skip(f"0.1.0 does not build here (kept from an earlier run): {failed.read_text()[-400:]}")
    if squashd.exists() and plugin.exists():
        return squashd, plugin
    shutil.rmtree(top, ignore_errors=True)
    (top / "src").mkdir(parents=True)
    log = top / "build.log"
    steps = [
        f"{git} -C {REPO} archive {commit} | tar -x -C {top / 'src'}",
        # git apply as a plain patch(1): no repository above src/ for it.
        *(f"cd {top / 'src'} && GIT_CEILING_DIRECTORIES={top} {git} apply -v "
          f"{HERE / f'release_0.1.0_on_{p}.patch'}" for p in patches),
        f"cd {top / 'src'} && autoreconf -fi",
        "mkdir -p {b} && cd {b} && {src}/configure {args}".format(
            b=top / "b", src=top / "src", args=" ".join(f"'{a}'" for a in _configure_args())),
        f"make -C {top / 'b' / 'proto'}",
        f"make -C {top / 'b' / 'daemon'} squashd",
        f"make -C {top / 'b' / 'spank'}",
    ]
    with open(log, "w") as f:
        for step in steps:
            f.write(f"$ {step}\n")
            f.flush()
            p = subprocess.run(["bash", "-o", "pipefail", "-c", step], stdout=f, stderr=subprocess.STDOUT,
                               env=dict(os.environ, MAKEFLAGS=f"-j{os.cpu_count() or 2}"))
            if p.returncode != 0:
                failed.write_text(f"`{step}` failed (exit {p.returncode}); see {log}\n" +
                                  log.read_text(errors="replace")[-2000:])
                pytest.skip(failed.read_text()[:600])
    return squashd, plugin


@pytest.fixture(scope="module")
def previous():
    return _build_previous()


def _records(state):
    return sorted({line.split(" ", 1)[0] for line in state.splitlines()[1:] if line})


class Previous:
    """Swaps parts of a test cluster to 0.1.0 and back: a node's squashd
    (its squashd.conf without the settings 0.1.0 does not know: its FUSE
    server is squashfuse_ll) and the plugin of new jobs (plugstack.conf);
    restore() puts this build back on every node."""

    def __init__(self, cluster, previous):
        self.c = cluster
        self.squashd, self.plugin = previous
        self.conf, self.plugstack = cluster.dir / "squashd.conf", cluster.dir / "plugstack.conf"
        self.conf_text, self.plugstack_text = self.conf.read_text(), self.plugstack.read_text()
        self.stopped = set()

    def start_squashd(self, node):
        node.squashd_stop()
        self.stopped.add(node.name)
        self.conf.write_text("".join(line for line in self.conf_text.splitlines(True)
                                     if not line.startswith(("squash_reader", "fuse_reader",
                                                             "stopped_reader_timeout"))))
        args = ["--node", node.name] if node.namespaced else []
        run([CLUSTER_SH, "squashd-start", *args, self.c.dir],
            env=dict(os.environ, SQUASH_SQUASHD=str(self.squashd)))
        self.conf.write_text(self.conf_text)  # read at start only

    def replace_squashd(self, node):
        """This build's squashd in place of 0.1.0's."""
        node.squashd_stop()
        self.conf.write_text(self.conf_text)
        node.squashd_start()
        self.stopped.discard(node.name)
        assert re.search(r"squashd \S+ \(built for Slurm [^;]+; protocol 2, state file format 1\)",
                         node.squashd_log()), node.squashd_log()[-1500:]

    def use_plugin(self):
        so = self.c.dir / "bin" / "spank_squash-0.1.0.so"
        so.parent.mkdir(mode=0o755, exist_ok=True)
        shutil.copy(self.plugin, so)
        so.chmod(0o755)
        ours = self.plugstack_text.split()[1]
        self.plugstack.write_text(self.plugstack_text.replace(ours, str(so), 1))

    def restore(self):
        self.plugstack.write_text(self.plugstack_text)
        self.conf.write_text(self.conf_text)
        for n in self.c.nodes:
            if n.name in self.stopped:
                n.squashd_stop()
                n.squashd_start()


def _held(node):
    return {m["mount_point"]: (m["mode"], m["jobs"]) for m in node.list_mounts()}


def test_squashd_replaced_under_a_job_of_the_previous_squashd(cluster, previous):
    """One node, configured as sites do (cgroups, job_container/tmpfs): a
    job's kernel and FUSE mounts made by 0.1.0's squashd (0.1.0's plugin
    cannot run jobs in a job namespace, which came in 0.2.0; this build's
    plugin asks, with the same protocol) survive the replacement of squashd
    by this build; the job keeps reading and its epilog releases them."""
    node = cluster.nodes[0]
    d = cluster.workdir(USER1, "prev")
    kernel = cluster.make_image(cluster.trusted / "prevk.sqfs", FILES)
    fuse = cluster.make_image(d / "prevf.sqfs", {"hello.txt": "hello from the user's image\n"},
                              owner=USER1)
    prev = Previous(cluster, previous)
    try:
        prev.start_squashd(node)
        after = "cat /squash/prevk/hello.txt /squash/f/hello.txt\n"
        with blocking_jobs(cluster, (USER1, f"{kernel},{fuse}:/squash/f", after)) as (blk,):
            held = _held(node)
            assert sorted(mode for mode, _ in held.values()) == ["fuse", "kernel"], held
            assert all(jobs == [blk.job.id] for _, jobs in held.values()), held
            state = (cluster.state_dir / "state").read_text()
            assert state.startswith("squashd-state 1\n"), state
            assert _records(state) == ["image", "job", "mount", "next"], state

            prev.replace_squashd(node)
            assert _held(node) == held
            assert cluster.squashctl("health", check=False).returncode == 0
            blk.release()
            assert blk.job.state == "COMPLETED", blk.job.output()
        assert blk.job.output().count("hello from") == 2, blk.job.output()
        wait_until(lambda: not cluster.list_mounts(), 20, what="the epilog to release the mounts")
    finally:
        prev.restore()


def test_previous_plugin_and_squashd_on_a_three_node_cluster(cluster3, previous):
    """Three nodes, the plugin of 0.1.0 for new jobs: a three-node job runs
    while n2 has 0.1.0's squashd and n1, n3 this build's; n2's squashd is
    replaced under the job, which keeps reading on every node, and every
    node's epilog (0.1.0's plugin) releases its mounts; a second job of the
    0.1.0 plugin runs against this build's squashd everywhere."""
    c = cluster3
    n2 = c.node_named("n2")
    img = c.make_image(c.workdir(USER1, "prev3") / "prev3.sqfs", FILES, owner=USER1)
    each = ("srun -N3 --ntasks-per-node=1 bash -c "
            "'echo \"$(hostname): $(cat /squash/prev3/hello.txt)\"'\n")
    prev = Previous(c, previous)
    try:
        prev.use_plugin()
        prev.start_squashd(n2)
        blk = BlockingJob(c, USER1, str(img), extra_args=["-N3"], after=each)
        try:
            blk.wait_ready()
            for n in c.nodes:
                assert [jobs for _, jobs in _held(n).values()] == [[blk.job.id]], (n.name, _held(n))
            held = _held(n2)
            prev.replace_squashd(n2)
            assert _held(n2) == held
        finally:
            blk.release()
        out = blk.job.output()
        assert blk.job.state == "COMPLETED", out
        assert sorted(re.findall(r"^(n\d): hello from the image$", out, re.M)) == ["n1", "n2", "n3"], out
        for n in c.nodes:
            wait_until(lambda: not n.list_mounts(), 20, what=f"{n.name}'s epilog to release the mount")

        job = c.run_job(USER1, each, [f"--squash-image={img}", "-N3"])
        assert job.state == "COMPLETED", job.output()
        for n in c.nodes:
            wait_until(lambda: not n.list_mounts(), 20, what=f"{n.name}'s epilog to release the mount")
        assert "DRAIN" not in run(["sinfo", "-h", "-o", "%T"], env=c.env).stdout.upper()
    finally:
        prev.restore()


def test_downgrade_to_the_previous_squashd_measured(cluster, previous):
    """What 0.1.0's squashd does with this build's state file (it cannot be
    changed; docs/admin.md, the downgrade row): a job with a writable image
    has an `overlay` record 0.1.0 does not know, so it starts with an empty
    registry and detaches everything in mnt/ as unknown leftovers. The
    running job keeps its binds and reads on, its epilog releases nothing
    (0.1.0 knows no such job), and the user's reader exits when the job's
    binds go. Measured here so that the documentation stays true."""
    node = cluster.nodes[0]
    img = cluster.make_image(cluster.workdir(USER1, "down") / "down.sqfs", FILES, owner=USER1)
    prev = Previous(cluster, previous)
    try:
        with blocking_jobs(cluster, (USER1, f"{img}:/squash/dg:rw", "cat /squash/dg/hello.txt\n")) as (blk,):
            state = (cluster.state_dir / "state").read_text()
            assert "\noverlay " in state, state
            offset = len(node.squashd_log())
            prev.start_squashd(node)
            log = node.squashd_log()[offset:]
            assert "malformed record; starting with an empty registry" in log, log
            assert "cleaning up unknown leftover" in log, log
            assert cluster.list_mounts() == []
            blk.release()
        out = blk.job.output()
        assert blk.job.state == "COMPLETED", out
        assert "hello from the image" in out, out
        assert cluster.list_mounts() == []
        # The reader exits once the job's binds are gone: nothing leaks here.
        wait_until(lambda: not cluster.instance_fuse_servers(), 10, what="the FUSE reader to exit")
    finally:
        prev.restore()
        for pid in cluster.instance_fuse_servers():  # only after a failure above
            try:
                os.kill(pid, 9)
            except OSError:
                pass
