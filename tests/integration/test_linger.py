"""Lingering node-level mounts (squashd.conf `linger = SECONDS`): a mount
outlives its last job for that long, the next job on the same image in the
same sharing domain takes it over without mounting again, and it is torn
down when the time is up, when its FUSE server dies, or when squashd stops.

squashd runs with linger only inside the `lingering` fixture; it restores
the configuration and restarts squashd afterwards, so the other tests see
linger = 0 (today's behaviour, covered by test_mounts.py)."""

import contextlib
import os
import signal
import time

import pytest

from conftest import SQUASHCTL, SQUASHD, USER1, USER2, run, wait_until

FILES = {"hello.txt": "hello from the image\n"}


@contextlib.contextmanager
def lingering(cluster, seconds, more=""):
    """squashd with `linger = seconds` (and the settings in more) for the
    body; back to the original configuration (and a squashd without
    lingering mounts) afterwards."""
    conf = cluster.dir / "squashd.conf"
    original = conf.read_text()
    try:
        cluster.cluster_sh("squashd-stop")
        conf.write_text(original + f"linger = {seconds}\n" + more)
        cluster.cluster_sh("squashd-start")
        assert f"linger {seconds} s)" in cluster.squashd_log()
        yield
    finally:
        cluster.cluster_sh("squashd-stop")
        conf.write_text(original)
        cluster.cluster_sh("squashd-start")


def images(cluster, name):
    """A trusted image (kernel mount, shared node-wide) and a user image
    (FUSE mount, shared by USER1's jobs only), readable by USER2 too."""
    kernel = cluster.make_image(cluster.trusted / f"{name}-k.sqfs", FILES, owner="root", mode=0o644)
    d = cluster.workdir(USER1, "lingerimg")
    fuse = cluster.make_image(d / f"{name}-f.sqfs", FILES, owner=USER1, mode=0o644)
    return kernel, fuse


def by_image(cluster):
    return {m["image"]: m for m in cluster.list_mounts()}


def read_both_job(cluster, user, kernel, fuse, name):
    k, f = kernel.stem, fuse.stem
    job = cluster.run_job(user, f"cat /squash/{k}/hello.txt /squash/{f}/hello.txt\n",
                          [f"--squash-image={kernel},{fuse}"])
    assert job.state == "COMPLETED", job.output()
    assert job.output() == FILES["hello.txt"] * 2
    return job


@pytest.mark.host_release_only("squashd's own linger timers: the same on every release")
def test_next_job_takes_over_the_lingering_mount_until_it_expires(cluster):
    kernel, fuse = images(cluster, "pipe")
    linger = 8
    with lingering(cluster, linger):
        read_both_job(cluster, USER1, kernel, fuse, "a")
        first = wait_until(lambda: (lambda ms: ms if len(ms) == 2 and all(
            m["state"] == "lingering" for m in ms.values()) else None)(by_image(cluster)),
            10, what="both mounts to linger")
        for m in first.values():
            assert m["jobs"] == [] and m["refcount"] == 0, m
            assert 0 < m["linger_left_s"] <= linger, m
        loop = first[str(kernel)]["loop_device"]
        server = first[str(fuse)]["server_pid"]
        assert os.path.exists(f"/proc/{server}")
        assert len(cluster.node_mounts()) == 2
        # Lingering is not a problem for health, and gc leaves them alone.
        assert cluster.squashctl("health", check=False).returncode == 0
        assert "linger " in cluster.squashctl("list").stdout
        cluster.squashctl("gc")
        assert set(by_image(cluster)) == {str(kernel), str(fuse)}
        # The owner sees their lingering FUSE mount; another user does not.
        p = cluster.as_user(USER1, [SQUASHCTL, "--socket", cluster.socket, "--munge-socket",
                                    cluster.munge_socket, "list", "--json"], check=True)
        assert str(fuse) in p.stdout and str(kernel) not in p.stdout, p.stdout

        offset = len(cluster.squashd_log())
        read_both_job(cluster, USER1, kernel, fuse, "b")
        log = cluster.squashd_log()[offset:]
        # The second job mounted nothing: it took the same mounts over.
        assert log.count("reusing lingering mount of image") == 2, log
        assert "mounted image" not in log and "FUSE mount" not in log, log
        second = by_image(cluster)
        for img in (kernel, fuse):
            assert second[str(img)]["mount_point"] == first[str(img)]["mount_point"]
            assert second[str(img)]["state"] == "lingering"
        assert second[str(kernel)]["loop_device"] == loop
        assert second[str(fuse)]["server_pid"] == server

        # Time up: the mounts, the loop device, the FUSE server and the
        # registry entries go without any request.
        wait_until(lambda: not cluster.list_mounts(), linger + 20, 0.2, "the linger to expire")
        log = cluster.squashd_log()[offset:]
        assert log.count("expired") >= 2, log
        assert not cluster.node_mounts()
        assert loop not in cluster.instance_loops()
        wait_until(lambda: not os.path.exists(f"/proc/{server}"), 10,
                   what="the FUSE server to exit")


