"""Issue 13: EtcdBackup on the real host cluster, into a real PVC and a real S3 server.

The real ansible-operator (config/rbac's ServiceAccount) installs a small Karmada (``vault``,
one etcd member) in its own namespace; backup Jobs run the operator image built and imported
by the test bed; versitygw listens on the node's address so the Jobs' pods reach it. The
tests check what a user cares about: the snapshot in the store (read back with boto3 and from
the volume's directory on the node) has the sha256, size and revision the status reports, a
schedule keeps exactly maxBackups, and bad credentials fail with a reason and are retried.
"""

from __future__ import annotations

import hashlib
import time
from pathlib import Path

import pytest
import yaml

from support import karmada_e2e
from support.karmada_crds_server import serve
from support.karmada_e2e import Deployment, operator_kubeconfig
from support.operator_runtime import OperatorProcess
from support.s3_server import start_s3_server
from support.testenv import HostCluster, settings
from support.waiting import condition, crds_established, wait_for

pytestmark = pytest.mark.e2e

NS = "backup-e2e"
NAME = "vault"
API = "operator.karmada.io/v1alpha1"


class Env:
    def __init__(self, host: HostCluster, fleet: Deployment, s3, operator: OperatorProcess):
        self.host, self.fleet, self.s3, self.operator = host, fleet, s3, operator
        self.schedule_bucket = ""

    def apply(self, doc: dict) -> None:
        self.host.kubectl("apply", "-f", "-", input=yaml.safe_dump(doc))

    def backup(self, name: str) -> dict:
        return self.host.get("etcdbackup", name, "-n", NS)

    def wait_backup(self, name: str, predicate, timeout: float, what: str) -> dict:
        return wait_for(lambda: (lambda b: b if predicate(b) else None)(self.backup(name)), timeout,
                        f"EtcdBackup {name}: {what}", self.operator.log_tail, interval=3)

    def events(self, name: str) -> list[dict]:
        out = self.host.kubectl("get", "events", "-n", NS, "--field-selector",
                                f"involvedObject.kind=EtcdBackup,involvedObject.name={name}", "-o", "yaml").stdout
        return sorted(yaml.safe_load(out)["items"], key=lambda e: e.get("lastTimestamp") or "")

    def volume_dir(self, claim: str) -> Path:
        pvc = self.host.get("pvc", claim, "-n", NS)
        pv = self.host.get("pv", pvc["spec"]["volumeName"])
        return Path(pv["spec"]["hostPath"]["path"])


def etcd_backup(name: str, storage: dict, **spec) -> dict:
    return {"apiVersion": API, "kind": "EtcdBackup", "metadata": {"name": name, "namespace": NS},
            "spec": {"karmadaDeploymentRef": {"name": NAME}, "storage": storage, **spec}}


def s3_storage(env: Env, bucket: str, prefix: str, secret: str = "s3-credentials") -> dict:
    return {"s3": {"endpoint": env.s3.endpoint, "bucket": bucket, "prefix": prefix, "region": "us-east-1",
                   "forcePathStyle": True, "credentialsSecretRef": {"name": secret}}}


def succeeded(b: dict) -> bool:
    ready = condition(b, "Ready")
    return (b.get("status", {}).get("phase") == "Succeeded" and ready.get("status") == "True"
            and ready.get("observedGeneration") == b["metadata"]["generation"])


