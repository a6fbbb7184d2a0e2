"""The EtcdBackup controller's pure parts: the Job it creates, when it starts a run, what it reads back."""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime, timedelta
from pathlib import Path

import yaml

from karmada_operator import components as karmada_components
from karmada_operator.backup import controller as ctl
from karmada_operator.backup import plan as eb_plan
from karmada_operator.etcd import lease as eb_lease
from karmada_operator.kube import pod_security
from karmada_operator.runtime import status_writer

ROOT = Path(__file__).resolve().parents[2]
NOW = datetime(2026, 3, 10, 12, 0, 30, tzinfo=UTC)


def karmada(**spec):
    cr = yaml.safe_load((ROOT / "config/samples/operator_v1alpha1_karmadadeployment.yaml").read_text())
    cr["metadata"].update({"uid": "kd-uid", "generation": 4})
    cr["spec"].update(spec)
    cr["status"] = {"conditions": [{"type": "EtcdReady", "status": "True", "reason": "QuorumReached",
                                    "message": "3/3", "observedGeneration": 4}]}
    return cr


def backup(status=None, **spec):
    cr = yaml.safe_load((ROOT / "config/samples/operator_v1alpha1_etcdbackup.yaml").read_text())
    cr["metadata"].update({"uid": "bk-uid", "generation": 3, "creationTimestamp": "2026-03-10T11:00:00Z"})
    cr["spec"].update(spec)
    if status is not None:
        cr["status"] = status
    return cr


def s3_storage():
    return {"s3": {"endpoint": "https://s3.example:9000", "bucket": "snaps", "prefix": "dc1",
                   "credentialsSecretRef": {"name": "s3-creds"}, "caSecretRef": {"name": "s3-ca"}}}


def test_the_job_mounts_only_what_a_pvc_run_reads_and_no_token():
    plan = eb_plan.backup_plan(backup(), karmada(), now=NOW)
    job = ctl.job_manifest(plan, "example/op:1", backup())
    pod = job["spec"]["template"]["spec"]
    assert pod["automountServiceAccountToken"] is False and pod["restartPolicy"] == "Never"
    assert job["spec"]["backoffLimit"] == 0
    assert job["spec"]["activeDeadlineSeconds"] < eb_lease.LEASE_DURATION_SECONDS  # ends before its lock expires
    vols = {v["name"]: v for v in pod["volumes"]}
    assert set(vols) == {"etcd-tls", "staging", "store"}
    assert vols["store"]["persistentVolumeClaim"] == {"claimName": "etcd-backups"}
    assert vols["etcd-tls"]["secret"]["secretName"] == "karmada-etcd-pki"
    assert {i["key"] for i in vols["etcd-tls"]["secret"]["items"]} == {
        "ca.crt", "healthcheck-client.crt", "healthcheck-client.key"}  # not the server or peer keys
    (container,) = pod["containers"]
    assert container["image"] == "example/op:1"
    assert container["command"] == ["python3", "-m", "karmada_operator.backup.job"]
    env = {e["name"]: e["value"] for e in container["env"]}
    assert env["PYTHONPATH"] == "/opt/ansible/plugins/module_utils"
    assert json.loads(env["ETCD_BACKUP_PLAN"]) == json.loads(json.dumps(plan))
    assert container["securityContext"]["capabilities"] == {"drop": ["ALL"]}
    assert job["metadata"]["ownerReferences"][0]["uid"] == "bk-uid"
    assert job["metadata"]["labels"][ctl.LABEL_BACKUP] == "nightly"


def test_the_job_for_s3_mounts_the_credentials_and_ca_and_no_volume():
    plan = eb_plan.backup_plan(backup(storage=s3_storage()), karmada(), now=NOW)
    job = ctl.job_manifest(plan, "example/op:1")
    pod = job["spec"]["template"]["spec"]
    vols = {v["name"]: v for v in pod["volumes"]}
    assert set(vols) == {"etcd-tls", "staging", "s3-credentials", "s3-ca"}
    assert vols["s3-credentials"]["secret"]["secretName"] == "s3-creds"
    assert "ownerReferences" not in job["metadata"]  # the runtime's proxy adds it
    # the plan in the environment carries no secret values, only where they are mounted
    env = pod["containers"][0]["env"][0]["value"]
    assert "s3-creds" not in env or "secretAccessKey" in env
    assert "BEGIN" not in env
    # to S3 it writes only its staging emptyDir: Pod Security "restricted", the user included
    assert pod["securityContext"] == pod_security.pod() and pod["securityContext"]["runAsUser"] == 65532
    assert pod["containers"][0]["securityContext"] == pod_security.container()


def test_a_job_to_a_volume_runs_as_root_with_every_capability_dropped():
    """The store may be a host directory only root can write (docs/security.md); the rest of
    "restricted" holds."""
    job = ctl.job_manifest(eb_plan.backup_plan(backup(), karmada(), now=NOW), "example/op:1")
    pod = job["spec"]["template"]["spec"]
    assert pod["securityContext"] == {"seccompProfile": {"type": "RuntimeDefault"}}
    assert pod["containers"][0]["securityContext"] == {
        "runAsUser": 0, "runAsNonRoot": False, "allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]},
        "readOnlyRootFilesystem": True}


