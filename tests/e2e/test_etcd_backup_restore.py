"""Issue 13: EtcdBackup on the real host cluster, into a real PVC and a real S3 server.

The real ansible-operator (config/rbac's ServiceAccount) installs a small Karmada (``vault``,
one etcd member) in its own namespace; backup Jobs run the operator image built and imported
by the test bed; versitygw listens on the node's address so the Jobs' pods reach it. The
tests check what a user cares about: the snapshot in the store (read back with boto3 and from
the volume's directory on the node) has the sha256, size and revision the status reports, a
schedule keeps exactly maxBackups, and bad credentials fail with a reason and are retried.
"""

from __future__ import annotations

import contextlib
import copy
import hashlib
import time
from pathlib import Path

import pytest
import yaml

from support import karmada_e2e
from support.karmada_crds_server import serve
from support.karmada_e2e import Deployment, bookinfo, bookinfo_running, operator_kubeconfig
from support.operator_runtime import OperatorProcess
from support.s3_server import start_s3_server
from support.testenv import HostCluster, MemberCluster, settings
from support.waiting import condition, crds_established, wait_for

# About 25 minutes with its own Karmada, two members and a restored second plane: in
# `make test-extended`, not in `make test` (docs/testing.md).
pytestmark = [pytest.mark.e2e, pytest.mark.extended]

NS = "backup-e2e"
NAME = "vault"
TARGET_NS = "restore-e2e"
TARGET = "vault2"
API = "operator.karmada.io/v1alpha1"
BUMP = 1_000_000_000
MEMBERS = [
    {"name": "member1", "kubeconfigSecretRef": {"name": "member1-kubeconfig"}, "syncMode": "Push"},
    {"name": "member3", "kubeconfigSecretRef": {"name": "member3-kubeconfig"}, "syncMode": "Pull",
     "agentPlacement": "Host", "taints": [{"key": "dedicated", "value": "batch", "effect": "NoSchedule"}]},
]


class Env:
    def __init__(self, host: HostCluster, fleet: Deployment, s3, operator: OperatorProcess):
        self.host, self.fleet, self.s3, self.operator = host, fleet, s3, operator
        self.schedule_bucket = ""
        self.source_spec: dict = {}
        self.members: dict[str, MemberCluster] = {}

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


def copy_secret(host: HostCluster, name: str, src_ns: str, dst_ns: str, new_name: str = "",
                keys: tuple[str, ...] = ()) -> None:
    secret = host.get("secret", name, "-n", src_ns)
    data = {k: v for k, v in secret["data"].items() if not keys or k in keys}
    host.kubectl("apply", "-f", "-", input=yaml.safe_dump({
        "apiVersion": "v1", "kind": "Secret", "metadata": {"name": new_name or name, "namespace": dst_ns},
        "type": secret.get("type", "Opaque"), "data": data}))


def members_ready(kd: dict, count: int) -> bool:
    status = kd.get("status", {})
    joined = [m for m in status.get("members", []) if m.get("state") == "Joined" and m.get("ready")]
    ready = condition(kd, "Ready")
    return (len(joined) == count and ready.get("status") == "True"
            and ready.get("observedGeneration") == kd["metadata"]["generation"]
            and condition(kd, "MembersReady").get("status") == "True")


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


def remove_what_the_tests_made(host_cluster: HostCluster) -> None:
    for ns in (NS, TARGET_NS):
        host_cluster.kubectl("delete", "etcdbackups,etcdrestores", "--all", "-n", ns, "--timeout=60s",
                             check=False, timeout=90)
        # the finalizers unjoin the members first: kubectl may wait its whole timeout
        host_cluster.kubectl("delete", "karmadadeployments", "--all", "-n", ns, "--timeout=600s",
                             check=False, timeout=630)
        host_cluster.kubectl("delete", "namespace", ns, "--timeout=300s", check=False, timeout=330)
    host_cluster.kubectl("delete", "pv", "restore-e2e-backups", "--ignore-not-found", check=False)


