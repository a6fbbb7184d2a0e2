"""The continuous backup's controller side: the follower's Deployment, the settings it gets,
and what status says from the follower's report (backup/continuous_controller.py)."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
import yaml
from test_etcd_backup_controller import backup, karmada, s3_storage

from karmada_operator.backup import continuous_controller as cc
from karmada_operator.backup import plan as eb_plan

ROOT = Path(__file__).resolve().parents[2]
NOW = datetime(2026, 3, 10, 12, 0, 30, tzinfo=UTC)


def continuous_backup(**continuous):
    cr = backup(storage=s3_storage(), continuous=continuous)
    del cr["spec"]["schedule"]
    return cr


def manifest(cr, now=NOW, suspend=False):
    plan = eb_plan.backup_plan(cr, karmada(), now=now)
    return cc.deployment_manifest(cc.follower_plan(plan), "op:1", cr, "IfNotPresent", suspend)


def test_one_follower_never_two_writers_no_token_and_the_backup_pod():
    dep = manifest(continuous_backup())
    assert dep["metadata"]["name"] == "nightly-continuous"
    assert dep["spec"]["replicas"] == 1 and dep["spec"]["strategy"] == {"type": "Recreate"}
    pod = dep["spec"]["template"]["spec"]
    assert pod["automountServiceAccountToken"] is False
    (container,) = pod["containers"]
    assert container["command"] == ["python3", "-m", "karmada_operator.backup.continuous"]
    assert container["securityContext"]["capabilities"] == {"drop": ["ALL"]}
    assert container["securityContext"]["readOnlyRootFilesystem"] is True
    env = {e["name"]: e.get("value") for e in container["env"]}
    plan = json.loads(env["ETCD_BACKUP_PLAN"])
    assert plan["continuous"] == {"deltaIntervalSeconds": 20.0, "deltaMaxBytes": 10485760,
                                  "fullAfterDeltas": 1000, "fullAfterBytes": 1073741824}
    assert "jobName" not in plan and plan["snapshot"] == {"prefix": "nightly"}
    assert {v["name"] for v in pod["volumes"]} == {"etcd-tls", "staging", "s3-credentials", "s3-ca"}
    assert dep["metadata"]["ownerReferences"][0]["kind"] == "EtcdBackup"


def test_the_plan_hash_moves_with_the_spec_not_with_time():
    a = manifest(continuous_backup(), now=NOW)
    b = manifest(continuous_backup(), now=NOW + timedelta(hours=3))
    c = manifest(continuous_backup(deltaInterval="5s"), now=NOW)
    ann = cc.ANN_PLAN_HASH
    assert a["metadata"]["annotations"][ann] == b["metadata"]["annotations"][ann] != c["metadata"]["annotations"][ann]
    assert manifest(continuous_backup(), suspend=True)["spec"]["replicas"] == 0


@pytest.mark.parametrize("text,seconds", [("20s", 20), ("1m", 60), ("1m30s", 90), ("1500ms", 1.5)])
def test_durations(text, seconds):
    assert eb_plan.parse_duration(text) == seconds


def test_bad_settings_are_refused_naming_the_field():
    with pytest.raises(eb_plan.BackupPlanError, match="spec.continuous.deltaInterval"):
        eb_plan.backup_plan(continuous_backup(deltaInterval="20 s"), karmada(), now=NOW)
    with pytest.raises(eb_plan.BackupPlanError, match="between 1s and 10m"):
        eb_plan.backup_plan(continuous_backup(deltaInterval="11m"), karmada(), now=NOW)
    both = backup(storage=s3_storage(), continuous={})
    with pytest.raises(eb_plan.BackupPlanError, match="leave spec.schedule empty"):
        eb_plan.backup_plan(both, karmada(), now=NOW)


def test_the_crd_states_the_defaults_the_follower_uses():
    crd = yaml.safe_load((ROOT / "config/crd/bases/operator.karmada.io_etcdbackups.yaml").read_text())
    props = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]
    fields = props["continuous"]["properties"]
    assert {k: fields[k]["default"] for k in eb_plan.CONTINUOUS_DEFAULTS} == eb_plan.CONTINUOUS_DEFAULTS


def test_status_from_the_followers_report():
    state, ready = cc.status_fields(None, "Pending", NOW)
    assert state == {"phase": "Starting"} and ready["reason"] == "FollowerStarting"
    report = {"event": "delta", "full": "nightly-20260310T120000Z.db", "fullRevision": 100, "deltaRevision": 180,
              "deltaTime": int(NOW.timestamp() * 1000), "deltas": 4, "bytes": 9000, "gaps": 0, "fulls": 1}
    state, ready = cc.status_fields(report, "Running", NOW)
    assert state["phase"] == "Following" and state["deltaRevision"] == 180
    assert state["deltaTime"] == "2026-03-10T12:00:30Z"
    assert ready["status"] == "True" and "revision 180" in ready["message"]
    state, ready = cc.status_fields({**report, "event": "storeError", "reason": "StoreUnreachable",
                                     "message": "s3://b at https://x: timed out"}, "Running", NOW)
    assert state["phase"] == "Failing" and ready == {
        "type": "Ready", "status": "False", "reason": "StoreUnreachable",
        "message": "StoreWriteFailing: s3://b at https://x: timed out"}
    out = cc.merge_status({"phase": "Succeeded", "activeJob": "x"}, state, ready, 3, NOW)
    assert out["phase"] == "Failed" and "activeJob" not in out and out["observedGeneration"] == 3


def test_the_last_report_is_the_last_json_line_with_an_event():
    log = 'noise\n{"event": "full", "full": "a"}\n{"ok": true}\n{"event": "progress", "full": "a", "deltas": 2}\n'
    assert cc.last_report(log) == {"event": "progress", "full": "a", "deltas": 2}
    assert cc.last_report("nothing") is None
