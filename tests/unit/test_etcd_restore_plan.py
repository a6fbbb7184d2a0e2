"""The restore plan is a pure function: check names, URLs, token, data dirs and etcdutl argv."""

from __future__ import annotations

import pytest

from karmada_operator.backup import restore_plan as plan_lib
from support.etcd_cluster import load_module

RestorePlanError = plan_lib.RestorePlanError


def members(n: int) -> list[dict[str, str]]:
    return [
        {
            "name": f"etcd-{i}",
            "peer_url": f"https://10.0.0.{i}:2380",
            "client_url": f"https://10.0.0.{i}:2379",
        }
        for i in range(n)
    ]


def test_three_member_plan():
    plan = plan_lib.plan_restore(
        "/b/snap.db", members(3), "/var/lib/etcd", bump_revision=500, etcdutl="/bin/etcdutl"
    )
    initial = "etcd-0=https://10.0.0.0:2380,etcd-1=https://10.0.0.1:2380,etcd-2=https://10.0.0.2:2380"
    assert plan.initial_cluster == initial
    assert plan.cluster_token.startswith("etcd-restore-") and len(plan.cluster_token) > 20
    m1 = plan.members[1]
    assert m1.data_dir == "/var/lib/etcd/etcd-1"
    assert m1.restore_argv == [
        "/bin/etcdutl",
        "snapshot",
        "restore",
        "/b/snap.db",
        "--name",
        "etcd-1",
        "--initial-cluster",
        initial,
        "--initial-cluster-token",
        plan.cluster_token,
        "--initial-advertise-peer-urls",
        "https://10.0.0.1:2380",
        "--data-dir",
        "/var/lib/etcd/etcd-1",
        "--bump-revision",
        "500",
        "--mark-compacted",
    ]
    assert "--advertise-client-urls" in m1.etcd_args and "https://10.0.0.1:2379" in m1.etcd_args


def test_fresh_token_each_time_unless_given():
    a = plan_lib.plan_restore("/s", members(1), "/d")
    b = plan_lib.plan_restore("/s", members(1), "/d")
    assert a.cluster_token != b.cluster_token
    assert plan_lib.plan_restore("/s", members(1), "/d", cluster_token="fixed-1").cluster_token == "fixed-1"
    assert a.bump_revision == plan_lib.DEFAULT_BUMP_REVISION and a.mark_compacted


def test_templates_and_wal_dirs():
    expanded = plan_lib.expand_members(
        3,
        "karmada-etcd-",
        "https://{name}.karmada-etcd.ns.svc:2380",
        "https://{name}.karmada-etcd.ns.svc:2379",
    )
    plan = plan_lib.plan_restore("/s", expanded, "/data", wal_dir_root="/wal")
    assert [m.name for m in plan.members] == ["karmada-etcd-0", "karmada-etcd-1", "karmada-etcd-2"]
    assert plan.members[2].peer_url == "https://karmada-etcd-2.karmada-etcd.ns.svc:2380"
    assert (
        plan.members[0].restore_argv[plan.members[0].restore_argv.index("--wal-dir") + 1]
        == "/wal/karmada-etcd-0"
    )


@pytest.mark.parametrize(
    ("change", "field"),
    [
        (lambda m: m.__setitem__(1, {**m[1], "name": m[0]["name"]}), "members[1].name"),
        (lambda m: m.__setitem__(1, {**m[1], "peer_url": m[0]["peer_url"]}), "members[1].peer_url"),
        (lambda m: m.__setitem__(0, {**m[0], "peer_url": "unix:///x"}), "members[0].peer_url"),
        (lambda m: m.__setitem__(0, {**m[0], "client_url": "https://h"}), "members[0].client_url"),
        (lambda m: m.__setitem__(0, {**m[0], "name": "Bad_Name"}), "members[0].name"),
        (lambda m: m.__setitem__(0, {**m[0], "data_dir": "relative/dir"}), "members[0].data_dir"),
        (lambda m: m.__setitem__(1, {**m[1], "data_dir": "/var/lib/etcd/etcd-0"}), "members[1].data_dir"),
        (lambda m: m.clear(), "members"),
    ],
)
def test_bad_members(change, field):
    ms = members(3)
    change(ms)
    with pytest.raises(RestorePlanError) as info:
        plan_lib.plan_restore("/s", ms, "/var/lib/etcd")
    assert info.value.field == field


def test_bad_options():
    with pytest.raises(RestorePlanError, match="bump_revision"):
        plan_lib.plan_restore("/s", members(1), "/d", bump_revision=-1)
    with pytest.raises(RestorePlanError, match="mark_compacted"):
        plan_lib.plan_restore("/s", members(1), "/d", bump_revision=0, mark_compacted=True)
    with pytest.raises(RestorePlanError, match="mark_compacted"):
        plan_lib.plan_restore("/s", members(1), "/d", bump_revision=5, mark_compacted=False)
    with pytest.raises(RestorePlanError, match="cluster_token"):
        plan_lib.plan_restore("/s", members(1), "/d", cluster_token="has space")
    with pytest.raises(RestorePlanError, match="snapshot"):
        plan_lib.plan_restore("", members(1), "/d")
    with pytest.raises(RestorePlanError, match="at most 9"):
        plan_lib.plan_restore("/s", members(10), "/d")
    with pytest.raises(RestorePlanError, match="replicas"):
        plan_lib.expand_members(0, "e-", "https://{name}:2380", "https://{name}:2379")
    with pytest.raises(RestorePlanError, match="template"):
        plan_lib.expand_members(1, "e-", "https://{host}:2380", "https://{name}:2379")


def test_no_bump_is_allowed_without_mark_compacted():
    plan = plan_lib.plan_restore("/s", members(1), "/d", bump_revision=0, mark_compacted=False)
    assert "--bump-revision" not in plan.members[0].restore_argv
    assert "--mark-compacted" not in plan.members[0].restore_argv


def test_module_builds_members_from_templates():
    result = load_module("etcd_restore_plan").run_module(
        {
            "snapshot": "/s",
            "replicas": 3,
            "name_prefix": "etcd-",
            "peer_url_template": "https://{name}:2380",
            "client_url_template": "https://{name}:2379",
            "data_dir_root": "/d",
            "bump_revision": 10,
            "mark_compacted": True,
            "etcdutl": "etcdutl",
        }
    )
    assert not result["changed"] and len(result["members"]) == 3
    assert result["members"][0]["restore_argv"][:4] == ["etcdutl", "snapshot", "restore", "/s"]
    with pytest.raises(RestorePlanError, match="replicas"):
        load_module("etcd_restore_plan").run_module({"snapshot": "/s", "data_dir_root": "/d"})