@pytest.fixture(scope="module")
def env(host_cluster: HostCluster, member_clusters: list[MemberCluster], bin_path, tmp_path_factory):
    work = tmp_path_factory.mktemp("backup")
    print(f"\noperator image built and imported in {karmada_e2e.load_operator_image(host_cluster):.0f}s")
    # Torn down even when the setup fails: a leftover operator would reconcile the next module's Karmadas too.
    with contextlib.ExitStack() as cleanup:
        s3 = start_s3_server(bin_path("versitygw"), work / "s3", host=settings()["KO_NODE_IP"])
        cleanup.callback(s3.stop)
        crds = serve()
        cleanup.callback(crds.stop)
        host_cluster.kubectl("apply", "-k", str(karmada_e2e.ROOT / "config/crd"))
        crds_established(host_cluster.kubectl, ["karmadadeployments.operator.karmada.io",
                                                "etcdbackups.operator.karmada.io"])
        for ns in (NS, TARGET_NS):
            host_cluster.kubectl("create", "namespace", ns, check=False)
            for member in member_clusters:  # the members' kubeconfig Secrets, where each Karmada reads them
                copy_secret(host_cluster, member.secret_name, member.secret_namespace, ns)
        operator = OperatorProcess(bin_path("ansible-operator"), operator_kubeconfig(host_cluster, work), work,
                                   extra_env={"KARMADA_OPERATOR_IMAGE": karmada_e2e.OPERATOR_IMAGE})
        cleanup.callback(operator.stop)
        cleanup.callback(remove_what_the_tests_made, host_cluster)  # runs first, while the operator runs
        operator.wait_healthy()
        cr = karmada_e2e.sample()
        cr["metadata"].update(name=NAME, namespace=NS)
        spec = cr["spec"]
        spec["crds"] = {"url": crds.url, "sha256": crds.sha256}
        spec["etcd"]["local"] = {"replicas": 1, "storage": {"type": "EmptyDir"}}
        spec["apiServer"] = {"replicas": 1, "serviceType": "ClusterIP"}
        spec["certificates"] = {"keyAlgorithm": "ECDSA"}
        spec["members"] = MEMBERS
        fleet = Deployment(host_cluster, operator, work, NAME, NS)
        e = Env(host_cluster, fleet, s3, operator)
        e.apply(cr)
        e.apply({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s3-credentials", "namespace": NS},
                 "stringData": {"accessKeyID": s3.access_key, "secretAccessKey": s3.secret_key}})
        e.apply({"apiVersion": "v1", "kind": "PersistentVolumeClaim",
                 "metadata": {"name": "etcd-backups", "namespace": NS},
                 "spec": {"accessModes": ["ReadWriteMany"], "storageClassName": "cephfs",
                          "resources": {"requests": {"storage": "1Gi"}}}})
        fleet.wait_for(lambda: members_ready(fleet.get(), 2), 1500, "Karmada Ready with 2 members")
        # Something to back up: bookinfo on both members, and some ConfigMaps.
        fleet.karmadactl("apply", "-f", "-", input=yaml.safe_dump_all(bookinfo()))
        members = {m.name: m for m in member_clusters}
        fleet.wait_for(lambda: bookinfo_running(members["member1"]) and bookinfo_running(members["member3"]), 600,
                       "bookinfo running on member1 and member3")
        e.members = members
        e.source_spec = fleet.get()["spec"]
        for i in range(20):
            fleet.karmadactl("create", "configmap", f"payload-{i}", "-n", "default", f"--from-literal=i={i}",
                             check=False)
        # The schedule ticks while the other tests run; its test comes last and checks the result.
        e.schedule_bucket = s3.create_bucket()
        e.apply(etcd_backup("every-minute", s3_storage(e, e.schedule_bucket, "sched"), schedule="* * * * *",
                            retention={"maxBackups": 2}))
        yield e


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


# --------------------------------------------------------------------------- restore


KARMADA_KINDS = ["clusters.cluster.karmada.io", "propagationpolicies.policy.karmada.io",
                 "clusterpropagationpolicies.policy.karmada.io", "resourcebindings.work.karmada.io",
                 "works.work.karmada.io"]


