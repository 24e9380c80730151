"""gc and `squashctl health` settle the records of jobs that run on the
node from the node itself (their slurmstepd processes, daemon/
local_steps.c): with jobs running, neither sends slurmctld a job or step
info RPC (counted by sdiag). Records nothing local vouches for are still
asked about (test_faults.py: lost epilogs are released)."""

import re

from conftest import USER1, blocking_jobs, run

INFO_RPCS = ("REQUEST_JOB_INFO", "REQUEST_JOB_INFO_SINGLE", "REQUEST_JOB_STEP_INFO")


def info_rpc_counts(c):
    """slurmctld's counts of job and step info RPCs since the last reset."""
    out = run(["sdiag"], env=c.env).stdout
    counts = dict.fromkeys(INFO_RPCS, 0)
    for name, count in re.findall(r"^\s*(REQUEST_\w+)\s+\(\s*\d+\)\s+count:(\d+)", out, re.M):
        if name in counts:
            counts[name] = int(count)
    return counts


def test_gc_and_health_send_no_job_info_rpc_while_jobs_run(cluster):
    c = cluster
    d = c.workdir(USER1, "img")
    a = c.make_image(d / "gcload-a.sqfs", {"a": "a\n"}, owner=USER1)
    b = c.make_image(d / "gcload-b.sqfs", {"b": "b\n"}, owner=USER1)
    with blocking_jobs(c, (USER1, a, ""), (USER1, b, "")) as jobs:
        assert len(c.list_mounts()) == 2
        run(["sdiag", "-r"], env=c.env)
        for _ in range(3):
            c.squashctl("gc")
        c.squashctl("health", check=False)
        counts = info_rpc_counts(c)
        # Both jobs still hold their mounts: gc saw them as running.
        assert sorted(str(j) for m in c.list_mounts() for j in m["jobs"]) == \
            sorted(str(b.job.id) for b in jobs)
    for b in jobs:
        b.job.wait()
    assert counts == dict.fromkeys(INFO_RPCS, 0), counts