@pytest.fixture(scope="module")
def env(host_cluster: HostCluster, bin_path, tmp_path_factory):
    work = tmp_path_factory.mktemp("backup")
    print(f"\noperator image built and imported in {karmada_e2e.load_operator_image(host_cluster):.0f}s")
    s3 = start_s3_server(bin_path("versitygw"), work / "s3", host=settings()["KO_NODE_IP"])
    crds = serve()
    host_cluster.kubectl("apply", "-k", str(karmada_e2e.ROOT / "config/crd"))
    crds_established(host_cluster.kubectl, ["karmadadeployments.operator.karmada.io",
                                            "etcdbackups.operator.karmada.io"])
    host_cluster.kubectl("create", "namespace", NS, check=False)
    operator = OperatorProcess(bin_path("ansible-operator"), operator_kubeconfig(host_cluster, work), work,
                               extra_env={"KARMADA_OPERATOR_IMAGE": karmada_e2e.OPERATOR_IMAGE})
    operator.wait_healthy()
    cr = karmada_e2e.sample()
    cr["metadata"].update(name=NAME, namespace=NS)
    spec = cr["spec"]
    spec["crds"] = {"url": crds.url, "sha256": crds.sha256}
    spec["etcd"]["local"] = {"replicas": 1, "storage": {"type": "EmptyDir"}}
    spec["apiServer"] = {"replicas": 1, "serviceType": "ClusterIP"}
    spec["certificates"] = {"keyAlgorithm": "ECDSA"}
    spec["members"] = []
    fleet = Deployment(host_cluster, operator, work, NAME, NS)
    e = Env(host_cluster, fleet, s3, operator)
    e.apply(cr)
    e.apply({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s3-credentials", "namespace": NS},
             "stringData": {"accessKeyID": s3.access_key, "secretAccessKey": s3.secret_key}})
    e.apply({"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": "etcd-backups", "namespace": NS},
             "spec": {"accessModes": ["ReadWriteMany"], "storageClassName": "cephfs",
                      "resources": {"requests": {"storage": "1Gi"}}}})
    fleet.wait_for(lambda: condition(fleet.get(), "Ready").get("status") == "True", 1200, "Karmada Ready")
    # Something to back up besides Karmada's own objects.
    for i in range(20):
        fleet.karmadactl("create", "configmap", f"payload-{i}", "-n", "default", f"--from-literal=i={i}",
                         check=False)
    # The schedule ticks while the other tests run; its test comes last and checks the result.
    e.schedule_bucket = s3.create_bucket()
    e.apply(etcd_backup("every-minute", s3_storage(e, e.schedule_bucket, "sched"), schedule="* * * * *",
                        retention={"maxBackups": 2}))
    yield e
    host_cluster.kubectl("delete", "etcdbackups", "--all", "-n", NS, "--timeout=60s", check=False)
    host_cluster.kubectl("delete", "karmadadeployment", NAME, "-n", NS, "--timeout=300s", check=False)
    host_cluster.kubectl("delete", "namespace", NS, "--timeout=300s", check=False)
    operator.stop()
    crds.stop()
    s3.stop()


def test_on_demand_backups_to_a_volume_and_to_s3_hold_what_status_says(env: Env):
    bucket = env.s3.create_bucket()
    env.apply(etcd_backup("to-volume", {"pvc": {"claimName": "etcd-backups", "subPath": "karmada/dc1"}}))
    env.apply(etcd_backup("to-s3", s3_storage(env, bucket, "dc1")))
    started = time.monotonic()
    vol = env.wait_backup("to-volume", succeeded, 600, "Succeeded")
    s3b = env.wait_backup("to-s3", succeeded, 600, "Succeeded")
    print(f"\ntwo on-demand backups done in {time.monotonic() - started:.0f}s")

    for b in (vol, s3b):
        last = b["status"]["lastSuccessfulBackup"]
        assert len(last["sha256"]) == 64 and last["sizeBytes"] > 100_000 and last["revision"] > 1, last
        assert [s["name"] for s in b["status"]["snapshots"]] == [last["name"]]
        reasons = [e["reason"] for e in env.events(b["metadata"]["name"])]
        assert reasons[:1] == ["BackupStarted"] and "BackupSucceeded" in reasons, reasons

    # The S3 object, read through boto3, is the snapshot the status describes.
    last = s3b["status"]["lastSuccessfulBackup"]
    key = f"dc1/{last['name']}"
    assert last["location"] == f"s3://{bucket}/{key}"
    body = env.s3.client().get_object(Bucket=bucket, Key=key)["Body"].read()
    assert (hashlib.sha256(body).hexdigest(), len(body)) == (last["sha256"], last["sizeBytes"])

    # The file on the volume (the PV's directory on the node) likewise.
    last = vol["status"]["lastSuccessfulBackup"]
    path = env.volume_dir("etcd-backups") / "karmada/dc1" / last["name"]
    data = path.read_bytes()
    assert (hashlib.sha256(data).hexdigest(), len(data)) == (last["sha256"], last["sizeBytes"])
    assert last["location"] == f"pvc://etcd-backups/karmada/dc1/{last['name']}"

    # An on-demand backup is one backup: later passes take no second one.
    time.sleep(70)  # at least one periodic pass (reconcilePeriod 1m)
    assert [s["name"] for s in env.backup("to-s3")["status"]["snapshots"]] == [s3b["status"]["snapshots"][0]["name"]]
    keys = [o["Key"] for o in env.s3.client().list_objects_v2(Bucket=bucket).get("Contents", [])]
    assert [k for k in keys if k.endswith(".db")] == [key]