def comparable_spec(kind: str, spec: dict) -> dict:
    """What must be equal between the source and the restored plane. Policies and Clusters: the
    whole spec. A ResourceBinding names its resource's resourceVersion, an etcd revision, which
    the restore bumps on purpose, and its target clusters are a set: the restored plane's
    scheduler may write the same placement in another order. A Work's manifests carry annotations and defaults that each
    plane's controllers write on their own schedule: the objects it carries (kind, namespace,
    name) must be the same."""
    if kind == "resourcebindings.work.karmada.io":
        spec = {**spec, "resource": {k: v for k, v in spec.get("resource", {}).items() if k != "resourceVersion"},
                "clusters": sorted(spec.get("clusters") or [], key=lambda c: c["name"])}
    if kind == "works.work.karmada.io":
        return {"manifests": sorted((m.get("apiVersion"), m.get("kind"), m.get("metadata", {}).get("namespace", ""),
                                     m["metadata"]["name"]) for m in spec.get("workload", {}).get("manifests", []))}
    return spec


def karmada_objects(fleet: Deployment, kubeconfig: Path | None = None) -> dict[str, dict[str, dict]]:
    """Name -> comparable spec of each Karmada kind, read through karmada-apiserver."""
    out = {}
    for kind in KARMADA_KINDS:
        items = yaml.safe_load(fleet.karmadactl("get", kind, "-A", "-o", "yaml", kubeconfig=kubeconfig).stdout)["items"]
        out[kind] = {f"{i['metadata'].get('namespace', '')}/{i['metadata']['name']}":
                     comparable_spec(kind, i.get("spec", {})) for i in items}
    return out


def pod_uids(member: MemberCluster) -> dict[str, str]:
    return {p["metadata"]["name"]: p["metadata"]["uid"] for p in member.get("pods", "-n", "bookinfo")["items"]}


def restore_cr(name: str, target: str, source: dict, **spec) -> dict:
    return {"apiVersion": API, "kind": "EtcdRestore", "metadata": {"name": name, "namespace": TARGET_NS},
            "spec": {"source": source, "target": {"karmadaDeploymentRef": {"name": target}}, "bumpRevision": BUMP,
                     **spec}}


def target_cr(env: Env, name: str) -> dict:
    spec = copy.deepcopy(env.source_spec)  # the source's spec (the source itself is gone later)
    spec["etcd"]["local"] = {"replicas": 1, "storage": {"type": "PersistentVolumeClaim", "size": "1Gi",
                                                        "storageClassName": "standard"}}
    return {"apiVersion": API, "kind": "KarmadaDeployment", "metadata": {"name": name, "namespace": TARGET_NS},
            "spec": spec}


