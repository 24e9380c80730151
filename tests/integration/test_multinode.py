"""Jobs across nodes: on a three-node cluster (n1..n3, one slurmd and one
squashd per node, each node in its own UTS + mount namespace), every node's
prolog mounts the job's images once, every node's steps bind them, every
node's epilog releases them, and one node's fault stays on that node."""

import os
import re
import shutil
import tempfile
from pathlib import Path

import pytest

from conftest import (CLUSTER_SH, JOB_TIMEOUT, USER1, BlockingJob, Cluster, Job,
                      blocking_jobs, is_squash_mount, loop_backing_files, mountinfo,
                      proc_uids, run, uid_of, wait_until)

FILES = {"hello.txt": "hello from the image\n"}
NODES = ("n1", "n2", "n3")

# One task per node; each prints its node and what it read.
SRUN_ALL = ("srun -N3 --ntasks-per-node=1 bash -c "
            "'echo \"task $SLURM_PROCID on $(hostname): $(cat {path})\"'")


def user_image(c, name="stack.sqfs", user=USER1, files=FILES):
    d = c.workdir(user, "img")
    return c.make_image(d / name, files, owner=user)


def tasks_read(out):
    """{node: text} of the 'task N on NODE: TEXT' lines in a job's output."""
    seen = {}
    for m in re.finditer(r"^task \d+ on (\S+): (.*)$", out, re.M):
        seen[m.group(1)] = m.group(2)
    return seen


def node_clean(node):
    """What node still holds: squashd's mounts, mounts in its namespace,
    FUSE servers. Empty when clean."""
    left = {}
    if node.list_mounts():
        left["list"] = node.list_mounts()
    if node.node_mounts():
        left["mountinfo"] = node.node_mounts()
    if node.fuse_servers():
        left["fuse"] = node.fuse_servers()
    return left


def wait_nodes_clean(c, nodes=None, timeout=15):
    nodes = nodes or c.nodes
    wait_until(lambda: not any(node_clean(n) for n in nodes), timeout, 0.2,
               "nodes " + ",".join(n.name for n in nodes) + " to be clean: " +
               repr({n.name: node_clean(n) for n in nodes}))


def assert_not_drained(c):
    states = c.node_states()
    assert set(states) == set(NODES), states
    for name, state in states.items():
        assert state == "idle", states
        assert "DRAIN" not in c.node_named(name).info(), c.node_named(name).info()


def test_nodes_are_separate(cluster3):
    """The harness itself: three hostnames, three mount namespaces, three
    squashd, and nothing of the nodes in the host's namespace."""
    c = cluster3
    assert [n.name for n in c.nodes] == list(NODES)
    assert c.node_states() == {n: "idle" for n in NODES}
    assert len({n.uts_inode() for n in c.nodes}) == 3
    assert len({n.squashd_pid() for n in c.nodes}) == 3
    for n in c.nodes:
        assert n.run(["hostname"]).stdout.strip() == n.name
        assert n.squashd_pid() in n.processes(), n.processes()
        # Each node has its own /run (tmpfs) at the common path.
        runs = [m for m in n.mountinfo() if m["mount_point"] == str(c.dir / "node-run")]
        assert len(runs) == 1 and runs[0]["fstype"] == "tmpfs", runs
        assert n.list_mounts() == []
    assert not [m for m in mountinfo() if m["mount_point"].startswith(str(c.dir) + "/")]


def test_three_node_job_mounts_once_per_node(cluster3):
    c = cluster3
    img = user_image(c)
    d = c.workdir(USER1, "tasks")
    # Tasks on every node note their pid and wait, so the test can look at
    # the nodes while the job holds its mounts.
    before = f"""
srun -N3 --ntasks-per-node=1 bash -c '
  echo $$ > {d}/task-$(hostname)
  while [ ! -e {d}/go ]; do sleep 0.1; done
  echo "task $SLURM_PROCID on $(hostname): $(cat /squash/stack/hello.txt)"' &
for n in {" ".join(NODES)}; do
  for i in $(seq 1 600); do [ -e {d}/task-$n ] && break; sleep 0.1; done
done
"""
    blk = BlockingJob(c, USER1, img, extra_args=["-N3"], before=before,
                      after=f"touch {d}/go; wait")
    try:
        blk.wait_ready()
        assert c.job_nodes(blk.job.id) == list(NODES)
        servers = {}
        for n in c.nodes:
            mounts = n.list_mounts()
            assert len(mounts) == 1, (n.name, mounts)
            m = mounts[0]
            assert m["image"] == str(img) and m["mode"] == "fuse", m
            assert m["jobs"] == [blk.job.id] and m["refcount"] == 1, m
            # The node's namespace holds exactly that mount ...
            nm = n.node_mounts()
            assert len(nm) == 1 and nm[0]["mount_point"] == m["mount_point"], nm
            assert nm[0]["fstype"].startswith("fuse"), nm
            # ... served by one FUSE server on that node, as the user.
            assert n.fuse_servers() == [m["server_pid"]], (n.name, n.fuse_servers(), m)
            assert set(proc_uids(m["server_pid"])) == {uid_of(USER1)}
            servers[n.name] = m["server_pid"]
            # The task on that node sees the image at its target.
            task = int((d / f"task-{n.name}").read_text())
            assert task in n.processes(), (n.name, task)
            assert "/squash/stack" in [x["mount_point"] for x in mountinfo(task)]
        assert len(set(servers.values())) == 3, servers
        # The host's namespace has none of it.
        assert c.stray_mounts() == [], c.stray_mounts()
    finally:
        blk.release()
    out = blk.job.output()
    assert blk.job.state == "COMPLETED", out
    assert tasks_read(out) == {n: "hello from the image" for n in NODES}, out
    # Every node's epilog released the job.
    wait_nodes_clean(c)
    for n in c.nodes:
        assert re.search(rf"\bjob {blk.job.id}\b.*\breleased", n.squashd_log()), n.name


