"""The etcd_backup module waits in its pass for a running backup Job and records it from the
pod as soon as the kubelet reports the container's end, on a real kube-apiserver through real
Ansible (ad hoc, as the operator's playbook calls it).

No kubelet or Job controller runs here: this test plays them, as the API sees them. The Job
exists and runs (no condition); its pod's container is marked terminated with the backup's
result a few seconds into the module's pass. The pass must record the backup (status
Succeeded with the snapshot, an Event, the Job labelled recorded) while the Job still has no
Complete condition, and must return once the time it may wait is up when nothing ends.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
import yaml

from karmada_operator.backup.controller import ANN_HOLDER, ANN_SCHEDULED, LABEL_RECORDED
from karmada_operator.backup.pod import CONTAINER, LABEL_BACKUP
from support import kube_apiserver
from support.waiting import condition, crds_established

ROOT = Path(__file__).resolve().parents[2]
NS = "backup-follow"
API = "operator.karmada.io/v1alpha1"
SHA = "c05c7d0ef5c5de8a93fdcb0882a70334859401e7dc9d30f899ea0fffcf4b838b"


@pytest.fixture(scope="module")
def server(bin_path, tmp_path_factory):
    srv = kube_apiserver.start(bin_path("etcd"), bin_path("kube-apiserver"), bin_path("kubectl"),
                               tmp_path_factory.mktemp("follow-apiserver"))
    try:
        srv.kubectl("apply", "-k", str(ROOT / "config/crd"))
        crds_established(srv.kubectl)
        srv.kubectl("create", "namespace", NS)
        srv.kubectl("create", "serviceaccount", "default", "-n", NS)  # no controller-manager makes it here
        yield srv
    finally:
        srv.stop()


def etcd_backup_module(server, tmp_path, **args) -> dict:
    venv_bin = str(Path(sys.executable).parent)
    env = {**os.environ, "ANSIBLE_CONFIG": str(ROOT / "ansible.cfg"), "ANSIBLE_LOCAL_TEMP": str(tmp_path / "tmp"),
           "PATH": f"{venv_bin}:{os.environ.get('PATH', '')}", "ANSIBLE_NOCOLOR": "1",
           "ANSIBLE_LOAD_CALLBACK_PLUGINS": "1", "ANSIBLE_STDOUT_CALLBACK": "json"}
    env.pop("K8S_AUTH_KUBECONFIG", None)
    params = {"namespace": NS, "kubeconfig": str(server.kubeconfig), "image": "example/operator:1", **args}
    cmd = [str(Path(venv_bin) / "ansible"), "localhost", "-m", "etcd_backup", "-a", json.dumps(params)]
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=ROOT, timeout=180)
    return json.loads(proc.stdout)["plays"][0]["tasks"][0]["hosts"]["localhost"]


def running_backup(server, name: str) -> str:
    """An EtcdBackup whose Job runs (as a pass that started it left it) and the Job's pod."""
    backup = {"apiVersion": API, "kind": "EtcdBackup", "metadata": {"name": name, "namespace": NS},
              "spec": {"karmadaDeploymentRef": {"name": "karmada"},
                       "storage": {"s3": {"endpoint": "http://s3.example:9000", "bucket": "snaps",
                                          "credentialsSecretRef": {"name": "s3-creds"}}}}}
    job = f"{name}-20261202033233"
    spec = {"restartPolicy": "Never", "automountServiceAccountToken": False,
            "containers": [{"name": CONTAINER, "image": "example/operator:1"}]}
    docs = [backup,
            {"apiVersion": "batch/v1", "kind": "Job",
             "metadata": {"name": job, "namespace": NS, "labels": {LABEL_BACKUP: name},
                          "annotations": {ANN_SCHEDULED: "2026-12-02T03:32:33Z", ANN_HOLDER: f"{NS}/{name}/x"}},
             "spec": {"backoffLimit": 0, "template": {"spec": spec}}},
            {"apiVersion": "v1", "kind": "Pod",
             "metadata": {"name": f"{job}-x9ggb", "namespace": NS, "labels": {"job-name": job}}, "spec": spec}]
    server.kubectl("apply", "-f", "-", input_text=yaml.safe_dump_all(docs))
    return job