@pytest.mark.host_release_only("squashd's own linger timers: the same on every release")
def test_lingering_mounts_per_sharing_domain_dead_server_crash_and_stop(cluster):
    """A lingering FUSE mount serves only its user; its server's death
    removes it; a crashed squashd's successor keeps lingering mounts until
    their expiry; a stop tears them down."""
    kernel, fuse = images(cluster, "domain")
    with lingering(cluster, 600):
        read_both_job(cluster, USER1, kernel, fuse, "u1")
        read_both_job(cluster, USER2, kernel, fuse, "u2")
        mounts = cluster.list_mounts()
        fuse_mounts = [m for m in mounts if m["image"] == str(fuse)]
        kernel_mounts = [m for m in mounts if m["image"] == str(kernel)]
        # The kernel mount is shared node-wide; FUSE mounts per user.
        assert len(kernel_mounts) == 1, mounts
        assert sorted(m["owner_uid"] for m in fuse_mounts) == sorted(
            [os.stat(fuse).st_uid, int(run(["id", "-u", USER2]).stdout)]), mounts
        assert all(m["state"] == "lingering" for m in mounts), mounts

        # A dead FUSE server of a lingering mount removes it.
        u2 = [m for m in fuse_mounts if m["owner_uid"] != os.stat(fuse).st_uid][0]
        os.kill(u2["server_pid"], signal.SIGKILL)
        wait_until(lambda: len(cluster.list_mounts()) == 2, 10,
                   what="the dead server's mount to go")
        assert u2["mount_point"] not in [m["mount_point"] for m in cluster.node_mounts()]
        assert cluster.squashctl("health", check=False).returncode == 0

        # squashd killed (no stop): the next one adopts the lingering mounts
        # with the time they had left.
        before = {m["mount_point"]: m for m in cluster.list_mounts()}
        pid = cluster.squashd_pid()
        os.kill(pid, signal.SIGKILL)
        wait_until(lambda: not os.path.exists(f"/proc/{pid}"), 10, what="squashd to die")
        cluster.cluster_sh("squashd-start")
        # (The killed one left its socket file: squashd-start cannot tell.)
        wait_until(lambda: cluster.squashctl("list", check=False).returncode == 0, 20,
                   what="the new squashd to answer")
        after = {m["mount_point"]: m for m in cluster.list_mounts()}
        assert set(after) == set(before), (before, after)
        for mp, m in after.items():
            assert m["state"] == "lingering" and 0 < m["linger_left_s"] <= before[mp]["linger_left_s"] + 1, m
        server = [m for m in after.values() if m["image"] == str(fuse)][0]["server_pid"]

        # A stop tears every lingering mount down.
        offset = len(cluster.squashd_log())
        cluster.cluster_sh("squashd-stop")
        assert cluster.squashd_log()[offset:].count("ends: squashd stops") == 2
        assert not cluster.node_mounts()
        assert not cluster.instance_loops()
        wait_until(lambda: not os.path.exists(f"/proc/{server}"), 10,
                   what="the FUSE server to exit")


@pytest.mark.parametrize("value", ["-1", "3601", "ten"])
def test_linger_out_of_bounds_is_refused(cluster, value):
    conf = cluster.dir / "bad-linger.conf"
    conf.write_text((cluster.dir / "squashd.conf").read_text() + f"linger = {value}\n")
    p = run([SQUASHD, "--config", conf, "--socket", cluster.dir / "bad.sock"],
            check=False, timeout=30)
    assert p.returncode == 1
    assert "linger must be a number from 0 to 3600" in p.stderr + p.stdout, p.stderr


