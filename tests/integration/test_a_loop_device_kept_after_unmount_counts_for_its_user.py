"""A trusted image's loop device stays attached after squashd's unmount
while anything else holds the squashfs: here a process a user left in
their squash-shell session's namespace (setsid), which keeps the
session's bind at its target. squashd cannot take that back; it counts
the device (daemon/core/pinned_loops.c) against the user's
max_loop_devices_per_user, so repeating such sessions gathers no devices
past the user's share, shows it in the user's budgets and as a note of
squashctl health (exit 0: a user's doing never drains the node). Another
user is not charged. Once the process is gone the kernel detaches the
device, and the count goes with it."""

import os
import signal

import pytest

from conftest import USER1, USER2, run, uid_of, wait_until
from test_bounded_work_per_user import budgets_of
from test_squash_shell import shell_cmd
from test_writable_overlay import squashd_with

pytestmark = pytest.mark.host_release_only("squashd's loop device budget: the same on every Slurm release")

FILES = {"hello.txt": "hello from the image\n"}


def sleepers(user, tag):
    """Pids of user's `sleep TAG` processes."""
    p = run(["pgrep", "-u", user, "-x", "-f", f"sleep {tag}"], check=False)
    return [int(x) for x in p.stdout.split()]


def test_a_loop_device_kept_after_unmount_counts_for_its_user(cluster):
    c = cluster
    os.chmod(c.trusted, 0o755)
    img = c.make_image(c.trusted / f"kept-{os.getpid()}.sqfs", FILES, owner="root")
    d1, d2 = c.workdir(USER1, "kept"), c.workdir(USER2, "kept")
    tag = str(3000 + os.getpid() % 1000)
    spec = f"{img}:/squash/kept"

    def session(user, d, *cmd):
        return c.as_user(user, shell_cmd(c, spec, "--", *cmd), cwd=d)

    with squashd_with(c, "max_loop_devices_per_user = 1\n"):
        try:
            # The session ends at once, its process left in its namespace.
            p = session(USER1, d1, "sh", "-c", f"setsid -f sleep {tag} </dev/null >/dev/null 2>&1")
            assert p.returncode == 0, p.stderr
            wait_until(lambda: sleepers(USER1, tag), 10, 0.1, "the process left in the session")
            wait_until(lambda: not [m for m in c.list_mounts() if m["image"] == str(img)], 30, 0.1,
                       "squashd to unmount the session's image")
            assert [f for f in c.instance_loops().values() if f.endswith(img.name)], \
                f"the loop device went: nothing kept it ({c.instance_loops()})"
            budgets = budgets_of(c, USER1)
            assert budgets.get("kernel mounts kept after unmount") == (1, None), budgets

            # The user's share (1) is taken: their next session is refused,
            # with the reason; another user's session of the image reads.
            p = session(USER1, d1, "cat", "/squash/kept/hello.txt")
            assert p.returncode == 125, (p.stdout, p.stderr)
            assert "max_loop_devices_per_user = 1" in p.stderr and "still attached" in p.stderr, p.stderr
            p = session(USER2, d2, "cat", "/squash/kept/hello.txt")
            assert p.returncode == 0 and p.stdout == "hello from the image\n", (p.stdout, p.stderr)
            # Its device goes with its unmount (the kernel may take a moment).
            wait_until(lambda: "kernel mounts kept after unmount" not in budgets_of(c, USER2), 5, 0.2,
                       "another user's session to leave no device kept")

            # A note in health, not a problem.
            def health():
                return c.squashctl("health", check=False)
            wait_until(lambda: "is still attached" in health().stdout, 20, 0.5, "health's note")
            h = health()
            assert h.returncode == 0, h.stdout
            assert "note: loop device /dev/loop" in h.stdout and f"image {img} is still attached" in h.stdout \
                and f"uid {uid_of(USER1)} (whose squash-shell sessions held it)" in h.stdout, h.stdout

            # The process goes: the kernel detaches the device, and the
            # user's share is free again.
            for pid in sleepers(USER1, tag):
                os.kill(pid, signal.SIGKILL)
            wait_until(lambda: not [f for f in c.instance_loops().values() if f.endswith(img.name)], 20, 0.1,
                       "the kernel to detach the device")
            wait_until(lambda: "kernel mounts kept after unmount" not in budgets_of(c, USER1), 10, 0.5,
                       "the count to go")
            p = session(USER1, d1, "cat", "/squash/kept/hello.txt")
            assert p.returncode == 0 and p.stdout == "hello from the image\n", (p.stdout, p.stderr)
            assert "is still attached" not in health().stdout
        finally:
            for pid in sleepers(USER1, tag):
                os.kill(pid, signal.SIGKILL)
            wait_until(lambda: not [f for f in c.instance_loops().values() if f.endswith(img.name)], 20, 0.1,
                       "the loop device to go")
            img.unlink()
