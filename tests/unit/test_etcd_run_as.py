"""Which user etcd runs as (etcd/run_as.py): 65532 where its volume takes fsGroup, root where it
cannot, the reason named; an unreadable storage API never changes the user."""

from __future__ import annotations

import pytest

from karmada_operator.etcd import run_as
from karmada_operator.kube import pod_security
from karmada_operator.kube.client import KubeError


class Storage:
    """StorageClasses, CSIDrivers, claims and volumes by name (what decide reads); ``error`` fails every read."""

    def __init__(self, classes=(), drivers=(), error: KubeError | None = None, claims=(), volumes=()):
        self.classes = {c["metadata"]["name"]: c for c in classes}
        self.drivers = {d["metadata"]["name"]: d for d in drivers}
        self.claims = {c["metadata"]["name"]: c for c in claims}
        self.volumes = {v["metadata"]["name"]: v for v in volumes}
        self.error = error

    def get(self, api_version, kind, name, namespace=None):
        if self.error:
            raise self.error
        # as the API server reads the URL: a name with a slash is a subresource (refused: 403)
        assert "/" not in name, f"GET {kind} {name}: the API server would take it for a subresource"
        return {"StorageClass": self.classes, "CSIDriver": self.drivers, "PersistentVolumeClaim": self.claims,
                "PersistentVolume": self.volumes}[kind].get(name)

    def list(self, api_version, kind, namespace=None, **_):
        if self.error:
            raise self.error
        return list(self.classes.values())


def sc(name, provisioner, default=False, **params):
    meta = {"name": name, "annotations": {run_as.DEFAULT_CLASS: "true"} if default else {}}
    return {"metadata": meta, "provisioner": provisioner, "parameters": params}


def driver(name, policy=None):
    return {"metadata": {"name": name}, "spec": {"fsGroupPolicy": policy} if policy else {}}


def etcd(kind="PersistentVolumeClaim", cls="", wanted="Auto"):
    return {"runAs": wanted, "storage": {"type": kind, "storageClassName": cls, "size": "8Gi", "hostPath": ""}}


def test_volumes_that_take_fsgroup_run_etcd_as_65532():
    ebs = Storage([sc("gp3", "ebs.csi.aws.com", default=True, **{"csi.storage.k8s.io/fstype": "ext4"})],
                  [driver("ebs.csi.aws.com")])
    d = run_as.decide(ebs, etcd())
    assert d.user == "NonRoot" and "gp3 (ebs.csi.aws.com)" in d.reason and "ext4" in d.reason
    assert d.security_context == {**pod_security.pod(), "fsGroupChangePolicy": "Always"}
    assert d.security_context["runAsNonRoot"] is True and d.security_context["fsGroup"] == 65532
    nfs = Storage([sc("files", "file.csi.example")], [driver("file.csi.example", "File")])
    assert run_as.decide(nfs, etcd(cls="files")).user == "NonRoot"
    assert run_as.decide(Storage(), etcd("EmptyDir")).user == "NonRoot"


def test_host_directories_and_unknown_storage_run_etcd_as_root_and_say_why():
    bed = Storage([sc("standard", "kubernetes.io/host-path", default=True)])
    d = run_as.decide(bed, etcd())
    assert d.user == "Root" and d.reason.startswith("StorageClass standard (kubernetes.io/host-path) is served by no "
                                                    "CSI driver")
    assert d.security_context == {"seccompProfile": {"type": "RuntimeDefault"}}
    assert d.annotation == f"Root: {d.reason}"
    assert run_as.decide(Storage(), etcd("HostPath")).reason.startswith("storage.type HostPath")
    no_fstype = Storage([sc("blk", "blk.csi")], [driver("blk.csi", "ReadWriteOnceWithFSType")])
    assert run_as.decide(no_fstype, etcd(cls="blk")).user == "Root"
    never = Storage([sc("n", "n.csi")], [driver("n.csi", "None")])
    assert "fsGroupPolicy None" in run_as.decide(never, etcd(cls="n")).reason
    assert run_as.decide(Storage(), etcd()).reason.startswith("no storageClassName and no default StorageClass")
    assert run_as.decide(Storage(), etcd(cls="gone")).reason.startswith("StorageClass gone not found")
    # the existing StatefulSet's claims name the class its volumes have, whatever the spec says now
    claims = [{"spec": {"storageClassName": "files"}}]
    assert run_as.decide(Storage([sc("files", "f.csi")], [driver("f.csi", "File")]), etcd(cls="other"),
                         claims).user == "NonRoot"