@pytest.mark.host_release_only("squashd's own linger timers: the same on every release")
def test_writable_overlay_goes_at_release_while_its_image_lingers(cluster):
    """The job's overlay is torn down at release (before the node-level
    mount below it, which then lingers) and the next job takes over the
    mount with a fresh overlay."""
    from test_writable_overlay import overlays_gone, user_image
    img = user_image(cluster, cluster.workdir(USER1, "lingerrw") / "lrw.sqfs", USER1, USER1)
    with lingering(cluster, 60):
        first = cluster.run_job(USER1, "echo mine > /squash/lrw/new.txt; cat /squash/lrw/new.txt\n",
                                [f"--squash-image={img}::rw"])
        assert first.output() == "mine\n", first.output()
        (m,) = cluster.list_mounts()
        assert m["state"] == "lingering", m
        overlays_gone(cluster)
        assert os.path.exists(f"/proc/{m['server_pid']}")
        offset = len(cluster.squashd_log())
        second = cluster.run_job(USER1, "ls /squash/lrw/new.txt 2>&1; echo x > /squash/lrw/other\n",
                                 [f"--squash-image={img}::rw"])
        assert second.state == "COMPLETED", second.output()
        assert "No such file or directory" in second.output(), second.output()
        assert "reusing lingering mount of image" in cluster.squashd_log()[offset:]
        assert [x["server_pid"] for x in cluster.list_mounts()] == [m["server_pid"]]


@pytest.mark.host_release_only("squashd's own linger and loop devices: the same on every release")
def test_a_lingering_kernel_mount_gives_its_loop_device_up_to_a_new_mount(cluster):
    """max_loop_devices bounds the loop devices squashd holds, lingering
    mounts' included; at the limit the mount that lingers gives its device
    up (core/loop_devices.c) instead of the new job being refused, and
    health does not count it as taken."""
    first = cluster.make_image(cluster.trusted / "lend-1.sqfs", FILES, owner="root", mode=0o644)
    second = cluster.make_image(cluster.trusted / "lend-2.sqfs", FILES, owner="root", mode=0o644)
    with lingering(cluster, 60, "max_loop_devices = 1\n"):
        job = cluster.run_job(USER1, "cat /squash/lend-1/hello.txt\n", [f"--squash-image={first}"])
        assert job.output() == FILES["hello.txt"], job.output()
        (m,) = cluster.list_mounts()
        assert m["state"] == "lingering" and m["mode"] == "kernel", m
        loop = m["loop_device"]
        assert cluster.squashctl("health", check=False).returncode == 0, \
            cluster.squashctl("health", check=False).stdout
        job = cluster.run_job(USER2, "cat /squash/lend-2/hello.txt\n", [f"--squash-image={second}"])
        assert job.state == "COMPLETED" and job.output() == FILES["hello.txt"], job.output()
        (m,) = cluster.list_mounts()
        assert m["image"] == str(second) and m["state"] == "lingering", m
        assert [x["fstype"] for x in cluster.node_mounts()] == ["squashfs"], cluster.node_mounts()
        assert loop not in cluster.instance_loops() or m["loop_device"] == loop
        assert (f"linger of image {first} at {cluster.state_dir}/mnt/" in cluster.squashd_log()
                and "ends: its loop device is needed (max_loop_devices = 1)" in cluster.squashd_log())
    assert not cluster.list_mounts() and not cluster.node_mounts()


@pytest.mark.host_release_only("squashd's own registry budget: the same on every release")
def test_a_users_lingering_mounts_stay_within_their_registry_budget(cluster):
    """A lingering mount has no holder whose registry budget counts it, yet
    its record is written with every save: a user's own image mounts linger
    only while that user's entries (the one being released included) and
    lingering mounts stay within registry_entries_per_user (and
    registry_bytes_per_user); past it the mount goes at once
    (daemon/registry/usage.c)."""
    from test_squash_shell import shell_cmd
    with lingering(cluster, 600, "registry_entries_per_user = 3\n"):
        d = cluster.workdir(USER1, "linger-budget")
        imgs = [cluster.make_image(d / f"b{i}.sqfs", FILES, owner=USER1) for i in range(5)]
        offset = len(cluster.squashd_log())
        for i, img in enumerate(imgs):
            p = run(["runuser", "-u", USER1, "--", *[str(x) for x in shell_cmd(
                cluster, f"{img}:/squash/b{i}", "--", "cat", f"/squash/b{i}/hello.txt")]],
                check=False, timeout=60, cwd=d, env=cluster.env)
            assert p.returncode == 0 and p.stdout == FILES["hello.txt"], p.stderr
        # At each release the session's own entry still counts: two linger.
        wait_until(lambda: len(by_image(cluster)) == 2, 10, 0.1, "two lingering mounts")
        assert sorted(by_image(cluster)) == [str(imgs[0]), str(imgs[1])], by_image(cluster)
        assert all(m["state"] == "lingering" for m in by_image(cluster).values()), by_image(cluster)
        # (The log says why, on the user's log budget: not counted here.)
        assert "is unmounted now, not kept for linger" in cluster.squashd_log()[offset:]


