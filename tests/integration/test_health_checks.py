"""`squashctl health` fails, with one line naming it, for each fault made to
happen for real: a mount of a job Slurm no longer runs here, loop devices
exhausted (squashd's max_loop_devices, set by a reload), a full state
directory; and passes again once the fault is gone."""

import os
import re
import signal
import subprocess

import pytest

from conftest import USER1, USER2, blocking_jobs, run, wait_until

FILES = {"hello.txt": "hello from the image\n"}


def health(cluster):
    p = cluster.squashctl("health", check=False)
    return p.returncode, p.stdout


def reload_conf(cluster, text, expect):
    """Writes squashd.conf, sends SIGHUP and waits for squashd to log expect."""
    offset = len(cluster.squashd_log())
    conf = cluster.dir / "squashd.conf"
    conf.write_text(text)
    os.kill(cluster.squashd_pid(), signal.SIGHUP)
    wait_until(lambda: expect in cluster.squashd_log()[offset:], 10,
               what=f"squashd to log {expect!r}")


@pytest.mark.host_release_only("squashctl health: squashd's own checks, the same on every release")
def test_health_names_a_mount_of_a_job_that_no_longer_runs_here(cluster):
    d = cluster.workdir(USER1, "img")
    running = cluster.make_image(d / "running.sqfs", FILES, owner=USER1)
    gone = cluster.make_image(d / "gone.sqfs", FILES, owner=USER1)
    holder = None
    with blocking_jobs(cluster, (USER1, running, "")) as (blk,):
        try:
            assert health(cluster) == (0, ""), "a running job's mount was reported"
            # A record of a job Slurm never ran here (as a lost epilog
            # leaves), whose mount a process outside squashd still holds
            # bound where it uses it (as a step binds it at its target; a
            # copy left at squashd's own path is no use): gc keeps it, and
            # health must say so, as a note: what processes keep is
            # theirs (a user's own could), not a node fault to drain for.
            bound = cluster.workdir("root", "health-bind")
            for _ in range(3):
                p = cluster.rawclient("mount", "3999997", str(os.stat(gone).st_uid),
                                      f"{gone}:/squash/gone")
                assert p.returncode == 0, p.stdout + p.stderr
                point = next(m["mount_point"] for m in cluster.list_mounts() if m["image"] == str(gone))
                holder = subprocess.Popen(["unshare", "--mount", "--propagation", "private", "sh", "-c",
                                           f"mount --bind {point} {bound} && exec sleep 600"])
                wait_until(lambda: f" {bound} " in open(f"/proc/{holder.pid}/mountinfo").read(), 10,
                           what="the holder's own mount namespace and its bind")
                if any(3999997 in m["jobs"] for m in cluster.list_mounts()):
                    break  # the periodic gc did not release it meanwhile
                holder.kill()
                holder.wait()
            rc, out = health(cluster)
            assert rc == 0, out
            lines = out.splitlines()
            assert len(lines) == 1, out
            assert re.fullmatch(r"note: mount of job 3999997 that no longer runs here \(Slurm: gone "
                                r"unknown-to-slurmctld\); pid \d+ still uses it, so gc keeps it",
                                lines[0]), out
        finally:
            if holder:
                holder.kill()
                holder.wait()
        p = cluster.squashctl("gc")
        wait_until(lambda: all(3999997 not in m["jobs"] for m in cluster.list_mounts()), 30,
                   what="gc to release the job")
        assert health(cluster) == (0, "")
        blk.release()
        assert blk.job.state == "COMPLETED", blk.job.output()


@pytest.mark.host_release_only("squashctl health: squashd's own checks, the same on every release")
def test_health_reports_exhausted_loop_devices(cluster):
    os.chmod(cluster.trusted, 0o755)
    a = cluster.make_image(cluster.trusted / "loop-a.sqfs", FILES, owner="root")
    b = cluster.make_image(cluster.trusted / "loop-b.sqfs", FILES, owner="root")
    conf = cluster.dir / "squashd.conf"
    original = conf.read_text()
    try:
        reload_conf(cluster, original + "max_loop_devices = 1\n",
                    "reload: max_loop_devices is now '1'")
        assert health(cluster) == (0, "")
        with blocking_jobs(cluster, (USER1, a, "")) as (blk,):
            m = cluster.shared_mount(a, [blk])
            assert m["mode"] == "kernel" and m["loop_device"].startswith("/dev/loop"), m
            rc, out = health(cluster)
            assert rc == 1, out
            assert out == ("loop devices exhausted: squashd holds 1 of max_loop_devices = 1; "
                           "kernel mounts fail until a job using one ends\n"), out
            # And it is true: the next kernel mount gets no device (another
            # user's: USER1's own share, a quarter of the node's, is spent).
            job = cluster.run_job(USER2, "cat /squash/loop-b/hello.txt\n", [f"--squash-image={b}"])
            assert job.state == "FAILED", job.output()
            assert ("no loop device for a kernel mount: squashd already holds 1 "
                    "(max_loop_devices = 1)") in job.output(), job.output()
            blk.release()
            assert blk.job.state == "COMPLETED", blk.job.output()
        wait_until(lambda: not cluster.list_mounts(), 15, what="the kernel mount to go")
        assert health(cluster) == (0, "")
    finally:
        reload_conf(cluster, original, "reload: max_loop_devices is now '0'")


@pytest.mark.host_release_only("squashctl health: squashd's own checks, the same on every release")
def test_health_reports_a_full_state_directory(cluster):
    state = cluster.state_dir
    run(["mount", "-t", "tmpfs", "-o", "size=64k,mode=0755", "tmpfs", state])
    try:
        (state / "mnt").mkdir(mode=0o700)
        assert health(cluster) == (0, "")
        subprocess.run(["dd", "if=/dev/zero", f"of={state}/fill", "bs=4k"],
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        rc, out = health(cluster)
        assert rc == 1, out
        assert re.fullmatch(rf"state directory full: {re.escape(str(state))} has 0 KiB free, "
                            r"the registry needs about \d+ KiB to be saved\n", out), out
        (state / "fill").unlink()
        assert health(cluster) == (0, "")
    finally:
        run(["umount", "-l", state], check=False)
