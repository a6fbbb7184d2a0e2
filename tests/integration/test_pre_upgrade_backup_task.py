"""The pre-upgrade backup task (karmada_pre_upgrade_backup) against a real kube-apiserver.

No EtcdBackup controller runs here: the test plays it, writing the backup's status while the
task waits, so each outcome is the task's own reading of what the API server holds: nothing
to take without a store; a backup created, waited for and reported with its location; a failed
one stops the task with the backup's reason; a resumed upgrade reuses the backup it took.
"""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path

import pytest

from support import kube_apiserver
from support.ansible_adhoc import run_module
from support.waiting import crds_established

ROOT = Path(__file__).resolve().parents[2]
NS = "karmada-system"
RECORD = {"fromVersion": "v1.17.1", "toVersion": "v1.18.2", "phase": "InProgress",
          "startTime": "2026-12-02T07:30:05Z"}
NAME = "karmada-pre-upgrade-v1-18-2-20261202t0730"


@pytest.fixture(scope="module")
def server(bin_path, tmp_path_factory):
    srv = kube_apiserver.start(bin_path("etcd"), bin_path("kube-apiserver"), bin_path("kubectl"),
                               tmp_path_factory.mktemp("pre-upgrade-apiserver"))
    try:
        srv.kubectl("apply", "-k", str(ROOT / "config/crd"))
        crds_established(srv.kubectl)
        srv.kubectl("create", "namespace", NS)
        yield srv
    finally:
        srv.stop()


def karmada(upgrade: dict | None = None) -> dict:
    return {"apiVersion": "operator.karmada.io/v1alpha1", "kind": "KarmadaDeployment",
            "metadata": {"name": "karmada", "namespace": NS}, "spec": {"upgrade": upgrade or {}}, "status": {}}


def task(server, tmp_path, cr: dict) -> dict:
    return run_module("karmada_pre_upgrade_backup",
                      {"cr": cr, "upgrade": RECORD, "poll": 1, "timeout": 60, "kubeconfig": str(server.kubeconfig)},
                      tmp_path)


def play_the_controller(server, status: dict) -> threading.Thread:
    """Once the task has created the backup, write ``status`` on it, as the controller would."""
    def write() -> None:
        for _ in range(120):
            if server.kubectl("get", "etcdbackup", "-n", NS, NAME, check=False).returncode == 0:
                server.kubectl("patch", "etcdbackup", "-n", NS, NAME, "--subresource=status", "--type=merge",
                               "-p", json.dumps({"status": status}))
                return
            time.sleep(0.5)
    thread = threading.Thread(target=write, daemon=True)
    thread.start()
    return thread


def test_without_a_store_nothing_is_taken(server, tmp_path):
    out = task(server, tmp_path, karmada())
    assert out.get("failed") is not True, out
    assert out["backup"] == {} and out["changed"] is False
    assert "pre-upgrade" not in server.kubectl("get", "etcdbackup", "-n", NS, "-o", "name").stdout


def test_a_backup_to_the_store_is_taken_waited_for_and_reused(server, tmp_path):
    nightly = {"apiVersion": "operator.karmada.io/v1alpha1", "kind": "EtcdBackup",
               "metadata": {"name": "nightly", "namespace": NS},
               "spec": {"karmadaDeploymentRef": {"name": "karmada"}, "schedule": "0 2 * * *",
                        "storage": {"pvc": {"claimName": "backups"}}}}
    server.kubectl("apply", "-f", "-", input_text=json.dumps(nightly))
    location = f"pvc://backups/karmada/{NAME}.db"
    thread = play_the_controller(server, {"phase": "Succeeded", "lastSuccessfulBackup": {"location": location}})
    out = task(server, tmp_path, karmada())
    thread.join(timeout=5)
    assert out.get("failed") is not True, out
    assert out["changed"] is True and out["backup"] == {"name": NAME, "location": location}
    made = json.loads(server.kubectl("get", "etcdbackup", "-n", NS, NAME, "-o", "json").stdout)
    assert made["spec"]["storage"] == {"pvc": {"claimName": "backups"}}  # the scheduled backup's store
    assert "schedule" not in made["spec"]
    # a resumed upgrade finds it and waits for nothing more
    again = task(server, tmp_path, karmada())
    assert again["changed"] is False and again["backup"]["name"] == NAME


def test_a_failed_backup_stops_the_upgrade_with_its_reason(server, tmp_path):
    server.kubectl("delete", "etcdbackup", "-n", NS, NAME)
    thread = play_the_controller(server, {"phase": "Failed", "conditions": [
        {"type": "Ready", "status": "False", "reason": "StoreUnreachable", "message": "s3: connection refused",
         "lastTransitionTime": "2026-12-05T00:00:00Z"}]})
    out = task(server, tmp_path, karmada())
    thread.join(timeout=5)
    assert out["failed"] is True
    assert out["msg"] == f"the pre-upgrade backup {NAME} failed: StoreUnreachable: s3: connection refused"
    skip = task(server, tmp_path, karmada({"preUpgradeBackup": "Skip"}))
    assert skip.get("failed") is not True and skip["backup"] == {}
