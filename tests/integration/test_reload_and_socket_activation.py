"""systemd integration without systemd: SIGHUP (systemctl reload) applies
the settings that may change at run time and names the others in the log;
socket activation (squashd.socket) hands squashd a listening socket through
LISTEN_FDS, and clients that connect before squashd runs wait in its
backlog and get their answer."""

import os
import re
import signal
import subprocess
import sys

from conftest import SQUASHCTL, SQUASHD, USER1, run, send_hup_and_wait, setting, wait_until

FILES = {"hello.txt": "hello from the image\n"}


def test_reload_applies_safe_settings_and_names_the_others(cluster):
    conf = cluster.dir / "squashd.conf"
    original = conf.read_text()
    d = cluster.workdir(USER1, "img")
    a = cluster.make_image(d / "ra.sqfs", FILES, owner=USER1)
    b = cluster.make_image(d / "rb.sqfs", FILES, owner=USER1)
    uid = str(os.stat(a).st_uid)
    try:
        changed = (original.replace("request_timeout = 10", "request_timeout = 17")
                   .replace("base_dir = /squash\n", "base_dir = /squash-elsewhere\n")
                   + "max_images_per_job = 1\n")
        conf.write_text(changed)
        log = send_hup_and_wait(cluster, "setting(s) applied")
        assert "reload: request_timeout is now '17'" in log, log
        assert "reload: max_images_per_job is now '1'" in log, log
        assert (f"reload: base_dir changed in {conf} but takes effect only when squashd "
                "restarts; still '/squash'") in log, log
        assert "2 setting(s) applied, 1 need a restart" in log, log
        assert setting(cluster, "request_timeout") == "17"
        assert setting(cluster, "max_images_per_job") == "1"
        assert setting(cluster, "base_dir") == "/squash"
        # In force for the next request: two images are now one too many.
        p = cluster.rawclient("mount", "3999996", uid, f"{a}:/squash/ra", f"{b}:/squash/rb")
        assert "too many images (2, this node allows at most 1 per job)" in p.stdout + p.stderr, \
            p.stdout + p.stderr
        cluster.squashctl("release", "3999996")

        # A file that does not load changes nothing.
        conf.write_text(changed.replace("request_timeout = 17", "request_timeout = soon"))
        log = send_hup_and_wait(cluster, "keeping the settings in force")
        assert "request_timeout must be a number" in log, log
        assert setting(cluster, "request_timeout") == "17"
    finally:
        conf.write_text(original)
        send_hup_and_wait(cluster, "setting(s) applied")
    assert setting(cluster, "request_timeout") == "10"
    assert setting(cluster, "max_images_per_job") == "1024"


# Binds the socket as systemd's squashd.socket would, waits for a line on
# stdin, then becomes squashd with LISTEN_FDS=1 and LISTEN_PID (its own pid,
# kept across exec).
LAUNCHER = r"""
import os, socket, sys
path, squashd, conf = sys.argv[1:4]
if os.path.exists(path):
    os.unlink(path)
s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
s.bind(path)
os.chmod(path, 0o666)
s.listen(128)
print("listening", flush=True)
sys.stdin.readline()
if s.fileno() != 3:
    os.dup2(s.fileno(), 3, inheritable=True)
else:
    os.set_inheritable(3, True)
os.environ["LISTEN_FDS"] = "1"
os.environ["LISTEN_PID"] = str(os.getpid())
os.execv(squashd, [squashd, "--config", conf, "--debug"])
"""


def backlog(path):
    """Connections waiting in the listen queue of the unix socket at path."""
    out = run(["ss", "-xlH", "src", str(path)]).stdout.split()
    return int(out[2]) if len(out) > 2 else 0


def test_socket_activation_keeps_clients_waiting_until_squashd_runs(cluster):
    sock = cluster.socket
    old = cluster.squashd_pid()
    cluster.cluster_sh("squashd-stop")
    wait_until(lambda: not os.path.exists(f"/proc/{old}"), 10, what="squashd to exit")
    log = open(cluster.dir / "log" / "squashd.log", "a")
    launcher = subprocess.Popen(
        [sys.executable, "-c", LAUNCHER, sock, SQUASHD, cluster.dir / "squashd.conf"],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=log, text=True,
        start_new_session=True, env=dict(os.environ, SQUASH_TEST_CLUSTER=str(cluster.dir)))
    client = None
    try:
        assert launcher.stdout.readline() == "listening\n"
        # The cluster's helpers (squashd_pid, squashd-stop) see it as squashd.
        (cluster.dir / "run" / "squashd.pid").write_text(f"{launcher.pid}\n")
        offset = len(cluster.squashd_log())
        client = subprocess.Popen([SQUASHCTL, "--socket", sock, "--munge-socket",
                                   cluster.munge_socket, "status"],
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        wait_until(lambda: backlog(sock) >= 1, 10, what="the client to wait in the backlog")
        assert client.poll() is None, client.communicate()
        launcher.stdin.write("go\n")
        launcher.stdin.flush()
        out, err = client.communicate(timeout=60)
        assert client.returncode == 0, err
        assert re.search(r"^version: ", out, re.M), out
        assert "(socket from systemd)" in cluster.squashd_log()[offset:]

        # Jobs are served through the inherited socket.
        d = cluster.workdir(USER1, "img")
        img = cluster.make_image(d / "act.sqfs", FILES, owner=USER1)
        job = cluster.run_job(USER1, "cat /squash/act/hello.txt\n", [f"--squash-image={img}"])
        assert job.state == "COMPLETED", job.output()
        assert job.output() == FILES["hello.txt"]
        wait_until(lambda: not cluster.list_mounts(), 15, what="the mount to go")

        # A stop leaves the socket to its owner (systemd) for the next squashd.
        launcher.send_signal(signal.SIGTERM)
        launcher.wait(30)
        assert os.path.exists(sock), "squashd removed a socket it did not create"
    finally:
        if client and client.poll() is None:
            client.kill()
        if launcher.poll() is None:
            launcher.kill()
            launcher.wait()
        log.close()
        cluster.cluster_sh("squashd-start")
