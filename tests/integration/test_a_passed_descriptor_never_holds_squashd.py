"""A user who passes squashd a descriptor whose close waits never holds
squashd (one user never costs another; proto/passed_fds.h).

The descriptor: a TCP connection to a listener of the user's that never
reads, its send buffer full and SO_LINGER 60 s, so that the last close of
it waits up to 60 s; it travels in flight inside a unix socket, which the
user sends to squashd's socket with a request frame, and on a second
connection in a message after the frame (which squashd never reads; it
would be dropped with the connection), then closes its own copy, so that
squashd's would be the last. Without the refusal, squashd's main loop
waited out the linger: status and list failed for a minute. squashd refuses
descriptors on its socket (SO_PASSRIGHTS, Linux 6.16): each sendmsg fails
with EPERM, and squashd answers status at once throughout. On an older
kernel the option does not exist and the test is skipped (docs/security.md,
"Descriptors passed to squashd")."""

import errno
import socket
import subprocess
import time

import pytest

from conftest import USER1

SO_PASSRIGHTS = getattr(socket, "SO_PASSRIGHTS", 83)

ATTACKER = r'''
import errno, socket, struct, sys, time
path = sys.argv[1]
lst = socket.socket()
lst.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
lst.bind(("127.0.0.1", 0))
lst.listen(1)
cli = socket.socket()
cli.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4096)
cli.connect(lst.getsockname())
peer, _ = lst.accept()  # never read
cli.setblocking(False)
try:
    while True:
        cli.send(b"x" * 65536)
except BlockingIOError:
    pass
cli.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 60))


def rights(fd):
    return [(socket.SOL_SOCKET, socket.SCM_RIGHTS, struct.pack("i", fd))]


# The TCP socket in flight inside b's queue, and only there: whoever
# drops the last reference to b waits the linger time.
a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
a.sendmsg([b"x"], rights(cli.fileno()))
cli.close()
a.close()
said, conns = [], []
for where in ("with-frame", "after-frame"):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    s.connect(path)
    conns.append(s)
    try:
        if where == "with-frame":
            s.sendmsg([b"\x00" * 16], rights(b.fileno()))
        else:
            s.send(b"\x00" * 16)
            s.sendmsg([b"\x00"], rights(b.fileno()))
        said.append(where + "=sent")
    except OSError as e:
        said.append(where + "=" + errno.errorcode[e.errno])
print(" ".join(said), flush=True)
# Sent: squashd's copies are the last from here on. Refused: ours is, and
# it stays (closing it would wait here; an exit does not).
if any(x.endswith("=sent") for x in said):
    b.close()
time.sleep(120)
'''


def kernel_refuses_passed_fds():
    with socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET) as s:
        try:
            s.setsockopt(socket.SOL_SOCKET, SO_PASSRIGHTS, 0)
            return True
        except OSError as e:
            if e.errno == errno.ENOPROTOOPT:
                return False
            raise


def status_time(cluster):
    t0 = time.monotonic()
    cluster.squashctl("status")
    return time.monotonic() - t0


@pytest.mark.skipif(not kernel_refuses_passed_fds(),
                    reason="this kernel cannot refuse passed descriptors (SO_PASSRIGHTS, Linux 6.16): "
                           "a known gap on older kernels, docs/security.md")
def test_a_descriptor_whose_close_waits_is_refused_and_squashd_answers(cluster):
    d = cluster.workdir(USER1, "passed-fd")
    script = d / "attacker.py"
    script.write_text(ATTACKER)
    attacker = subprocess.Popen(["runuser", "-u", USER1, "--", "python3", str(script),
                                 str(cluster.socket)], stdout=subprocess.PIPE, text=True)
    try:
        said = attacker.stdout.readline().split()
        assert said == ["with-frame=EPERM", "after-frame=EPERM"], said
        # squashd answers at once, again and again, while the user holds on.
        slowest = max(status_time(cluster) for _ in range(5))
        assert slowest < 5, f"squashd took {slowest:.1f} s to answer status"
        assert attacker.poll() is None, "the user's process should still hold its sockets"
    finally:
        attacker.kill()
        attacker.wait(30)