def test_kernel_and_fuse_images_in_one_job(cluster3):
    c = cluster3
    trusted = c.make_image(c.trusted / "tools.sqfs", {"which": "trusted tools\n"},
                           owner="root", mode=0o644)
    data = user_image(c, "data.sqfs", files={"which": "user data\n"})
    blk = BlockingJob(c, USER1, f"{trusted},{data}", extra_args=["-N3"], after=(
        "srun -N3 --ntasks-per-node=1 bash -c "
        "'echo \"task $SLURM_PROCID on $(hostname): "
        "$(cat /squash/tools/which) + $(cat /squash/data/which)\"'"))
    try:
        blk.wait_ready()
        loops = set()
        for n in c.nodes:
            mounts = {m["mode"]: m for m in n.list_mounts()}
            assert set(mounts) == {"kernel", "fuse"}, (n.name, n.list_mounts())
            assert mounts["kernel"]["image"] == str(trusted)
            assert mounts["fuse"]["image"] == str(data)
            nm = {m["fstype"]: m for m in n.node_mounts()}
            assert len(n.node_mounts()) == 2, n.node_mounts()
            # Each node attached its own loop device for the trusted image.
            assert nm["squashfs"]["source"] == mounts["kernel"]["loop_device"], (nm, mounts)
            loops.add(mounts["kernel"]["loop_device"])
            assert n.fuse_servers() == [mounts["fuse"]["server_pid"]]
        attached = loop_backing_files()
        assert len(loops) == 3, loops
        assert all(attached.get(dev) == str(trusted) for dev in loops), (loops, attached)
    finally:
        blk.release()
    out = blk.job.output()
    assert blk.job.state == "COMPLETED", out
    assert tasks_read(out) == {n: "trusted tools + user data" for n in NODES}, out
    wait_nodes_clean(c)
    wait_until(lambda: not c.instance_loops(), 10, what="the loop devices to go")


def test_overlapping_jobs_share_the_common_node(cluster3):
    c = cluster3
    img = user_image(c, "shared.sqfs")
    after = "cat /squash/shared/hello.txt"
    n1, n2, n3 = c.nodes
    j1 = BlockingJob(c, USER1, img, after=after, extra_args=["-N2", "-w", "n1,n2"])
    j2 = None
    try:
        j2 = BlockingJob(c, USER1, img, after=after, extra_args=["-N2", "-w", "n2,n3"])
        j1.wait_ready()
        j2.wait_ready()
        assert c.job_nodes(j1.job.id) == ["n1", "n2"]
        assert c.job_nodes(j2.job.id) == ["n2", "n3"]
        # n2 holds one mount for both jobs; n1 and n3 one for their job.
        shared = n2.list_mounts()
        assert len(shared) == 1, shared
        assert sorted(shared[0]["jobs"]) == sorted([j1.job.id, j2.job.id]), shared
        assert shared[0]["refcount"] == 2, shared
        assert len(n2.node_mounts()) == 1 and len(n2.fuse_servers()) == 1
        for node, job in ((n1, j1), (n3, j2)):
            ms = node.list_mounts()
            assert len(ms) == 1 and ms[0]["jobs"] == [job.job.id], (node.name, ms)
            assert len(node.node_mounts()) == 1

        # The first job ends: n1 is released, n2 keeps its mount for j2.
        j1.release()
        assert j1.job.state == "COMPLETED", j1.job.output()
        wait_nodes_clean(c, [n1])
        still = n2.list_mounts()
        assert len(still) == 1 and still[0]["jobs"] == [j2.job.id], still
        assert still[0]["mount_point"] == shared[0]["mount_point"]
        assert still[0]["server_pid"] == shared[0]["server_pid"]
        assert [m["mount_point"] for m in n2.node_mounts()] == [shared[0]["mount_point"]]
        assert len(n3.list_mounts()) == 1

        # j2 runs its batch script on n2 and still reads from that mount.
        j2.release()
        assert j2.job.state == "COMPLETED", j2.job.output()
        assert j2.job.output() == "hello from the image\n"
    finally:
        j1.go.touch()
        if j2:
            j2.go.touch()
    wait_nodes_clean(c)


