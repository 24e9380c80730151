"""`squashctl metrics` (Prometheus text format, parsed with prometheus_client's
parser) and `squashctl status` count what the node really did: the requests
of the jobs run, their answer times, the mounts and FUSE servers while a job
holds them, gc releases."""

import json
import os
import re
import subprocess

import pytest

from conftest import SQUASHCTL, USER1, blocking_jobs, package_version, uid_of, wait_until

FILES = {"hello.txt": "hello from the image\n"}


def parse_metrics(text):
    """{(sample name, frozenset of labels): value}, parsed by
    prometheus_client (Debian: python3-prometheus-client). A pytest running
    on another Python than the system's parses through the system's."""
    try:
        from prometheus_client.parser import text_string_to_metric_families
    except ImportError:
        code = ("import sys, json\n"
                "from prometheus_client.parser import text_string_to_metric_families as p\n"
                "print(json.dumps([[s.name, s.labels, s.value] for f in p(sys.stdin.read())"
                " for s in f.samples]))\n")
        p = subprocess.run(["/usr/bin/python3", "-c", code], input=text, text=True,
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, check=False)
        assert p.returncode == 0, "the Prometheus text parser refused the metrics:\n" + p.stderr
        return {(n, frozenset(l.items())): v for n, l, v in json.loads(p.stdout)}
    return {(s.name, frozenset(s.labels.items())): s.value
            for f in text_string_to_metric_families(text) for s in f.samples}


def metrics(cluster):
    return parse_metrics(cluster.squashctl("metrics").stdout)


def value(m, name, **labels):
    key = (name, frozenset(labels.items()))
    assert key in m, f"no sample {name}{labels}"
    return m[key]


def kinds(m):
    return sorted({dict(l)["kind"] for n, l in m if n == "squashd_requests_total"})


def check_histograms(m):
    """Every kind's histogram is cumulative, ends in +Inf and counts exactly
    the requests of that kind."""
    for kind in kinds(m):
        buckets = sorted(((float(dict(l)["le"]), v) for (n, l), v in m.items()
                          if n == "squashd_request_duration_seconds_bucket" and dict(l)["kind"] == kind))
        assert buckets[-1][0] == float("inf"), buckets
        counts = [v for _, v in buckets]
        assert counts == sorted(counts), (kind, buckets)
        total = value(m, "squashd_requests_total", kind=kind)
        assert buckets[-1][1] == total, (kind, buckets, total)
        assert value(m, "squashd_request_duration_seconds_count", kind=kind) == total
        assert value(m, "squashd_request_duration_seconds_sum", kind=kind) >= 0


