"""EtcdRestore's pure parts: the snapshot chosen, the members planned, the Jobs, the gate, the check."""

from __future__ import annotations

import json
from pathlib import Path

import etcd_restore as er
import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]


def karmada(**spec):
    cr = yaml.safe_load((ROOT / "config/samples/operator_v1alpha1_karmadadeployment.yaml").read_text())
    cr["metadata"].update({"name": "dc2", "namespace": "site-b", "uid": "kd-uid"})
    cr["spec"].update(spec)
    return cr


def restore(**spec):
    cr = {"apiVersion": er.API_VERSION, "kind": "EtcdRestore",
          "metadata": {"name": "move", "namespace": "site-b", "uid": "rs-uid", "generation": 1},
          "spec": {"source": {"backupRef": {"name": "nightly"}, "snapshot": "latest"},
                   "target": {"karmadaDeploymentRef": {"name": "dc2"}}, "bumpRevision": 1_000_000_000}}
    cr["spec"].update(spec)
    return cr


def backup(snapshots=()):
    return {"metadata": {"name": "nightly", "namespace": "site-b"},
            "spec": {"karmadaDeploymentRef": {"name": "dc1"},
                     "storage": {"pvc": {"claimName": "etcd-backups", "subPath": "karmada"}}},
            "status": {"snapshots": list(snapshots)}}


SNAPS = [{"name": "nightly-20260301T020000Z.db", "takenAt": "2026-03-01T02:00:00Z", "sha256": "a" * 64,
          "location": "pvc://etcd-backups/karmada/nightly-20260301T020000Z.db"},
         {"name": "nightly-20260302T020000Z.db", "takenAt": "2026-03-02T02:00:00Z", "sha256": "b" * 64}]


def test_latest_is_the_newest_snapshot_of_the_backup_with_its_sha256():
    src = er.resolve_source(restore(), backup(SNAPS))
    assert src["snapshot"] == "nightly-20260302T020000Z.db" and src["sha256"] == "b" * 64
    assert src["storage"] == {"pvc": {"claimName": "etcd-backups", "subPath": "karmada"}}
    named = er.resolve_source(restore(source={"backupRef": {"name": "nightly"},
                                              "snapshot": "nightly-20260301T020000Z.db"}), backup(SNAPS))
    assert named["sha256"] == "a" * 64


def test_an_empty_backup_or_a_missing_one_says_so():
    with pytest.raises(er.RestoreError) as err:
        er.resolve_source(restore(), backup())
    assert err.value.reason == "NoSnapshot" and "no snapshot yet" in str(err.value)
    with pytest.raises(er.RestoreError) as err:
        er.resolve_source(restore(), None)
    assert err.value.reason == "BackupNotFound"


def test_explicit_locations_become_a_store_and_a_name():
    pvc = er.resolve_source(restore(source={"location": "pvc://etcd-backups/karmada/dc1/x.db"}), None)
    assert pvc["storage"] == {"pvc": {"claimName": "etcd-backups", "subPath": "karmada/dc1"}}
    assert pvc["snapshot"] == "x.db"
    conn = {"endpoint": "https://s3.example", "credentialsSecretRef": {"name": "creds"}}
    s3 = er.resolve_source(restore(source={"location": "s3://bucket/dc1/x.db", "s3": conn}), None)
    assert s3["storage"]["s3"] == {**conn, "bucket": "bucket", "prefix": "dc1"}
    with pytest.raises(er.RestoreError):
        er.resolve_source(restore(source={"location": "s3://bucket/x.db"}), None)


def test_the_plan_restores_each_member_as_the_statefulset_runs_it():
    kd = karmada(etcd={"local": {"replicas": 3, "storage": {"type": "PersistentVolumeClaim", "size": "2Gi",
                                                             "storageClassName": "fast"}}})
    plan = er.restore_plan(restore(), kd, er.resolve_source(restore(), backup(SNAPS)))
    assert [m["name"] for m in plan["members"]] == ["dc2-etcd-0", "dc2-etcd-1", "dc2-etcd-2"]
    assert [m["pvc"] for m in plan["members"]] == ["data-dc2-etcd-0", "data-dc2-etcd-1", "data-dc2-etcd-2"]
    assert plan["clusterToken"] == "dc2-kd-uid"  # --initial-cluster-token of the StatefulSet
    argv = plan["members"][1]["argv"]
    assert argv[argv.index("--name") + 1] == "dc2-etcd-1"
    assert argv[argv.index("--initial-advertise-peer-urls") + 1] == \
        "https://dc2-etcd-1.dc2-etcd.site-b.svc.cluster.local:2380"
    assert argv[argv.index("--bump-revision") + 1] == "1000000000" and "--mark-compacted" in argv
    assert argv[argv.index("--data-dir") + 1] == "/var/lib/etcd-restore/dc2-etcd-1/data"
    initial = argv[argv.index("--initial-cluster") + 1]
    assert initial.count("=https://") == 3
    pvc = er.pvc_manifest(plan, plan["members"][0])
    assert pvc["spec"] == {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "2Gi"}},
                           "storageClassName": "fast"}
    assert pvc["metadata"]["labels"]["app.kubernetes.io/name"] == "etcd"
    assert pvc["metadata"]["labels"][er.LABEL_RESTORE] == "move"