def test_wrong_s3_credentials_fail_with_a_reason_and_are_retried(env: Env):
    bucket = env.s3.create_bucket()
    env.apply({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s3-wrong", "namespace": NS},
               "stringData": {"accessKeyID": env.s3.access_key, "secretAccessKey": "not-the-secret"}})
    env.apply(etcd_backup("bad-creds", s3_storage(env, bucket, "bad", secret="s3-wrong")))
    b = env.wait_backup("bad-creds", lambda b: b.get("status", {}).get("phase") == "Failed", 600, "Failed")
    ready = condition(b, "Ready")
    print(f"\nwrong credentials: {ready['reason']}: {ready['message']}")
    assert ready["status"] == "False" and ready["reason"] == "StoreAccessDenied"
    assert bucket in ready["message"]  # names the store
    assert "not-the-secret" not in yaml.safe_dump(b) and "not-the-secret" not in env.operator.log_tail(10**6)
    b = env.wait_backup("bad-creds", lambda b: b["status"].get("failedAttempts", 0) >= 2, 400,
                        "a second attempt after the back-off")
    assert env.s3.client().list_objects_v2(Bucket=bucket).get("KeyCount", 0) == 0  # nothing listed as good
    # Fixing the Secret and touching the spec retries at once and succeeds.
    env.apply({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s3-wrong", "namespace": NS},
               "stringData": {"accessKeyID": env.s3.access_key, "secretAccessKey": env.s3.secret_key}})
    env.host.kubectl("patch", "etcdbackup", "bad-creds", "-n", NS, "--type=merge", "-p",
                     '{"spec": {"retention": {"maxBackups": 3}}}')
    b = env.wait_backup("bad-creds", succeeded, 400, "Succeeded after the fix")
    assert b["status"]["failedAttempts"] == 0


def test_a_schedule_every_minute_keeps_max_backups_in_the_store_and_in_status(env: Env):
    bucket = env.schedule_bucket  # the fixture created the EtcdBackup: it has been ticking since

    def ticks() -> int:
        return sum(1 for e in env.events("every-minute") if e["reason"] == "BackupSucceeded")

    wait_for(lambda: ticks() >= 4, 600, "4 scheduled backups", env.operator.log_tail, interval=10)
    # Stop the schedule so the store and status can be compared at rest.
    env.host.kubectl("patch", "etcdbackup", "every-minute", "-n", NS, "--type=merge", "-p",
                     '{"spec": {"suspend": true}}')
    b = env.wait_backup("every-minute", lambda b: not b["status"].get("activeJob")
                        and b["status"].get("observedGeneration") == b["metadata"]["generation"], 300,
                        "suspended with no Job running")
    objects = sorted(o["Key"] for o in env.s3.client().list_objects_v2(Bucket=bucket).get("Contents", [])
                     if o["Key"].endswith(".db"))
    in_status = sorted(f"sched/{s['name']}" for s in b["status"]["snapshots"])
    print(f"\n{ticks()} scheduled backups; kept: {objects}")
    assert len(objects) == 2 and objects == in_status
    assert "nextScheduleTime" not in b["status"]  # suspended
    deleted = [e for e in env.events("every-minute") if e["reason"] == "SnapshotDeleted"]
    assert len(deleted) >= 2
