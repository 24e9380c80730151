"""squash-reader --serve, squashd's reader of a user's images, runs as
that user but is out of the user's reach by ptrace (daemon/reader/
untraceable.c): it makes itself non-dumpable before it serves, so the user
can neither stop single threads of it (the process would run on and
squashd's watch of stopped readers would see nothing, while the requests
those threads took wait) nor take a copy of its /dev/fuse descriptor
(pidfd_getfd) and read requests off the connection without answering. A
reader a user's tracer attached to before that point refuses to serve (a
root tracer is let be). Installed (mode 0711) it is non-dumpable from its
execve on; the build tree's is readable, so the tests here see the
reader's own call.

Asserted as the user, with a process of the user's own as the control
(tracing it works, so the refusal is the reader's and not the machine's
ptrace policy)."""

import os
import subprocess
import sys

import pytest

from conftest import BUILD, USER1, BlockingJob, proc_uids, uid_of

pytestmark = pytest.mark.host_release_only("the reader's own start: the same on every release")

READER = BUILD / "daemon" / "reader" / "squash-reader"
FILES = {"hello.txt": "hello from the image\n"}

# Run as the user: tries PTRACE_SEIZE and pidfd_getfd on the reader, and
# PTRACE_SEIZE on a process of the user's own; prints the three results
# (0 or an errno name).
AS_USER = r'''
import ctypes, errno, os, subprocess, sys
libc = ctypes.CDLL(None, use_errno=True)
libc.ptrace.argtypes = [ctypes.c_long, ctypes.c_long, ctypes.c_void_p, ctypes.c_void_p]
libc.syscall.restype = ctypes.c_long
PTRACE_SEIZE, PTRACE_DETACH, SYS_pidfd_open, SYS_pidfd_getfd = 0x4206, 17, 434, 438

def res(r):
    return "0" if r >= 0 else errno.errorcode[ctypes.get_errno()]

def seize(pid):
    r = libc.ptrace(PTRACE_SEIZE, pid, None, None)
    out = res(r)
    if r == 0:
        libc.ptrace(PTRACE_DETACH, pid, None, None)
    return out

reader = int(sys.argv[1])
pidfd = libc.syscall(SYS_pidfd_open, reader, 0)
assert pidfd >= 0, res(pidfd)
own = subprocess.Popen(["sleep", "60"])
print(seize(reader), res(libc.syscall(SYS_pidfd_getfd, pidfd, 0, 0)), seize(own.pid))
own.kill()
'''


def test_a_users_reader_is_out_of_the_users_ptrace(cluster):
    img = cluster.make_image(cluster.workdir(USER1, "untraceable") / "untraceable.sqfs", FILES, owner=USER1)
    job = BlockingJob(cluster, USER1, img, after="cat /squash/untraceable/hello.txt")
    try:
        job.wait_ready()
        (mount,) = [m for m in cluster.list_mounts() if m["image"] == str(img)]
        reader = mount["server_pid"]
        assert proc_uids(reader)[0] == uid_of(USER1)
        # Non-dumpable: the kernel gives its /proc/PID/fd (not /proc/PID) to root.
        assert os.stat(f"/proc/{reader}/fd").st_uid == 0, "the user's reader is dumpable"
        p = cluster.as_user(USER1, [sys.executable, "-c", AS_USER, str(reader)], timeout=60)
        assert p.returncode == 0, p.stdout + p.stderr
        seize_reader, getfd_reader, seize_own = p.stdout.split()
        assert seize_own == "0", f"the user cannot trace a process of their own here: {seize_own}"
        assert seize_reader == "EPERM", f"PTRACE_SEIZE of the user's reader: {seize_reader}"
        assert getfd_reader == "EPERM", f"pidfd_getfd of the user's reader: {getfd_reader}"
    finally:
        job.release()
    assert job.job.state == "COMPLETED", job.job.output()
    assert job.job.output() == FILES["hello.txt"], job.job.output()


# Run as the tracer (the user, or root): starts `squash-reader --serve`
# traced from before its execve, closes the serve socket at once (a reader
# that serves ends at its EOF) and prints the exit status, then stderr.
TRACED_START = r'''
import ctypes, os, socket, sys
libc = ctypes.CDLL(None, use_errno=True)
libc.ptrace.argtypes = [ctypes.c_long, ctypes.c_long, ctypes.c_void_p, ctypes.c_void_p]
PTRACE_TRACEME, PTRACE_CONT = 0, 7
ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
err_r, err_w = os.pipe()
pid = os.fork()
if pid == 0:
    try:
        os.dup2(err_w, 2)
        os.dup2(theirs.fileno(), 3)
        libc.ptrace(PTRACE_TRACEME, 0, None, None)
        os.execv(sys.argv[1], [sys.argv[1], "--serve", "/dev/fd/3"])
    finally:
        os._exit(127)
os.close(err_w)
theirs.close()
ours.close()
while True:
    _, status = os.waitpid(pid, 0)
    if not os.WIFSTOPPED(status):
        break
    sig = os.WSTOPSIG(status)
    libc.ptrace(PTRACE_CONT, pid, None, ctypes.c_void_p(0 if sig == 5 else sig))
print(os.WEXITSTATUS(status) if os.WIFEXITED(status) else -os.WTERMSIG(status))
sys.stdout.write(os.read(err_r, 65536).decode())
'''


def test_a_reader_traced_from_its_start_by_its_user_refuses_to_serve(cluster):
    p = cluster.as_user(USER1, [sys.executable, "-c", TRACED_START, str(READER)], timeout=60)
    status, _, err = p.stdout.partition("\n")
    assert p.returncode == 0 and status == "1", p.stdout + p.stderr
    assert "squash-reader: --serve: traced by pid " in err and "since its start; not serving" in err, err
    # Root may trace anything anyway (an admin's strace -f of squashd): served.
    p = subprocess.run([sys.executable, "-c", TRACED_START, str(READER)], capture_output=True,
                       text=True, timeout=60)
    status, _, err = p.stdout.partition("\n")
    assert p.returncode == 0 and status == "0", p.stdout + p.stderr
    assert "not serving" not in err, err