# A backup, a restore (about 4 minutes), the restore's deletion and the old site's (up to 10):
# more than the 900 s default on 2 cores.
@pytest.mark.timeout(2400)
def test_restore_into_a_new_karmada_brings_back_everything_and_keeps_the_members(env: Env):
    # A fresh backup of the source, to S3.
    bucket = env.s3.create_bucket()
    env.apply(etcd_backup("for-restore", s3_storage(env, bucket, "move")))
    b = env.wait_backup("for-restore", succeeded, 600, "Succeeded")
    snap = b["status"]["lastSuccessfulBackup"]
    source_objects = karmada_objects(env.fleet)
    uids = {m: pod_uids(env.members[m]) for m in ("member1", "member3")}

    # In the new site: the store's credentials, the members' kubeconfigs (copied by the fixture)
    # and the source's CA and service-account key, then the EtcdRestore before the Karmada.
    copy_secret(env.host, "s3-credentials", NS, TARGET_NS)
    copy_secret(env.host, f"{NAME}-pki", NS, TARGET_NS, new_name="source-pki",
                keys=("ca.crt", "ca.key", "sa.key", "sa.pub"))
    started = time.monotonic()
    env.apply(restore_cr("move", TARGET, {
        "location": snap["location"],
        "s3": {"endpoint": env.s3.endpoint, "region": "us-east-1", "forcePathStyle": True,
               "credentialsSecretRef": {"name": "s3-credentials"}}}, pki={"secretRef": {"name": "source-pki"}}))
    env.apply(target_cr(env, TARGET))
    target = Deployment(env.host, env.operator, env.fleet.work, TARGET, TARGET_NS)

    def restore() -> dict:
        return env.host.get("etcdrestore", "move", "-n", TARGET_NS)

    done = wait_for(lambda: (lambda r: r if r.get("status", {}).get("phase") in ("Succeeded", "Failed") else None)(
        restore()), 1500, "the restore to finish", env.operator.log_tail, interval=5)
    print(f"\nrestore apply-to-Succeeded: {time.monotonic() - started:.0f}s; status: "
          f"{yaml.safe_dump(done['status'].get('verification'))}")
    assert done["status"]["phase"] == "Succeeded", done["status"]
    assert condition(done, "Seeded")["status"] == "True"
    verified = condition(done, "Verified")
    assert verified["status"] == "True", verified
    assert done["status"]["verification"]["differences"] == []
    assert done["status"]["snapshot"]["sha256"] == snap["sha256"]
    assert done["status"]["restoredRevision"] >= snap["revision"] + BUMP

    target.wait_for(lambda: members_ready(target.get(), 2), 900, "the new Karmada Ready with both members")
    restored_objects = karmada_objects(target)
    for kind in KARMADA_KINDS:
        if kind == "clusters.cluster.karmada.io":  # status aside, the Cluster specs are the source's
            assert restored_objects[kind].keys() == source_objects[kind].keys() == {"/member1", "/member3"}
        assert restored_objects[kind].keys() == source_objects[kind].keys(), kind
        for key, spec in source_objects[kind].items():
            assert restored_objects[kind][key] == spec, (kind, key)
    for m in ("member1", "member3"):
        assert bookinfo_running(env.members[m])
        assert pod_uids(env.members[m]) == uids[m], m  # nothing on the members was recreated

    # A finished restore can be deleted: the restored Karmada keeps its etcd volume and its CA
    # (objects the restore made, never owned by it, so the garbage collector leaves them).
    kept = [("pvc", f"data-{TARGET}-etcd-0"), ("secret", f"{TARGET}-pki")]
    for kind, name in kept:
        owners = env.host.get(kind, name, "-n", TARGET_NS)["metadata"].get("ownerReferences") or []
        assert not [o for o in owners if o["kind"] == "EtcdRestore"], (kind, name, owners)
    env.host.kubectl("delete", "etcdrestore", "move", "-n", TARGET_NS, "--timeout=120s", timeout=150)
    time.sleep(15)  # the garbage collector would act within seconds
    for kind, name in kept:
        assert "deletionTimestamp" not in env.host.get(kind, name, "-n", TARGET_NS)["metadata"], (kind, name)
    target.wait_for(lambda: members_ready(target.get(), 2), 300, "the new Karmada Ready after the restore's deletion")

    # The data-center move: the old site goes (Retain: its finalizer leaves the members joined,
    # they belong to the new plane now), and the new plane keeps both members.
    env.host.kubectl("patch", "karmadadeployment", NAME, "-n", NS, "--type=merge", "-p",
                     '{"spec": {"deletionPolicy": "Retain"}}')
    env.host.kubectl("delete", "etcdbackups", "--all", "-n", NS, "--timeout=60s", check=False)
    env.host.kubectl("delete", "karmadadeployment", NAME, "-n", NS, "--timeout=600s", timeout=630)
    time.sleep(30)
    target.wait_for(lambda: members_ready(target.get(), 2), 600, "both members still Ready under the new plane")
    clusters = yaml.safe_load(target.karmadactl("get", "clusters", "-o", "yaml").stdout)["items"]
    assert {c["metadata"]["name"]: next(x["status"] for x in c["status"]["conditions"] if x["type"] == "Ready")
            for c in clusters} == {"member1": "True", "member3": "True"}
    for m in ("member1", "member3"):
        assert pod_uids(env.members[m]) == uids[m], m