def result(name: str) -> str:
    snap = {"name": f"{name}-20261202T033233Z.db", "location": f"s3://snaps/{name}-20261202T033233Z.db",
            "sizeBytes": 1170272288, "sha256": SHA, "revision": 1522, "etcdVersion": "3.6.6",
            "karmadaVersion": "v1.18.2", "takenAt": "2026-12-02T03:32:35Z"}
    return json.dumps({"ok": True, "snapshot": {**snap, "durationSeconds": 32.3,
                                                "endpoint": "https://karmada-etcd-0:2379"},
                       "kept": [snap], "deleted": [], "retentionError": "", "retentionReason": "",
                       "phases": {"retention": 0.05, "snapshot": 27.0, "store": 32.2}})


def kubelet_reports_the_end(server, pod: str, message: str, after: float) -> threading.Thread:
    def report() -> None:
        time.sleep(after)
        status = {"phase": "Succeeded", "containerStatuses": [{
            "name": CONTAINER, "image": "example/operator:1", "imageID": "", "ready": False, "restartCount": 0,
            "state": {"terminated": {"exitCode": 0, "reason": "Completed", "message": message,
                                     "startedAt": "2026-12-02T03:32:34Z", "finishedAt": "2026-12-02T03:33:08Z"}}}]}
        server.kubectl("patch", "pod", pod, "-n", NS, "--subresource=status", "--type=merge",
                       "-p", json.dumps({"status": status}))
    thread = threading.Thread(target=report)
    thread.start()
    return thread


def test_a_backup_is_recorded_in_the_pass_as_soon_as_its_pod_ends(server, tmp_path):
    job = running_backup(server, "quick")
    thread = kubelet_reports_the_end(server, f"{job}-x9ggb", result("quick"), after=4)
    started = time.monotonic()
    out = etcd_backup_module(server, tmp_path, name="quick", follow_seconds=120)
    took = time.monotonic() - started
    thread.join()
    assert out.get("failed") is not True, out
    assert out["phase"] == "Succeeded", out  # (the callback's "action" is the module's name)
    assert took < 120, f"the pass waited out its whole follow time ({took:.0f} s) although the pod had ended"
    backup = json.loads(server.kubectl("get", "etcdbackup", "quick", "-n", NS, "-o", "json").stdout)
    last = backup["status"]["lastSuccessfulBackup"]
    assert (last["name"], last["sha256"], last["sizeBytes"]) == ("quick-20261202T033233Z.db", SHA, 1170272288)
    ready = condition(backup, "Ready")
    assert (ready["status"], ready["reason"]) == ("True", "BackupSucceeded"), ready
    recorded = json.loads(server.kubectl("get", "job", job, "-n", NS, "-o", "json").stdout)
    assert recorded["metadata"]["labels"][LABEL_RECORDED] == "true"
    assert not (recorded.get("status") or {}).get("conditions"), "the Job controller never ran here"
    events = json.loads(server.kubectl("get", "events", "-n", NS, "--field-selector",
                                       "involvedObject.name=quick,reason=BackupSucceeded", "-o", "json").stdout)
    assert len(events["items"]) == 1, events["items"]


def test_a_pass_gives_up_waiting_after_follow_seconds_and_reports_running(server, tmp_path):
    running_backup(server, "slow")
    started = time.monotonic()
    out = etcd_backup_module(server, tmp_path, name="slow", follow_seconds=3)
    took = time.monotonic() - started
    assert out["phase"] == "Running", out
    assert took >= 3, f"the pass returned after {took:.1f} s, before its 3 s of waiting"
    backup = json.loads(server.kubectl("get", "etcdbackup", "slow", "-n", NS, "-o", "json").stdout)
    assert backup["status"]["activeJob"] == "slow-20261202033233"
