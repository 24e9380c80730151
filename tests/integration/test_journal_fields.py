"""Under systemd (JOURNAL_STREAM set) squashd logs to the journal with the
fields of the request: JOB_ID, USER_ID, IMAGE, MODE. This machine runs no
journald, so the test listens on journald's socket itself
(/run/systemd/journal/socket, only while nothing else owns it) and reads
the native-protocol datagrams squashd sends."""

import os
import socket
import struct
import threading
from pathlib import Path

import pytest

from conftest import CLUSTER_SH, USER1, run, wait_until

FILES = {"hello.txt": "hello from the image\n"}
JOURNAL_DIR = Path("/run/systemd/journal")
JOURNAL_SOCKET = JOURNAL_DIR / "socket"


def parse_entry(data):
    """One native journal datagram: KEY=value lines, or KEY, newline, a
    little-endian 64-bit length and that many bytes (values with newlines)."""
    fields, i = {}, 0
    while i < len(data):
        nl = data.index(b"\n", i)
        line = data[i:nl]
        if b"=" in line:
            k, v = line.split(b"=", 1)
            i = nl + 1
        else:
            (n,) = struct.unpack_from("<Q", data, nl + 1)
            k, v = line, data[nl + 9:nl + 9 + n]
            i = nl + 9 + n + 1
        fields[k.decode()] = v.decode(errors="surrogateescape")
    return fields


class FakeJournal:
    def __init__(self):
        self.entries = []
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.sock.bind(str(JOURNAL_SOCKET))
        os.chmod(JOURNAL_SOCKET, 0o666)
        self.thread = threading.Thread(target=self._read, daemon=True)
        self.thread.start()

    def _read(self):
        while True:
            try:
                data = self.sock.recv(1 << 20)
            except OSError:
                return
            self.entries.append(parse_entry(data))

    def close(self):
        self.sock.shutdown(socket.SHUT_RDWR)
        self.sock.close()
        JOURNAL_SOCKET.unlink()


def restart_squashd(cluster, env):
    old = cluster.squashd_pid()
    cluster.cluster_sh("squashd-stop")
    if old:
        wait_until(lambda: not os.path.exists(f"/proc/{old}"), 10, what="squashd to exit")
    run([CLUSTER_SH, "squashd-start", cluster.dir], env=env, timeout=180)


@pytest.mark.host_release_only("squashd's own log fields: the same on every release (the guests check them in the journal of each)")
def test_journal_entries_carry_the_requests_fields(cluster):
    if JOURNAL_DIR.exists():
        pytest.skip("a journald owns /run/systemd/journal here; see journalctl -u squashd JOB_ID=N")
    JOURNAL_DIR.mkdir(parents=True)
    journal = FakeJournal()
    try:
        restart_squashd(cluster, dict(os.environ, JOURNAL_STREAM="0:0"))
        d = cluster.workdir(USER1, "img")
        img = cluster.make_image(d / "journal.sqfs", FILES, owner=USER1)
        offset = len(cluster.squashd_log())
        job = cluster.run_job(USER1, "cat /squash/journal/hello.txt\n", [f"--squash-image={img}"])
        assert job.state == "COMPLETED", job.output()
        wait_until(lambda: not cluster.list_mounts(), 15, what="the mount to go")

        def entry(text):
            found = [e for e in journal.entries if text in e.get("MESSAGE", "")]
            return found[-1] if found else None
        ready = wait_until(lambda: entry(f"job {job.id}: 1 image(s) ready"), 10,
                           what="the journal entry of the mount")
        assert ready["SYSLOG_IDENTIFIER"] == "squashd"
        assert ready["PRIORITY"] == "6"
        assert ready["JOB_ID"] == str(job.id)
        assert ready["USER_ID"] == str(os.stat(img).st_uid)
        assert ready["IMAGE"] == str(img)
        assert ready["MODE"] == "fuse"
        released = wait_until(lambda: entry(f"job {job.id} released"), 10,
                              what="the journal entry of the release")
        assert released["JOB_ID"] == str(job.id)
        assert "USER_ID" not in released and "IMAGE" not in released
        # Lines outside a request carry no job.
        started = entry("listening on")
        assert started and "JOB_ID" not in started
        # They went to the journal, not to stderr.
        assert f"job {job.id}: 1 image(s) ready" not in cluster.squashd_log()[offset:]
    finally:
        journal.close()
        restart_squashd(cluster, dict(os.environ))
        JOURNAL_DIR.rmdir()