def test_the_job_mounts_its_member_volume_and_the_store_read_only():
    kd = karmada(etcd={"local": {"replicas": 1}})
    plan = er.restore_plan(restore(), kd, er.resolve_source(restore(), backup(SNAPS)))
    job = er.job_manifest(plan, plan["members"][0], "example/op:1")
    pod = job["spec"]["template"]["spec"]
    vols = {v["name"]: v for v in pod["volumes"]}
    assert vols["member"]["persistentVolumeClaim"] == {"claimName": "data-dc2-etcd-0"}
    assert vols["store"]["persistentVolumeClaim"]["readOnly"] is True
    assert pod["automountServiceAccountToken"] is False
    env = {e["name"]: e["value"] for e in pod["containers"][0]["env"]}
    member_plan = json.loads(env["ETCD_RESTORE_PLAN"])
    assert member_plan["snapshot"]["sha256"] == "b" * 64 and member_plan["member"]["name"] == "dc2-etcd-0"
    assert pod["containers"][0]["command"] == ["python3", "/opt/ansible/plugins/module_utils/etcd_restore_job.py"]


@pytest.mark.parametrize(("etcd", "reason"), [
    ({"local": {"replicas": 1, "storage": {"type": "EmptyDir"}}}, "UnsupportedTarget"),
    ({"external": {"endpoints": ["https://etcd.example:2379"], "tlsSecretRef": {"name": "x"}}}, "UnsupportedTarget"),
])
def test_targets_that_cannot_be_seeded_are_refused_with_a_reason(etcd, reason):
    with pytest.raises(er.RestoreError) as err:
        er.restore_plan(restore(), karmada(etcd=etcd), er.resolve_source(restore(), backup(SNAPS)))
    assert err.value.reason == reason
    with pytest.raises(er.RestoreError) as err:
        er.restore_plan(restore(), None, er.resolve_source(restore(), backup(SNAPS)))
    assert err.value.reason == "TargetNotFound"


def test_the_gate_holds_the_karmada_back_until_seeded():
    pending = restore()
    assert er.restore_gate([pending], "dc2")["wait"] is True
    assert er.restore_gate([pending], "other")["wait"] is False
    failed = {**restore(), "status": {"phase": "Failed", "conditions": [
        {"type": "Seeded", "status": "False", "reason": "IntegrityCheckFailed", "message": "sha256 differs"}]}}
    gate = er.restore_gate([failed], "dc2")
    assert gate["wait"] and "IntegrityCheckFailed" in gate["message"]  # never start empty behind its back
    seeded = {**restore(), "status": {"conditions": [{"type": "Seeded", "status": "True"}]}}
    assert er.restore_gate([seeded], "dc2")["wait"] is False
    assert er.restore_gate([], "dc2")["wait"] is False
    # a Karmada that has had an etcd never waits (the restore refuses it instead)
    running = {"conditions": [{"type": "EtcdReady", "status": "True"}]}
    assert er.restore_gate([pending], "dc2", running)["wait"] is False


def test_verification_lists_every_difference():
    snap = {"revision": 900, "keys": 500, "counts": {"clusters": 2, "works": 10, "namespaces": 6}}
    # the revision bump adds one empty entry to the key bucket
    seeded = [{"snapshot": {"totalKey": 700}, "restored": {"revision": 1_000_000_900, "totalKey": 701}}] * 3
    ok = er.verification(snap, seeded, {"clusters": 2, "works": 10, "namespaces": 6}, 1_000_000_000)
    assert ok["differences"] == [] and ok["restoredRevision"] == 1_000_000_900
    bad = er.verification(snap, seeded, {"clusters": 1, "works": 10, "namespaces": 6}, 1_000_000_000)
    assert bad["differences"] == ["clusters: 2 in the snapshot, 1 served by the restored karmada-apiserver"]
    low = er.verification(snap, [{"snapshot": {"totalKey": 700}, "restored": {"revision": 950, "totalKey": 701}}],
                          {}, 1_000_000_000)
    assert "below the snapshot's 900 plus the bump" in low["differences"][0]
    lost = er.verification(snap, [{"snapshot": {"totalKey": 700}, "restored": {"revision": 1_000_000_900,
                                                                               "totalKey": 650}}], {}, 1_000_000_000)
    assert "keys in the snapshot [700]" in lost["differences"][0]
