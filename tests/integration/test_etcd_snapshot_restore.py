"""Snapshot a real TLS etcd holding 100k keys and restore it into a new 3-member cluster by the plan."""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
from pathlib import Path

import pytest

from karmada_operator.etcd import snapshots as etcd_snapshots
from karmada_operator.etcd.snapshots import EtcdSnapshotError, verify_snapshot
from karmada_operator.tasks.etcd_health import report as etcd_health_report
from support.etcd_cluster import load_module, make_certs, run_restore, start_cluster, start_restored

KEYS = 100_000
BATCH = 10_000
BUMP = 1_000_000
BINARY_KEY = b"\xff\x00bin/\x80"


def value_of(i: int) -> bytes:
    return f"value-{i}-{hashlib.sha1(str(i).encode()).hexdigest()[:12]}".encode()


@pytest.fixture(scope="module")
def certs(tmp_path_factory):
    return make_certs(tmp_path_factory.mktemp("etcd-pki"))


@pytest.fixture(scope="module")
def source(bin_path, certs, tmp_path_factory):
    """A one-member TLS cluster with 100k keys plus a binary key, and a snapshot of it."""
    work = tmp_path_factory.mktemp("etcd-source")
    cluster = start_cluster(bin_path("etcd"), 1, work, certs, extra_args=["--max-txn-ops", str(BATCH)])
    try:
        client = cluster.client(timeout=30)
        for start in range(0, KEYS, BATCH):
            client.put_many((f"k/{i:06d}".encode(), value_of(i)) for i in range(start, start + BATCH))
        client.put(BINARY_KEY, b"\x00\x01\xfe\xff")
        status = client.status(cluster.endpoints()[0])
        snap = load_module("etcd_snapshot").run_module(
            {**cluster.conn_params(), "path": str(work / "snap.db")}
        )
        yield {"cluster": cluster, "status": status, "snapshot": snap, "work": work}
    finally:
        cluster.close()


def test_snapshot_matches_etcdutl(source, bin_path):
    snap, status = source["snapshot"], source["status"]
    assert snap["changed"] and snap["revision"] == status.revision and snap["etcd_version"] == "3.6.6"
    assert snap["size"] == Path(snap["path"]).stat().st_size
    assert snap["sha256"] == hashlib.sha256(Path(snap["path"]).read_bytes()).hexdigest()
    out = subprocess.run(
        [bin_path("etcdutl"), "snapshot", "status", "-w", "json", snap["path"]],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    etcdutl = json.loads(out)
    assert etcdutl["revision"] == snap["revision"] and etcdutl["totalKey"] >= KEYS + 1
    checked = load_module("etcd_snapshot").run_module(
        {"endpoints": ["https://unused:1"], "path": snap["path"], "verify_only": True}
    )
    assert not checked["changed"] and checked["sha256"] == snap["sha256"]


def test_snapshot_line_fast_path_and_fallback():
    assert etcd_snapshots._fast_blob(b'{"result":{"blob":"AAEC","version":"3.6.0"}}') == b"\x00\x01\x02"
    assert etcd_snapshots._fast_blob(b'{"error":{"grpc_code":14,"message":"etcdserver: no leader"}}') is None
    assert etcd_snapshots._fast_blob(b'{"result":{"version":"3.6.0","blob":"AAEC"}}') is None  # json.loads path


def plan_for(source, certs_cluster, name: str, bin_path) -> dict:
    nodes = [certs_cluster.new_node(f"{name}-{i}") for i in range(3)]
    members = [{"name": n.name, "peer_url": n.peer_url, "client_url": n.client_url} for n in nodes]
    return load_module("etcd_restore_plan").run_module(
        {
            "snapshot": source["snapshot"]["path"],
            "members": members,
            "data_dir_root": str(source["work"] / name),
            "bump_revision": BUMP,
            "mark_compacted": True,
            "etcdutl": bin_path("etcdutl"),
        }
    )


def test_restore_into_new_three_member_cluster(source, bin_path, certs, tmp_path):
    plan = plan_for(source, source["cluster"], "restored", bin_path)
    assert plan["cluster_token"] != "test" and plan["initial_cluster"].count("=") == 3
    run_restore(plan)
    restored = start_restored(bin_path("etcd"), plan, tmp_path, certs)
    try:
        client = restored.client(timeout=30)
        expected = {f"k/{i:06d}".encode(): value_of(i) for i in range(KEYS)}
        got = {kv.key: kv.value for kv in client.iter_prefix(b"k/", page=20_000)}
        assert len(got) == KEYS
        assert got == expected
        assert client.get(BINARY_KEY) == b"\x00\x01\xfe\xff"
        statuses = [client.status(url) for url in restored.endpoints()]
        source_rev = source["snapshot"]["revision"]
        assert {s.revision for s in statuses} == {source_rev + BUMP}
        assert statuses[0].cluster_id != source["status"].cluster_id
        assert len({s.cluster_id for s in statuses}) == 1 and sum(s.is_leader for s in statuses) == 1
        assert client.put("after-restore", "x") == source_rev + BUMP + 1
        health = etcd_health_report(restored.conn_params())
        assert health["healthy"] and health["healthy_count"] == 3
        hashes = {client.hash_kv(url, source_rev + BUMP + 1)["hash"] for url in restored.endpoints()}
        assert len(hashes) == 1
    finally:
        restored.close()


@pytest.mark.parametrize("damage", ["truncate-odd", "truncate-sector", "flip-byte", "flip-trailer", "empty"])
def test_damaged_snapshot_rejected_before_restore(source, bin_path, tmp_path, damage):
    bad = tmp_path / "bad.db"
    shutil.copyfile(source["snapshot"]["path"], bad)
    size = bad.stat().st_size
    with open(bad, "r+b") as handle:
        if damage == "truncate-odd":
            handle.truncate(size - 1000)
        elif damage == "truncate-sector":
            handle.truncate(size - 4096)  # still "db + 32 bytes" shaped: only the hash catches it
        elif damage in ("flip-byte", "flip-trailer"):
            pos = size // 2 if damage == "flip-byte" else size - 5
            handle.seek(pos)
            byte = handle.read(1)
            handle.seek(pos)
            handle.write(bytes([byte[0] ^ 0x01]))
        else:
            handle.truncate(0)
    with pytest.raises(EtcdSnapshotError, match="truncated|altered|sha256"):
        verify_snapshot(bad)
    with pytest.raises(EtcdSnapshotError):
        load_module("etcd_snapshot").run_module(
            {"endpoints": ["https://unused:1"], "path": str(bad), "verify_only": True}
        )
    plan = plan_for(
        {**source, "snapshot": {"path": str(bad)}, "work": tmp_path}, source["cluster"], "never", bin_path
    )
    with pytest.raises(EtcdSnapshotError):
        run_restore(plan)
    assert not any(Path(m["data_dir"]).exists() for m in plan["members"])
    assert not (tmp_path / "never").exists()
