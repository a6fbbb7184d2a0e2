"""Which user etcd runs as (etcd/run_as.py): 65532 where its volume takes fsGroup, root where it
cannot, the reason named; an unreadable storage API never changes the user."""

from __future__ import annotations

import pytest

from karmada_operator.etcd import run_as
from karmada_operator.kube import pod_security
from karmada_operator.kube.client import KubeError


class Storage:
    """StorageClasses and CSIDrivers by name (what decide reads); ``error`` fails every read."""

    def __init__(self, classes=(), drivers=(), error: KubeError | None = None):
        self.classes = {c["metadata"]["name"]: c for c in classes}
        self.drivers = {d["metadata"]["name"]: d for d in drivers}
        self.error = error

    def get(self, api_version, kind, name, namespace=None):
        if self.error:
            raise self.error
        # as the API server reads the URL: a name with a slash is a subresource (refused: 403)
        assert "/" not in name, f"GET {kind} {name}: the API server would take it for a subresource"
        return (self.classes if kind == "StorageClass" else self.drivers).get(name)

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
