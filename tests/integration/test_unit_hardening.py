"""squashd.service's CapabilityBoundingSet=, NoNewPrivileges= and
RestrictNamespaces= are enough: squashd started with exactly that bounding
set and no_new_privs (setpriv, as systemd would apply them), under the
seccomp filter systemd makes for RestrictNamespaces=yes
(tests/tools/restrict_namespaces: clone3 refused with ENOSYS), serves a FUSE job, a kernel (loop) job and the
health check. The set is read from contrib/squashd.service.in, so the unit
and this test cannot drift apart. The unit itself, under systemd, is run
in a booted guest (tests/node)."""

import os
import re

from conftest import BUILD, CLUSTER_SH, REPO, SQUASHD, USER1, run, wait_until

FILES = {"hello.txt": "hello from the image\n"}


def unit_capabilities():
    text = (REPO / "contrib" / "squashd.service.in").read_text()
    m = re.search(r"^CapabilityBoundingSet=(.*)$", text, re.M)
    assert m, "the unit sets no CapabilityBoundingSet="
    assert re.search(r"^NoNewPrivileges=yes$", text, re.M)
    return m.group(1).split()


def restart_squashd(cluster, binary=None):
    old = cluster.squashd_pid()
    cluster.cluster_sh("squashd-stop")
    if old:
        wait_until(lambda: not os.path.exists(f"/proc/{old}"), 10, what="squashd to exit")
    env = dict(os.environ, **({"SQUASH_SQUASHD": str(binary)} if binary else {}))
    run([CLUSTER_SH, "squashd-start", cluster.dir], env=env, timeout=180)


def restrict_namespaces():
    tool = BUILD / "tests" / "tools" / "restrict_namespaces"
    if not tool.exists():
        run(["make", "-C", BUILD / "tests", "tools/restrict_namespaces"], timeout=300)
    text = (REPO / "contrib" / "squashd.service.in").read_text()
    assert re.search(r"^RestrictNamespaces=yes$", text, re.M), "the unit no longer restricts namespaces"
    return tool


def test_squashd_works_under_the_units_capabilities_and_seccomp_filter(cluster):
    caps = unit_capabilities()
    wrapper = cluster.dir / "squashd-hardened"
    bounding = "-all," + ",".join("+" + c.lower().removeprefix("cap_") for c in caps)
    wrapper.write_text(f"#!/bin/sh\nexec setpriv --no-new-privs --bounding-set {bounding} "
                       f"{restrict_namespaces()} {SQUASHD} \"$@\"\n")
    wrapper.chmod(0o755)
    os.chmod(cluster.trusted, 0o755)
    try:
        restart_squashd(cluster, wrapper)
        status = open(f"/proc/{cluster.squashd_pid()}/status").read()
        assert re.search(r"^NoNewPrivs:\s+1$", status, re.M), status
        bnd = int(re.search(r"^CapBnd:\s+([0-9a-f]+)$", status, re.M).group(1), 16)
        assert bin(bnd).count("1") == len(caps), (hex(bnd), caps)
        assert re.search(r"^Seccomp:\s+2$", status, re.M), status

        d = cluster.workdir(USER1, "img")
        user_img = cluster.make_image(d / "hard.sqfs", FILES, owner=USER1)
        trusted = cluster.make_image(cluster.trusted / "hardk.sqfs", FILES, owner="root")
        job = cluster.run_job(USER1, "cat /squash/hard/hello.txt /squash/hardk/hello.txt\n",
                              [f"--squash-image={user_img},{trusted}"])
        assert job.state == "COMPLETED", job.output()
        assert job.output() == FILES["hello.txt"] * 2
        wait_until(lambda: not cluster.list_mounts(), 15, what="the mounts to go")
        p = cluster.squashctl("health", check=False)
        assert (p.returncode, p.stdout) == (0, ""), p.stdout
    finally:
        restart_squashd(cluster)