def test_the_spec_says_it_outright():
    bed = Storage([sc("standard", "kubernetes.io/host-path", default=True)])
    assert run_as.decide(bed, etcd(wanted="NonRoot")) == run_as.Decision("NonRoot", "spec.etcd.local.runAs is NonRoot")
    assert run_as.decide(Storage(), etcd("EmptyDir", wanted="Root")).user == "Root"


def test_an_unreadable_storage_api_keeps_the_user_etcd_has_or_fails_a_first_install():
    denied = Storage(error=KubeError(403, "Forbidden", "cannot get storageclasses"))
    sts = {"spec": {"template": {"metadata": {"annotations": {
        run_as.ANNOTATION: "NonRoot: StorageClass gp3 (ebs.csi.aws.com): CSIDriver fsGroupPolicy File, ..."}}}}}
    kept = run_as.decide(denied, etcd(), current=sts)
    assert kept.user == "NonRoot" and kept.reason.startswith("StorageClass gp3")
    with pytest.raises(run_as.RunAsError, match="403 Forbidden: cannot get storageclasses"):
        run_as.decide(denied, etcd())


def test_status_reads_the_user_from_the_pods_that_run():
    def pod(non_root, reason="r"):
        ctx = pod_security.etcd_pod(non_root=non_root)
        text = f"{'NonRoot' if non_root else 'Root'}: {reason}"
        return {"spec": {"securityContext": ctx}, "metadata": {"annotations": {run_as.ANNOTATION: text}}}

    assert pod_security.run_as_observed([pod(True), pod(True)]) == {"user": "NonRoot", "reason": "r"}
    assert pod_security.run_as_observed([pod(False)]) == {"user": "Root", "reason": "r"}
    assert pod_security.run_as_observed([pod(True), pod(False)])["user"] == "Mixed"  # a change rolling
    assert pod_security.run_as_observed([]) == {}


# ---- the pods that write a volume someone else made: backup Jobs and the follower, restore Jobs


def claim(name, volume="", cls=None):
    spec = {"volumeName": volume} if volume else {}
    if cls is not None:
        spec["storageClassName"] = cls
    return {"metadata": {"name": name, "namespace": "ns"}, "spec": spec}


def pv(name, **source):
    return {"metadata": {"name": name}, "spec": {"capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOnce"],
                                                 "storageClassName": "", **source}}


def test_a_claims_volume_decides_by_the_persistent_volume_it_is_bound_to():
    local = Storage(claims=[claim("backups", "pv-1")], volumes=[pv("pv-1", local={"path": "/srv/b"})])
    d = run_as.claim_decision(local, "ns", "backups")
    assert d == run_as.Decision("NonRoot", "PersistentVolume pv-1 is a local volume, which the kubelet gives to "
                                           "group 65532 (fsGroup)")
    host = Storage(claims=[claim("backups", "pv-1")], volumes=[pv("pv-1", hostPath={"path": "/srv/b"})])
    assert run_as.claim_decision(host, "ns", "backups") == run_as.Decision(
        "Root", "PersistentVolume pv-1 is a hostPath volume, which the kubelet does not hand to another user")
    nfs = Storage(claims=[claim("backups", "pv-1")], volumes=[pv("pv-1", nfs={"server": "s", "path": "/"})])
    assert run_as.claim_decision(nfs, "ns", "backups").reason.endswith("is a nfs volume, which the kubelet does not "
                                                                        "hand to another user")
    csi = Storage(drivers=[driver("f.csi", "File")], claims=[claim("backups", "pv-1")],
                  volumes=[pv("pv-1", csi={"driver": "f.csi", "volumeHandle": "h"})])
    assert run_as.claim_decision(csi, "ns", "backups").user == "NonRoot"
    block = Storage(drivers=[driver("b.csi")], claims=[claim("backups", "pv-1")],
                    volumes=[pv("pv-1", csi={"driver": "b.csi", "volumeHandle": "h"})])
    assert run_as.claim_decision(block, "ns", "backups").user == "Root"
    block.volumes["pv-1"]["spec"]["csi"]["fsType"] = "xfs"
    assert "file system xfs" in run_as.claim_decision(block, "ns", "backups").reason


