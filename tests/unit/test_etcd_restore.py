"""EtcdRestore's pure parts: the snapshot chosen, the members planned, the Jobs, the gate, the check."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from karmada_operator.backup import restore as er

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
    assert pod["containers"][0]["command"] == ["python3", "-m", "karmada_operator.backup.restore_job"]
    assert env["PYTHONPATH"] == "/opt/ansible/plugins/module_utils"
    # no decision in the plan: root (it can write whatever volume), every capability dropped
    assert pod["securityContext"] == {"seccompProfile": {"type": "RuntimeDefault"}}
    assert pod["containers"][0]["securityContext"]["runAsUser"] == 0
    # decided: 65532 with the volumes' group, and the reason on the pod
    decided = {**plan, "runAs": {"members": {"user": "NonRoot", "reason": "etcd's volumes: why"}}}
    pod = er.job_manifest(decided, plan["members"][0], "example/op:1")["spec"]["template"]
    assert pod["spec"]["securityContext"]["runAsUser"] == 65532
    assert pod["spec"]["securityContext"]["fsGroupChangePolicy"] == "Always"
    assert pod["spec"]["containers"][0]["securityContext"]["allowPrivilegeEscalation"] is False
    assert pod["metadata"]["annotations"]["operator.karmada.io/run-as"] == "NonRoot: etcd's volumes: why"


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


COUNTS = {"clusters": 2, "propagationpolicies": 3, "clusterpropagationpolicies": 1, "overridepolicies": 0,
          "resourcebindings": 8, "works": 10, "namespaces": 6}
SNAP = {"revision": 900, "keys": 500, "counts": COUNTS}
# each member: the revision its Job read from the restored database, the live keys its etcd holds there
SEEDED = [{"member": f"dc2-etcd-{i}", "restored": {"revision": 1_000_000_900, "liveKeys": 500}} for i in range(3)]
BUMP = 1_000_000_000


def test_verification_lists_every_difference():
    ok = er.verification(SNAP, SEEDED, COUNTS, BUMP)
    assert ok["differences"] == [] and ok["unreadable"] == [] and ok["restoredRevision"] == 1_000_000_900
    bad = er.verification(SNAP, SEEDED, {**COUNTS, "clusters": 1}, BUMP)
    assert bad["differences"] == ["clusters: 2 in the snapshot, 1 served by the restored karmada-apiserver"]
    assert (ok["restoredKeys"], ok["liveKeysAtSnapshot"]) == (500, 500)
    low = er.verification(SNAP, [{"member": "m", "restored": {"revision": 950, "liveKeys": 500}}], COUNTS, BUMP)
    assert low["differences"] == ["restored revision 950 is below the snapshot's 900 plus the bump 1000000000"]
    lost = er.verification(SNAP, [*SEEDED[:2], {"member": "dc2-etcd-2", "restored": {"revision": 1_000_000_900,
                                                                                     "liveKeys": 450}}], COUNTS, BUMP)
    assert lost["differences"] == ["dc2-etcd-2 holds 450 live keys at the restored revision, the snapshot 500 at "
                                   "its revision"]
    assert lost["restoredKeys"] is None  # the members differ: no one figure


def test_a_list_that_failed_fails_the_verification_and_is_named():
    """A count the restored karmada-apiserver did not give (an API error, a kind it does not
    serve) is a failure naming the resource and the error, never a match by omission."""
    counts = {k: v for k, v in COUNTS.items() if k not in ("clusters", "works")}
    unread = {"clusters": "listing Cluster (cluster.karmada.io/v1alpha1) failed: 503 ServiceUnavailable: the "
                          "aggregated API is down",
              "works": "listing Work (work.karmada.io/v1alpha1) failed: 404 NotFound: not served"}
    report = er.verification(SNAP, SEEDED, counts, BUMP, unread)
    assert report["unreadable"] == [f"clusters through the restored karmada-apiserver: {unread['clusters']}",
                                    f"works through the restored karmada-apiserver: {unread['works']}"]
    assert report["differences"] == [f"could not read {u}" for u in report["unreadable"]]
    objects = {o["resource"]: o for o in report["objects"]}
    assert objects["clusters"] == {"resource": "clusters", "snapshot": 2}  # no "restored": nothing was read
    # a resource missing without a reason is still a failure
    silent = er.verification(SNAP, SEEDED, counts, BUMP)
    assert silent["unreadable"] == ["clusters, works through the restored karmada-apiserver: no count was returned"]
    # nothing counted at all (no credentials): one line, every resource named
    none = er.verification(SNAP, SEEDED, {}, BUMP, dict.fromkeys(COUNTS, "Secret x/dc2-admin-kubeconfig not found"))
    assert none["unreadable"] == [f"{', '.join(COUNTS)} through the restored karmada-apiserver: Secret "
                                  "x/dc2-admin-kubeconfig not found"]


def test_values_missing_from_the_snapshot_or_the_members_fail_the_verification():
    """What the snapshot's metadata or a member's result does not hold cannot be compared: it
    fails, naming it (a missing revision used to read as 0, below any restored revision)."""
    no_counts = er.verification({"revision": 900, "keys": 500}, SEEDED, COUNTS, BUMP)
    assert no_counts["differences"] == [f"could not read the snapshot's count of {', '.join(COUNTS)} (its metadata "
                                        "records none: the backup could not count at its revision)"]
    one_count = er.verification({**SNAP, "counts": {k: v for k, v in COUNTS.items() if k != "works"}}, SEEDED,
                                COUNTS, BUMP)
    assert one_count["unreadable"] == ["the snapshot's count of works (its metadata records none: the backup could "
                                       "not count at its revision)"]
    no_rev = er.verification({**SNAP, "revision": None}, SEEDED, COUNTS, BUMP)
    assert no_rev["unreadable"] == ["the snapshot's revision (not in its metadata)"]
    assert "snapshotRevision" not in no_rev  # not nullable in the CRD: left out, the difference says why
    member = [{"member": "dc2-etcd-0", "restored": {"revision": None, "liveKeys": None}}]
    unknown = er.verification(SNAP, member, COUNTS, BUMP, keys_unread="etcd refused the request: mvcc: required "
                                                                       "revision has been compacted")
    assert unknown["unreadable"] == ["dc2-etcd-0's restored revision",
                                     "dc2-etcd-0's live keys at the restored revision (from its etcd: etcd refused "
                                     "the request: mvcc: required revision has been compacted)"]
    assert "restoredRevision" not in unknown
    no_keys = er.verification({**SNAP, "keys": None}, SEEDED, COUNTS, BUMP)
    assert no_keys["unreadable"] == ["the snapshot's live key count (its metadata records none: the backup could "
                                     "not count at its revision)"]
    nobody = er.verification(SNAP, [], COUNTS, BUMP)
    assert nobody["unreadable"] == ["the members' restore results (none recorded)"]


def continuous_backup():
    cr = backup()
    cr["spec"]["continuous"] = {"deltaInterval": "20s"}
    return cr


def test_latest_of_a_continuous_backup_is_a_point_prepared_first():
    src = er.resolve_source(restore(), continuous_backup())
    assert src["snapshot"] == "move-point.db" and src["sha256"] == ""
    assert src["point"] == {"prefix": "nightly", "revision": 0, "timeMs": 0, "asked": "latest"}
    at = er.resolve_source(restore(source={"backupRef": {"name": "nightly"}, "snapshot": "latest",
                                           "time": "2026-03-01T02:00:00Z"}), continuous_backup())
    assert at["point"]["timeMs"] == 1772330400000 and at["point"]["asked"] == "time 2026-03-01T02:00:00Z"
    rev = er.resolve_source(restore(source={"backupRef": {"name": "nightly"}, "snapshot": "latest",
                                            "revision": 4711}), continuous_backup())
    assert rev["point"]["revision"] == 4711 and rev["point"]["asked"] == "revision 4711"


def test_a_point_needs_a_continuous_backup():
    with pytest.raises(er.RestoreError, match="is not continuous"):
        er.resolve_source(restore(source={"backupRef": {"name": "nightly"}, "snapshot": "latest",
                                          "revision": 5}), backup(SNAPS))
    with pytest.raises(er.RestoreError, match="set backupRef"):
        er.resolve_source(restore(source={"location": "pvc://c/x.db", "revision": 5}), None)


def test_the_points_job_writes_to_the_store_and_has_no_member_volume():
    kd = karmada(etcd={"local": {"replicas": 3}})
    plan = er.restore_plan(restore(), kd, er.resolve_source(restore(), continuous_backup()))
    assert plan["pointJob"] == "move-point" and plan["point"]["prefix"] == "nightly"
    job = er.point_job_manifest(plan, "example/op:1")
    pod = job["spec"]["template"]["spec"]
    vols = {v["name"]: v for v in pod["volumes"]}
    assert set(vols) == {"staging", "store"}
    assert vols["store"]["persistentVolumeClaim"] == {"claimName": "etcd-backups"}  # written: not read-only
    env = {e["name"]: e["value"] for e in pod["containers"][0]["env"]}
    assert pod["containers"][0]["command"] == ["python3", "-m", "karmada_operator.backup.point_restore"]
    assert json.loads(env["ETCD_RESTORE_PLAN"]) == {
        "format": er.PLAN_FORMAT, "storage": plan["storage"], "point": plan["point"],
        "snapshot": {"name": "move-point.db"}, "workDir": f"{er.STAGING_DIR}/point"}
    prepared = er.with_prepared(plan, {"snapshot": {"name": "move-point.db", "sha256": "c" * 64,
                                                    "location": "pvc://etcd-backups/karmada/move-point.db"}})
    member = json.loads({e["name"]: e["value"] for e in er.job_manifest(prepared, prepared["members"][0], "op:1")[
        "spec"]["template"]["spec"]["containers"][0]["env"]}["ETCD_RESTORE_PLAN"])
    assert member["snapshot"]["sha256"] == "c" * 64  # the members check the prepared snapshot


def test_a_point_from_a_location_names_the_backup_whose_chains_are_there():
    conn = {"endpoint": "https://s3.example", "credentialsSecretRef": {"name": "creds"}}
    src = er.resolve_source(restore(source={"location": "s3://bucket/dc1/move", "s3": conn,
                                            "backupName": "nightly", "revision": 99}), None)
    assert src["storage"]["s3"] == {**conn, "bucket": "bucket", "prefix": "dc1/move"}
    assert src["point"] == {"prefix": "nightly", "revision": 99, "timeMs": 0, "asked": "revision 99"}
    latest = er.resolve_source(restore(source={"location": "pvc://etcd-backups/karmada/", "backupName": "nightly"}),
                               None)
    assert latest["storage"] == {"pvc": {"claimName": "etcd-backups", "subPath": "karmada"}}
    assert latest["point"]["asked"] == "latest" and latest["snapshot"] == "move-point.db"