def test_a_flipped_byte_fails_the_restore_before_any_etcd_member_exists(env: Env):
    # A copy of a stored snapshot with one byte flipped, on the backup volume. (The EtcdBackup
    # objects are gone with the old site; their snapshots stay in the store.)
    vol = env.volume_dir("etcd-backups") / "karmada/dc1"
    src = {"name": sorted(p.name for p in vol.glob("to-volume-*.db"))[-1]}
    data = bytearray((vol / src["name"]).read_bytes())
    data[len(data) // 2] ^= 0x01
    (vol / "flipped.db").write_bytes(bytes(data))
    sidecar = (vol / f"{src['name']}.meta.json").read_text().replace(src["name"], "flipped.db")
    (vol / "flipped.db.meta.json").write_text(sidecar)
    # The restore reads the volume from the target's namespace: give it a claim on the same directory.
    pv = env.host.get("pv", env.host.get("pvc", "etcd-backups", "-n", NS)["spec"]["volumeName"])
    env.apply({"apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": "restore-e2e-backups"},
               "spec": {"capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteMany"],
                        "persistentVolumeReclaimPolicy": "Retain", "storageClassName": "",
                        "hostPath": {"path": pv["spec"]["hostPath"]["path"]},
                        "claimRef": {"namespace": TARGET_NS, "name": "etcd-backups"}}})
    env.apply({"apiVersion": "v1", "kind": "PersistentVolumeClaim",
               "metadata": {"name": "etcd-backups", "namespace": TARGET_NS},
               "spec": {"accessModes": ["ReadWriteMany"], "storageClassName": "", "volumeName": "restore-e2e-backups",
                        "resources": {"requests": {"storage": "1Gi"}}}})
    env.apply(restore_cr("flipped", "broken", {"location": "pvc://etcd-backups/karmada/dc1/flipped.db"}))
    env.apply(target_cr(env, "broken"))
    r = wait_for(lambda: (lambda r: r if r.get("status", {}).get("phase") == "Failed" else None)(
        env.host.get("etcdrestore", "flipped", "-n", TARGET_NS)), 600, "the restore to fail", env.operator.log_tail)
    ready = condition(r, "Ready")
    print(f"\nflipped byte: {ready['reason']}: {ready['message']}")
    assert ready["reason"] == "IntegrityCheckFailed"
    # No etcd member: no StatefulSet, no pod, no volume; the Karmada waits and says why.
    assert env.host.kubectl("get", "statefulset", "broken-etcd", "-n", TARGET_NS, check=False).returncode != 0
    pods = env.host.get("pods", "-n", TARGET_NS, "-l", "app.kubernetes.io/instance=broken")["items"]
    assert [p["metadata"]["name"] for p in pods if "etcd" in p["metadata"]["name"]] == []
    # The member volume the seeding Job mounted is deleted with the failure (unwritten: the Job
    # checks the sha256 before it writes); its deletion completes once the Job's pod lets go.
    wait_for(lambda: env.host.kubectl("get", "pvc", "data-broken-etcd-0", "-n", TARGET_NS,
                                      check=False).returncode != 0, 180, "the unwritten member volume to be gone",
             env.operator.log_tail)
    # The failed restore wakes the Karmada waiting for it: its status names the failure.
    kd = wait_for(lambda: (lambda kd: kd if "IntegrityCheckFailed" in condition(kd, "Ready").get("message", "")
                           else None)(env.host.get("karmadadeployment", "broken", "-n", TARGET_NS)),
                  300, "the waiting Karmada to report the failed restore", env.operator.log_tail)
    assert condition(kd, "Ready")["reason"] == "WaitingForRestore"

    # A restore into a Karmada that has data (the restored one) is refused, and changes nothing.
    before = env.host.get("statefulset", f"{TARGET}-etcd", "-n", TARGET_NS)["metadata"]["uid"]
    env.apply(restore_cr("over-live", TARGET, {"location": "pvc://etcd-backups/karmada/dc1/" + src["name"]}))
    r = wait_for(lambda: (lambda r: r if r.get("status", {}).get("phase") == "Failed" else None)(
        env.host.get("etcdrestore", "over-live", "-n", TARGET_NS)), 300, "the refusal", env.operator.log_tail)
    assert condition(r, "Ready")["reason"] == "TargetHasData", r["status"]
    assert env.host.get("statefulset", f"{TARGET}-etcd", "-n", TARGET_NS)["metadata"]["uid"] == before
    env.host.kubectl("delete", "etcdrestore", "over-live", "-n", TARGET_NS)