@pytest.mark.host_release_only("squashd down fails the job, not the node: test_mounts.py checks that through every release's Slurm; this is squashd's own per-node bookkeeping")
def test_squashd_down_on_one_node(cluster3):
    c = cluster3
    img = user_image(c, "down.sqfs")
    n2 = c.node_named("n2")
    n2.squashd_stop()
    try:
        assert n2.squashd_pid() is None
        with c.plugin_retry(1):
            job = c.run_job(USER1, SRUN_ALL.format(path="/squash/down/hello.txt") + "\n",
                            [f"--squash-image={img}", "-N3"])
        out = job.output()
        assert job.state == "FAILED", (job.state, out)
        # The failure names n2, and only n2.
        reasons = re.findall(r"^squash: .*$", out, re.M)
        assert reasons, out
        assert all(re.search(r"\bn2\b", r) for r in reasons), reasons
        assert not [r for r in reasons if re.search(r"\bn[13]\b", r)], reasons
        assert any("not reachable" in r for r in reasons), reasons
        # n1 and n3 ran their tasks with the image, and their epilogs
        # released it.
        read = tasks_read(out)
        assert read.get("n1") == read.get("n3") == "hello from the image", out
        assert "n2" not in read, out
        wait_nodes_clean(c, [c.node_named("n1"), c.node_named("n3")])
        assert_not_drained(c)
    finally:
        n2.squashd_start()
    # n2 never mounted anything; with its squashd back, jobs work again.
    assert n2.list_mounts() == [] and n2.node_mounts() == []
    job = c.run_job(USER1, SRUN_ALL.format(path="/squash/down/hello.txt") + "\n",
                    [f"--squash-image={img}", "-N3"])
    assert job.state == "COMPLETED", job.output()
    assert tasks_read(job.output()) == {n: "hello from the image" for n in NODES}
    wait_nodes_clean(c)


def test_scancel_leaves_every_node_clean(cluster3):
    c = cluster3
    trusted = c.make_image(c.trusted / "cancel.sqfs", FILES, owner="root", mode=0o644)
    img = user_image(c, "cancelme.sqfs")
    blk = BlockingJob(c, USER1, f"{trusted},{img}", extra_args=["-N3"])
    try:
        blk.wait_ready()
        for n in c.nodes:
            assert len(n.list_mounts()) == 2, (n.name, n.list_mounts())
        run(["scancel", blk.job.id], env=c.env)
        info = blk.job.wait()
        assert info["JobState"] == "CANCELLED", info
    finally:
        blk.go.touch()
    wait_nodes_clean(c)
    wait_until(lambda: not c.instance_loops(), 10, what="the loop devices to go")
    assert_not_drained(c)


def test_requeue_leaves_every_node_clean(cluster3):
    c = cluster3
    img = user_image(c, "requeue.sqfs")
    d = c.workdir(USER1, "rq")
    # Each run announces itself and waits for its own go file.
    script = c.write_script(d, f"""
r=${{SLURM_RESTART_COUNT:-0}}
echo "run $r"
{SRUN_ALL.format(path="/squash/requeue/hello.txt")}
echo $$ > {d}/ready.$r
for i in $(seq 1 1200); do [ -e {d}/go.$r ] && break; sleep 0.1; done
""")
    job = c.sbatch(USER1, script, [f"--squash-image={img}", "-N3", "--requeue",
                                   "--open-mode=append"], cwd=d)
    assert isinstance(job, Job), job.stderr
    try:
        wait_until(lambda: (d / "ready.0").exists(), 60, what="the first run")
        for n in c.nodes:
            assert [m["jobs"] for m in n.list_mounts()] == [[job.id]], n.name

        # Requeued and held: every node's epilog releases the job.
        run(["scontrol", "requeuehold", job.id], env=c.env)
        wait_until(lambda: (job.info() or {}).get("JobState") == "PENDING", 60,
                   what="the job to be pending again")
        wait_nodes_clean(c)
        assert_not_drained(c)

        # Released, it runs again with the same id and the image on every node.
        run(["scontrol", "release", job.id], env=c.env)

        def second_run():
            if (d / "ready.1").exists():
                return True
            # Slurm holds a requeued job back for about two minutes
            # (BeginTime); bring its start forward.
            if (job.info() or {}).get("Reason") == "BeginTime":
                run(["scontrol", "update", f"jobid={job.id}", "StartTime=now"],
                    check=False, env=c.env)
            return False
        try:
            wait_until(second_run, JOB_TIMEOUT, 0.5, what="the second run")
        except AssertionError as e:
            raise AssertionError(f"{e}; the job: {job.info()}") from None
        for n in c.nodes:
            assert [m["jobs"] for m in n.list_mounts()] == [[job.id]], n.name
        (d / "go.1").touch()
        job.wait()
    finally:
        (d / "go.0").touch()
        (d / "go.1").touch()
    out = job.output()
    assert job.state == "COMPLETED", out
    assert "run 0\n" in out and "run 1\n" in out, out
    # Both runs read the image on all three nodes.
    lines = re.findall(r"^task \d+ on (n\d): hello from the image$", out, re.M)
    assert sorted(lines) == sorted(NODES * 2), out
    wait_nodes_clean(c)
    assert_not_drained(c)


