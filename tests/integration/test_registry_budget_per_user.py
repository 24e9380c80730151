"""One user's registry entries cost nobody else (issue 37, mechanism 7):
every save of squashd's registry copies and writes every user's entries,
so each user has a budget (registry_entries_per_user,
registry_bytes_per_user). A user over it gets a clear error naming the
setting; another user's job still mounts."""

import re

import pytest

from conftest import USER1, USER2, send_hup_and_wait, setting, uid_of
from test_bounded_work_per_user import budgets_of

pytestmark = pytest.mark.host_release_only("squashd's own per-user registry budget: the same on every release")

FILES = {"hello.txt": "hello from the image\n"}
FAKE_JOB = 990501


def test_a_user_over_registry_entries_per_user_is_refused_and_another_user_still_mounts(cluster):
    conf = cluster.dir / "squashd.conf"
    original = conf.read_text()
    mine = cluster.make_image(cluster.workdir(USER1, "img") / "budget.sqfs", FILES, owner=USER1)
    other = cluster.make_image(cluster.workdir(USER2, "img") / "fine.sqfs", FILES, owner=USER2)
    uid = str(uid_of(USER1))
    try:
        conf.write_text(original + "registry_entries_per_user = 2\n")
        send_hup_and_wait(cluster, "setting(s) applied")
        assert setting(cluster, "registry_entries_per_user") == "2"
        # Two jobs of USER1 (records of jobs as a prolog makes them): in budget.
        for i in range(2):
            p = cluster.rawclient("mount", str(FAKE_JOB + i), uid, f"{mine}:/squash/b{i}")
            assert p.stdout.startswith("ok"), p.stdout + p.stderr
        # squashctl status shows what the user holds, with the other budgets.
        st = cluster.squashctl("status").stdout
        block = re.search(rf"^  uid {uid} \({USER1}\):\n((?:    .*\n)+)", st, re.M)
        assert block, st
        assert "    registry entries: 2 / 2\n" in block[1], st
        assert re.search(r"^    registry bytes: [1-9]\d* / 4194304$", block[1], re.M), st
        assert "entries," not in st, st  # the separate registry lines are gone
        mine_rows = budgets_of(cluster, USER1)
        assert mine_rows["registry entries"] == (2, 2), mine_rows
        # Its reader's output budget (one reader: 20 lines, 64 KiB at once).
        assert mine_rows["reader log lines"][1] == 20, mine_rows
        assert mine_rows["reader log bytes"][1] == 65536, mine_rows
        # A third: refused, for this user, naming the setting.
        p = cluster.rawclient("mount", str(FAKE_JOB + 2), uid, f"{mine}:/squash/b2")
        assert p.stdout.startswith("user-error"), p.stdout + p.stderr
        assert "more than registry_entries_per_user = 2 (squashd.conf)" in p.stdout, p.stdout
        # Another user's job mounts and reads its image meanwhile.
        job = cluster.run_job(USER2, "cat /squash/fine/hello.txt\n", [f"--squash-image={other}"])
        assert job.state == "COMPLETED", job.output()
        assert job.output() == FILES["hello.txt"]
    finally:
        for i in range(3):
            cluster.squashctl("release", str(FAKE_JOB + i), check=False)
        conf.write_text(original)
        send_hup_and_wait(cluster, "setting(s) applied")