@pytest.mark.host_release_only("squashd's own counters: the same on every release")
def test_metrics_count_the_requests_of_the_jobs_run(cluster):
    d = cluster.workdir(USER1, "img")
    img = cluster.make_image(d / "metrics.sqfs", FILES, owner=USER1)
    before = metrics(cluster)
    check_histograms(before)
    assert value(before, "squashd_build_info", version=package_version(), protocol="2",
                 state_format="1") == 1

    with blocking_jobs(cluster, (USER1, img, "srun cat /squash/metrics/hello.txt\n")) as (blk,):
        during = metrics(cluster)
        assert value(during, "squashd_mounts", mode="fuse", state="ready") == 1
        assert value(during, "squashd_mounts", mode="kernel", state="ready") == 0
        assert value(during, "squashd_fuse_servers") == 1
        assert value(during, "squashd_jobs") == 1
        # The job's user holds a mount and a reader: their budgets are
        # there with the user's uid, used beside the limit.
        uid = str(uid_of(USER1))
        used = {dict(l)["budget"]: v for (n, l), v in during.items()
                if n == "squashd_user_budget_used" and dict(l)["uid"] == uid}
        limits = {dict(l)["budget"]: v for (n, l), v in during.items()
                  if n == "squashd_user_budget_limit" and dict(l)["uid"] == uid}
        print("budgets of", USER1, {b: (used[b], limits.get(b)) for b in used})
        assert used and all(" " not in b for b in used), used
        assert set(limits) <= set(used), (limits, used)
        assert used.get("mounts") == 1 and limits.get("mounts", 0) >= 1, (used, limits)
        assert all(used[b] <= limits[b] for b in limits), (used, limits)
        status = cluster.squashctl("status").stdout
        assert re.search(r"^fuse servers: 1$", status, re.M), status
        assert re.search(r"^  fuse ready: 1$", status, re.M), status
        # The versions, in text and JSON (docs/architecture.md, "Versions").
        assert re.search(rf"^version: {re.escape(package_version())}\nprotocol: 2\n"
                         r"state file format: 1\n", status, re.M), status
        js = json.loads(cluster.squashctl("status", "--json").stdout)
        assert (js["version"], js["squashctl_version"], js["protocol_version"],
                js["state_format"]) == (package_version(), package_version(), 2, 1), js
        assert js["jobs"] == 1 and js["mounts"]["fuse"] == 1 and js["fuse_servers"] == 1, js
        assert js["registry"]["saved"] is True and "unreadable" not in js["registry"], js
        assert js["problems"] == [], js
        blk.release()
        assert blk.job.state == "COMPLETED", blk.job.output()
    job = cluster.run_job(USER1, "cat /squash/metrics/hello.txt\n", [f"--squash-image={img}"])
    assert job.state == "COMPLETED", job.output()
    wait_until(lambda: not cluster.list_mounts(), 15, what="the mounts to go")

    after = metrics(cluster)
    check_histograms(after)

    def grew(name, kind):
        return (value(after, name, kind=kind) - value(before, name, kind=kind))
    # Two jobs: one prolog mount and one epilog release each, all OK.
    assert grew("squashd_requests_total", "mount") == 2
    assert grew("squashd_requests_total", "release") == 2
    assert grew("squashd_request_failures_total", "mount") == 0
    assert grew("squashd_request_failures_total", "release") == 0
    # Each batch step asks once, and so does the srun step of the first job.
    assert grew("squashd_requests_total", "step_info") >= 3
    assert grew("squashd_request_duration_seconds_count", "mount") == 2
    assert value(after, "squashd_mounts", mode="fuse", state="ready") == 0
    assert value(after, "squashd_fuse_servers") == 0
    assert value(after, "squashd_registry_saved") == 1

    # status shows the same counts and the answer times.
    status = cluster.squashctl("status").stdout
    mounts = int(value(after, "squashd_requests_total", kind="mount"))
    assert re.search(rf"^  mount +{mounts} \(\d+ not ok\), answer time mean [\d.]+ms p50 <=[\d.]+m?s "
                     r"p99 <=[\d.]+m?s$", status, re.M), status
    assert re.search(r"^  request_timeout = 10$", status, re.M), status
    assert re.search(r"^  gc_interval = \d+$", status, re.M), status


@pytest.mark.host_release_only("squashd's own counters: the same on every release")
def test_metrics_count_gc_releases_and_refused_requests(cluster):
    d = cluster.workdir(USER1, "img")
    img = cluster.make_image(d / "gcm.sqfs", FILES, owner=USER1)
    before = metrics(cluster)
    # A record of a job Slurm never ran here, as a lost epilog leaves.
    p = cluster.rawclient("mount", "3999998", str(os.stat(img).st_uid), f"{img}:/squash/gcm")
    assert p.returncode == 0, p.stdout + p.stderr
    # Released by the periodic pass or by this one: once either way.
    cluster.squashctl("gc")
    wait_until(lambda: not cluster.list_mounts(), 30, what="gc to release the job")
    # A user may not run gc: a refused request, counted as a failure.
    p = cluster.as_user(USER1, [SQUASHCTL, "--socket", cluster.socket,
                                "--munge-socket", cluster.munge_socket, "gc"])
    assert p.returncode == 1, p.stderr
    after = metrics(cluster)
    check_histograms(after)
    assert value(after, "squashd_gc_releases_total") - value(before, "squashd_gc_releases_total") == 1
    assert (value(after, "squashd_request_failures_total", kind="gc")
            - value(before, "squashd_request_failures_total", kind="gc")) == 1
    assert (value(after, "squashd_requests_total", kind="gc")
            - value(before, "squashd_requests_total", kind="gc")) == 2