def test_an_unbound_claim_decides_by_its_class_and_a_missing_one_leaves_root():
    files = Storage([sc("files", "f.csi")], [driver("f.csi", "File")], claims=[claim("backups", cls="files")])
    assert run_as.claim_decision(files, "ns", "backups").user == "NonRoot"
    static = Storage(claims=[claim("backups", cls="")])
    assert run_as.claim_decision(static, "ns", "backups").reason.startswith("PersistentVolumeClaim backups is not "
                                                                             "bound and names no class")
    assert run_as.claim_decision(Storage(), "ns", "gone") == run_as.Decision(
        "Root", "PersistentVolumeClaim gone not found")


def test_backup_pods_to_a_volume_run_as_the_volume_allows():
    from karmada_operator.backup import pod as eb_pod

    plan = {"storage": {"type": "pvc", "claimName": "backups"}}
    local = Storage(claims=[claim("backups", "pv-1")], volumes=[pv("pv-1", local={"path": "/srv/b"})])
    decided = eb_pod.with_user(local, plan, "ns")
    pod_ctx, container_ctx = eb_pod.security_contexts(decided)
    assert pod_ctx == {**pod_security.pod(), "fsGroupChangePolicy": "Always"}  # root's older files too
    assert container_ctx == pod_security.container()
    assert eb_pod.pod_annotations(decided)[pod_security.RUN_AS_ANNOTATION].startswith("NonRoot: PersistentVolume pv-1")
    host = Storage(claims=[claim("backups", "pv-1")], volumes=[pv("pv-1", hostPath={"path": "/srv/b"})])
    pod_ctx, container_ctx = eb_pod.security_contexts(eb_pod.with_user(host, plan, "ns"))
    assert pod_ctx == {"seccompProfile": {"type": "RuntimeDefault"}}
    assert container_ctx["runAsUser"] == 0 and container_ctx["capabilities"] == {"drop": ["ALL"]}
    # what cannot be read: root, saying why (as a restore's Jobs)
    unread = eb_pod.with_user(Storage(error=KubeError(403, "Forbidden", "no")), plan, "ns")["storage"]["runAs"]
    assert unread["user"] == "Root"
    assert unread["reason"].startswith("whether the volume takes fsGroup could not be read")
    s3 = {"storage": {"type": "s3"}}
    assert eb_pod.with_user(Storage(error=KubeError(500, "x", "never read")), s3, "ns") == s3
    assert eb_pod.security_contexts(s3) == (pod_security.pod(), pod_security.container())
    assert eb_pod.pod_annotations(s3) == {}


def restore_plan(store, target_run_as="Auto", target_class="standard"):
    return {"restore": {"namespace": "ns"}, "storage": store,
            "target": {"runAs": target_run_as, "storage": {"type": "PersistentVolumeClaim",
                                                           "storageClassName": target_class}}}


def test_restore_jobs_run_as_65532_only_where_etcds_volume_and_the_store_both_allow():
    from karmada_operator.backup import restore as er

    s3 = {"type": "s3"}
    volume = {"type": "pvc", "claimName": "backups"}
    bed = [sc("standard", "kubernetes.io/host-path", default=True)]
    local_store = dict(claims=[claim("backups", "pv-1")], volumes=[pv("pv-1", local={"path": "/srv/b"})])
    host_store = dict(claims=[claim("backups", "pv-1")], volumes=[pv("pv-1", hostPath={"path": "/srv/b"})])

    users = er.with_users(Storage(bed), restore_plan(s3, "NonRoot"))["runAs"]
    assert users["members"] == {"user": "NonRoot", "reason": "etcd's volumes: spec.etcd.local.runAs is NonRoot"}
    assert users["point"]["user"] == "NonRoot"
    users = er.with_users(Storage(bed), restore_plan(s3))["runAs"]  # the bed's host directories
    assert users["members"]["user"] == "Root" and users["members"]["reason"].startswith(
        "etcd's volumes: StorageClass standard (kubernetes.io/host-path)")
    users = er.with_users(Storage(bed, **host_store), restore_plan(volume, "NonRoot"))["runAs"]
    assert users["members"]["user"] == "Root" and users["members"]["reason"].startswith("the store: ")
    assert users["point"]["user"] == "Root"
    users = er.with_users(Storage(bed, **local_store), restore_plan(volume, "NonRoot"))["runAs"]
    assert users["members"]["user"] == users["point"]["user"] == "NonRoot"
    unread = er.with_users(Storage(error=KubeError(403, "Forbidden", "no")), restore_plan(s3))["runAs"]
    assert unread["members"]["user"] == "Root" and "could not be read" in unread["members"]["reason"]