@pytest.mark.host_release_only("squashd's own linger timers: the same on every release")
def test_an_expiry_over_a_stopped_reader_delays_no_other_users_expiry(cluster):
    """The linger timer hands an expired mount's unmounting to its user's
    thread (core/owner_teardown.c): over that user's stopped reader it
    waits there up to request_timeout, and another user's mount that
    expires meanwhile goes on time."""
    from conftest import proc_uids, resume, uid_of
    from test_squash_shell import shell_cmd

    def session(user, img, target):
        p = run(["runuser", "-u", user, "--", *[str(x) for x in shell_cmd(
            cluster, f"{img}:{target}", "--", "cat", f"{target}/hello.txt")]],
            check=False, timeout=60, cwd=img.parent, env=cluster.env)
        assert p.returncode == 0 and p.stdout == FILES["hello.txt"], p.stderr

    def mounted(img):
        return any(m["image"] == str(img) for m in cluster.list_mounts())

    slow = cluster.make_image(cluster.workdir(USER1, "linger-stop") / "slow.sqfs", FILES, owner=USER1)
    fast = cluster.make_image(cluster.workdir(USER2, "linger-stop") / "fast.sqfs", FILES, owner=USER2)
    stopped = []
    with lingering(cluster, 2):
        try:
            session(USER1, slow, "/squash/slow")
            for pid in cluster.instance_fuse_servers():
                if proc_uids(pid)[0] == uid_of(USER1):
                    os.kill(pid, signal.SIGSTOP)
                    stopped.append(pid)
            assert stopped, "no squash-reader serves USER1's lingering mount"
            session(USER2, fast, "/squash/fast")
            t = time.monotonic()
            wait_until(lambda: not mounted(fast), 10, 0.05, "the other user's mount to expire")
            took = time.monotonic() - t
            assert took < 4, f"the other user's expiry waited {took:.1f} s"
            assert mounted(slow), "nothing was shown: the stopped reader's teardown was over"
            wait_until(lambda: not mounted(slow), 30, 0.1, "the stopped reader's mount to go")
        finally:
            resume(stopped)


@pytest.mark.host_release_only("squashd's own linger timers: the same on every release")
def test_a_merge_goes_at_release_while_its_images_linger(cluster):
    """A merge is nobody's once released, so no budget would bound its
    lingering: it goes at release; its images linger on their own and the
    next job merges them again over the same mounts."""
    from test_merged_images import overlays
    kernel, fuse = images(cluster, "merged")
    body = "cat /squash/data/hello.txt\n"
    spec = f"--squash-image={kernel}:/squash/data,{fuse}:/squash/data"
    with lingering(cluster, 60):
        first = cluster.run_job(USER1, body, [spec])
        assert first.state == "COMPLETED" and first.output() == FILES["hello.txt"], first.output()
        ms = by_image(cluster)
        assert set(ms) == {str(kernel), str(fuse)}, cluster.list_mounts()
        assert all(m["state"] == "lingering" for m in ms.values()), ms
        assert not overlays(cluster), overlays(cluster)
        offset = len(cluster.squashd_log())
        second = cluster.run_job(USER1, body, [spec])
        assert second.state == "COMPLETED" and second.output() == FILES["hello.txt"], second.output()
        assert cluster.squashd_log()[offset:].count("reusing lingering mount of image") == 2
        assert not overlays(cluster), overlays(cluster)
    assert not cluster.list_mounts() and not cluster.node_mounts()