def test_the_job_program_is_where_the_image_keeps_our_plugins():
    dockerfile = (ROOT / "Dockerfile").read_text()
    assert "COPY plugins/ ${HOME}/plugins/" in dockerfile
    assert "ENV PYTHONPATH=${HOME}/plugins/module_utils" in dockerfile
    assert ctl.JOB_PROGRAM["env"] == [{"name": "PYTHONPATH", "value": "/opt/ansible/plugins/module_utils"}]  # HOME
    assert ctl.JOB_PROGRAM["command"] == ["python3", "-m", "karmada_operator.backup.job"]
    assert (ROOT / "plugins/module_utils/karmada_operator/backup/job.py").exists()
    # the image carries etcdctl/etcdutl from etcd's image at the tag the operator deploys
    tag = re.search(r"ARG ETCD_IMAGE=registry\.k8s\.io/etcd:(\S+)", dockerfile).group(1)
    assert tag == karmada_components.DEFAULT_ETCD_TAG


def test_backoff_doubles_from_30_seconds_to_10_minutes():
    assert [ctl.backoff(n).total_seconds() for n in range(7)] == [0, 30, 60, 120, 240, 480, 600]


def test_on_demand_runs_once():
    assert ctl.decide(backup(schedule=None), NOW).run
    done = backup({"phase": "Succeeded", "observedGeneration": 3}, schedule=None)
    assert not ctl.decide(done, NOW).run
    # a spec change after success does not take a second backup of an on-demand object? It does:
    # the object asks for a backup of its (new) spec.
    edited = backup({"phase": "Succeeded", "observedGeneration": 2}, schedule=None)
    assert ctl.decide(edited, NOW).run


def test_a_failed_on_demand_backup_retries_after_its_backoff_or_at_once_after_a_spec_change():
    failed = {"phase": "Failed", "observedGeneration": 3, "failedAttempts": 2,
              "lastAttemptTime": "2026-03-10T12:00:00Z"}
    bk = backup(failed, schedule=None)
    early = ctl.decide(bk, NOW)
    assert not early.run and early.extra["retryAt"] == datetime(2026, 3, 10, 12, 1, tzinfo=UTC)
    assert ctl.decide(bk, NOW + timedelta(seconds=31)).run
    fixed = backup({**failed, "observedGeneration": 2}, schedule=None)
    assert ctl.decide(fixed, NOW).run


def test_a_schedule_runs_its_most_recent_tick_once():
    bk = backup({"lastScheduleTime": "2026-03-10T11:59:00Z"}, schedule="* * * * *")
    d = ctl.decide(bk, NOW)
    assert d.run and d.scheduled_time == datetime(2026, 3, 10, 12, 0, tzinfo=UTC)
    ran = backup({"lastScheduleTime": "2026-03-10T12:00:00Z"}, schedule="* * * * *")
    assert not ctl.decide(ran, NOW).run
    suspended = backup({"lastScheduleTime": "2026-03-10T11:59:00Z"}, schedule="* * * * *", suspend=True)
    d = ctl.decide(suspended, NOW)
    assert not d.run and d.reason == "Suspended"


def test_etcd_must_be_ready_for_the_current_spec():
    assert ctl.etcd_ready(karmada()) == (True, "")
    kd = karmada()
    kd["metadata"]["generation"] = 5  # a spec change (e.g. scaling) not applied yet
    ok, why = ctl.etcd_ready(kd)
    assert not ok and "being changed" in why
    # the backup an upgrade takes before it changes anything: the old spec's Ready is enough
    assert ctl.etcd_ready(kd, any_generation=True) == (True, "")
    kd = karmada()
    kd["status"]["conditions"][0].update(status="False", reason="EtcdNotReady", message="1/3 members healthy")
    ok, why = ctl.etcd_ready(kd)
    assert not ok and "1/3 members healthy" in why
    ok, why = ctl.etcd_ready({"metadata": {}})
    assert not ok


def test_result_line_is_the_last_json_object_of_the_log():
    log = "some warning\n{\"ok\": false, \"reason\": \"X\"}\nnoise\n{\"ok\": true, \"snapshot\": {}}\n"
    assert ctl.result_line(log) == {"ok": True, "snapshot": {}}
    assert ctl.result_line("Traceback...\n") is None
    assert ctl.result_line("") is None


def test_job_finished_reads_the_job_conditions():
    assert ctl.job_finished({"status": {"active": 1}}) == ""
    assert ctl.job_finished({"status": {"conditions": [{"type": "Complete", "status": "True"}]}}) == "Complete"
    assert ctl.job_finished({"status": {"conditions": [{"type": "Failed", "status": "True"}]}}) == "Failed"
    assert ctl.job_finished({"status": {"conditions": [{"type": "Failed", "status": "False"}]}}) == ""


def test_event_object_names_the_backup():
    ev = status_writer.event_object(backup(), {"type": "Normal", "reason": "BackupSucceeded", "message": "x" * 2000},
                                    NOW)
    assert ev["involvedObject"] == {"apiVersion": status_writer.API_VERSION, "kind": "EtcdBackup", "name": "nightly",
                                    "namespace": "karmada-system", "uid": "bk-uid"}
    assert len(ev["message"]) == 1000 and ev["metadata"]["generateName"] == "nightly."


def test_the_job_requests_what_spec_job_resources_says_else_the_default():
    kd = karmada()
    plan = eb_plan.backup_plan(backup(), kd, now=NOW)
    assert ctl.job_manifest(plan, "example/op:1")["spec"]["template"]["spec"]["containers"][0]["resources"] == \
        {"requests": {"cpu": "100m", "memory": "128Mi"}}
    asked = {"requests": {"cpu": "1", "memory": "256Mi"}, "limits": {"memory": "1Gi"}}
    bk = backup()
    bk["spec"]["jobResources"] = asked
    plan = eb_plan.backup_plan(bk, kd, now=NOW)
    assert ctl.job_manifest(plan, "example/op:1")["spec"]["template"]["spec"]["containers"][0]["resources"] == asked