def test_single_node_steps_in_a_three_node_allocation(cluster3):
    c = cluster3
    img = user_image(c, "steps.sqfs")
    step = "bash -c 'echo \"task $SLURM_PROCID on $(hostname): $(cat /squash/steps/hello.txt)\"'"
    body = f"""
for n in n3 n1 n2; do srun -N1 -n1 -w $n {step}; done
echo relative; srun -N1 -n1 --relative=1 {step}
echo plain; srun -N1 -n1 {step}
"""
    job = c.run_job(USER1, body, [f"--squash-image={img}", "-N3"])
    out = job.output()
    assert job.state == "COMPLETED", out
    lines = re.findall(r"^task 0 on (n\d): (.*)$", out, re.M)
    assert lines[:3] == [("n3", "hello from the image"), ("n1", "hello from the image"),
                         ("n2", "hello from the image")], out
    # Which node --relative=1 and a plain -N1 step land on is Slurm's choice;
    # each must read the image there.
    assert re.search(r"^relative\ntask 0 on n[123]: hello from the image$", out, re.M), out
    assert re.search(r"^plain\ntask 0 on n[123]: hello from the image$", out, re.M), out

    # The same from an interactive allocation (salloc on the host).
    d = c.workdir(USER1, "salloc")
    p = c.as_user(USER1, ["salloc", "-N3", f"--squash-image={img}", "bash", "-c",
                          f"for n in n2 n3 n1; do srun -N1 -n1 -w $n {step}; done"],
                  cwd=d, timeout=90)
    assert p.returncode == 0, p.stderr
    assert re.findall(r"^task 0 on (n\d): hello from the image$", p.stdout, re.M) == \
        ["n2", "n3", "n1"], (p.stdout, p.stderr)
    wait_until(lambda: not c.squeue_ids(), 30, 0.2, "the allocation to end")
    wait_nodes_clean(c)


def test_a_new_node_does_not_pin_other_clusters_mounts(cluster):
    """A node's mount namespace starts as a copy of the host's mounts. A node
    started while another cluster's job holds a kernel and a FUSE mount must
    drop its copies: otherwise they keep that loop device attached and that
    FUSE server alive after the job has ended."""
    c = cluster
    trusted = c.make_image(c.trusted / "pinned.sqfs", FILES, owner="root", mode=0o644)
    d = c.workdir(USER1, "img")
    data = c.make_image(d / "pinnedfuse.sqfs", FILES, owner=USER1)
    root = tempfile.mkdtemp(prefix="sqtest.")
    os.chmod(root, 0o755)
    try:
        with blocking_jobs(c, (USER1, f"{trusted},{data}", "")) as (blk,):
            mounts = {m["mode"]: m for m in c.list_mounts()}
            loop = mounts["kernel"]["loop_device"]
            server = mounts["fuse"]["server_pid"]
            p = run([CLUSTER_SH, "start", "--nodes", "1", root], check=False, timeout=120)
            assert p.returncode == 0, p.stdout + p.stderr
            node = Cluster(root, 1).nodes[0]
            copies = [m for m in node.mountinfo()
                      if is_squash_mount(m) or m["source"].startswith("/dev/loop")
                      or m["mount_point"].startswith(str(c.dir) + "/")]
            assert copies == [], copies
            assert len(c.node_mounts()) == 2  # the host still has both
            blk.release()
            assert blk.job.state == "COMPLETED", blk.job.output()
        # With the new node still up, the job's mounts really go.
        assert Path(f"/proc/{node.holder_pid()}").exists()
        wait_until(lambda: loop_backing_files().get(loop) != str(trusted), 10,
                   what=f"{loop} to be detached")
        wait_until(lambda: not Path(f"/proc/{server}").exists(), 10,
                   what=f"FUSE server {server} to exit")
    finally:
        run([CLUSTER_SH, "stop", root], check=False, timeout=120)
        shutil.rmtree(root, ignore_errors=True)
