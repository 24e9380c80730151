"""A cluster without MUNGE (conftest's cluster_auth_slurm: AuthType=auth/slurm,
Slurm 23.11 on, no munged anywhere): the plugin, squashctl and squash-shell
find no munged socket and send unsigned requests (munge=auto,
proto/client.c); squashd takes them because the admin set
`require_munge = no`, and refuses them with a message naming the setting
and munged when it is left on (daemon/server/credential.c)."""

import os
from pathlib import Path

from conftest import BUILD, USER1, wait_until

FILES = {"a.txt": "from the image\n"}
SQUASH_SHELL = BUILD / "daemon" / "squash-shell"


def munged_of(c):
    """munged processes started for cluster c (its directory on their
    command line)."""
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            if (Path(f"/proc/{pid}/comm").read_text().strip() == "munged" and
                    str(c.dir).encode() in Path(f"/proc/{pid}/cmdline").read_bytes()):
                found.append(int(pid))
        except OSError:
            pass
    return found


def test_the_cluster_runs_on_auth_slurm_without_munged(cluster_auth_slurm):
    c = cluster_auth_slurm
    conf = (c.dir / "slurm.conf").read_text()
    assert "AuthType=auth/slurm\n" in conf and "munge" not in conf, conf
    assert not (c.dir / "munge.sock").exists()
    assert "require_munge = no\n" in (c.dir / "squashd.conf").read_text()
    assert munged_of(c) == []


def test_a_job_and_its_steps_see_the_image(cluster_auth_slurm):
    c = cluster_auth_slurm
    img = c.make_image(c.workdir(USER1, "img") / "noauth.sqfs", FILES, owner=USER1)
    job = c.run_job(USER1, "cat /squash/noauth/a.txt\nsrun cat /squash/noauth/a.txt\n",
                    [f"--squash-image={img}"])
    out = job.output()
    assert job.state == "COMPLETED", out
    assert out == FILES["a.txt"] * 2, out
    wait_until(lambda: not c.list_mounts(), 20, 0.1, "the epilog to release the job")


def test_squash_shell_mounts_for_a_user_without_munged(cluster_auth_slurm):
    c = cluster_auth_slurm
    d = c.workdir(USER1, "sh")
    img = c.make_image(d / "shell.sqfs", FILES, owner=USER1)
    p = c.as_user(USER1, [c.for_user(USER1, SQUASH_SHELL), "--socket", c.socket,
                          "--munge-socket", c.munge_socket, img, "--",
                          "cat", "/squash/shell/a.txt"], cwd=d)
    assert p.returncode == 0, p.stderr
    assert p.stdout == FILES["a.txt"], p.stdout
    wait_until(lambda: not c.list_mounts(), 15, 0.1, "the session's mount to go")


def test_require_munge_without_munged_fails_the_job_naming_it(cluster_auth_slurm):
    c = cluster_auth_slurm
    node = c.nodes[0]
    conf = c.dir / "squashd.conf"
    saved = conf.read_text()
    img = c.make_image(c.workdir(USER1, "img") / "strict.sqfs", FILES, owner=USER1)
    try:
        conf.write_text(saved.replace("require_munge = no\n", "require_munge = yes\n"))
        node.squashd_stop()
        node.squashd_start()
        job = c.run_job(USER1, "cat /squash/strict/a.txt\n", [f"--squash-image={img}"])
        out = job.output()
        assert job.state == "FAILED", out
        assert "require_munge" in out and "munged" in out, out
        assert all(s in ("idle", "mixed") for s in c.node_states().values()), c.node_states()
    finally:
        conf.write_text(saved)
        node.squashd_stop()
        node.squashd_start()
