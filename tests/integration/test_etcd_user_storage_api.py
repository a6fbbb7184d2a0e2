"""etcd's user decided from a real API server's StorageClasses and CSIDrivers (etcd/run_as.py):
the reads the operator makes (a CSIDriver by name, the default class by its annotation), as the
API server answers them. The bed has no CSI driver; here the objects are made as a cluster with
one would have them."""

from __future__ import annotations

import json

import pytest

from karmada_operator.etcd import run_as
from karmada_operator.kube.client import Kube
from support import kube_apiserver


@pytest.fixture(scope="module")
def server(bin_path, tmp_path_factory):
    srv = kube_apiserver.start(bin_path("etcd"), bin_path("kube-apiserver"), bin_path("kubectl"),
                               tmp_path_factory.mktemp("run-as-apiserver"))
    try:
        objs = [
            {"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass",
             "metadata": {"name": "standard", "annotations": {run_as.DEFAULT_CLASS: "true"}},
             "provisioner": "kubernetes.io/host-path"},
            {"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass", "metadata": {"name": "files"},
             "provisioner": "file.csi.example.com"},
            {"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass", "metadata": {"name": "blocks"},
             "provisioner": "block.csi.example.com", "parameters": {"csi.storage.k8s.io/fstype": "ext4"}},
            {"apiVersion": "storage.k8s.io/v1", "kind": "CSIDriver", "metadata": {"name": "file.csi.example.com"},
             "spec": {"fsGroupPolicy": "File"}},
            {"apiVersion": "storage.k8s.io/v1", "kind": "CSIDriver", "metadata": {"name": "block.csi.example.com"},
             "spec": {}},  # the API server defaults fsGroupPolicy to ReadWriteOnceWithFSType
        ]
        srv.kubectl("apply", "-f", "-", input_text="\n".join(json.dumps(o) for o in objs))
        yield srv
    finally:
        srv.stop()


def etcd(cls: str = "") -> dict:
    return {"runAs": "Auto", "storage": {"type": "PersistentVolumeClaim", "storageClassName": cls, "size": "8Gi",
                                         "hostPath": ""}}


def test_the_user_follows_the_real_storage_objects(server):
    with Kube.default(str(server.kubeconfig)) as kube:
        default = run_as.decide(kube, etcd())
        assert (default.user, default.reason.split(":")[0]) == (
            "Root", "StorageClass standard (kubernetes.io/host-path) is served by no CSI driver")
        files = run_as.decide(kube, etcd("files"))
        assert files.user == "NonRoot" and "fsGroupPolicy File" in files.reason, files
        blocks = run_as.decide(kube, etcd("blocks"))
        assert blocks.user == "NonRoot" and "ReadWriteOnceWithFSType and file system ext4" in blocks.reason, blocks
        missing = run_as.decide(kube, etcd("nowhere"))
        assert missing.user == "Root" and missing.reason.startswith("StorageClass nowhere not found")


def test_a_backup_stores_claim_decides_by_the_real_persistent_volume(server):
    """Backup and restore pods that write a claim someone made run as its PersistentVolume
    allows (etcd/run_as.py claim_decision): the claims are bound ahead by ``volumeName`` (no
    controller runs here; the operator reads only ``spec.volumeName``)."""
    node = {"required": {"nodeSelectorTerms": [{"matchExpressions": [
        {"key": "kubernetes.io/hostname", "operator": "In", "values": ["node-1"]}]}]}}
    sources = {"local": {"local": {"path": "/srv/backups"}, "nodeAffinity": node},
               "host": {"hostPath": {"path": "/srv/backups"}},
               "files": {"csi": {"driver": "file.csi.example.com", "volumeHandle": "vol-1"}},
               "blocks": {"csi": {"driver": "block.csi.example.com", "volumeHandle": "vol-2"}}}
    objs = []
    for name, source in sources.items():
        objs.append({"apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": f"store-{name}"},
                     "spec": {"capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOnce"],
                              "storageClassName": "", **source}})
        objs.append({"apiVersion": "v1", "kind": "PersistentVolumeClaim",
                     "metadata": {"name": f"backups-{name}", "namespace": "default"},
                     "spec": {"accessModes": ["ReadWriteOnce"], "storageClassName": "", "volumeName": f"store-{name}",
                              "resources": {"requests": {"storage": "1Gi"}}}})
    objs.append({"apiVersion": "v1", "kind": "PersistentVolumeClaim",
                 "metadata": {"name": "backups-by-class", "namespace": "default"},
                 "spec": {"accessModes": ["ReadWriteOnce"], "storageClassName": "files",
                          "resources": {"requests": {"storage": "1Gi"}}}})
    server.kubectl("apply", "-f", "-", input_text="\n".join(json.dumps(o) for o in objs))
    with Kube.default(str(server.kubeconfig)) as kube:
        users = {name: run_as.claim_decision(kube, "default", f"backups-{name}")
                 for name in (*sources, "by-class", "nowhere")}
    assert {name: d.user for name, d in users.items()} == {
        "local": "NonRoot", "host": "Root", "files": "NonRoot", "blocks": "Root", "by-class": "NonRoot",
        "nowhere": "Root"}, users
    assert users["local"].reason == "PersistentVolume store-local is a local volume, which the kubelet gives to " \
                                    "group 65532 (fsGroup)"
    assert users["host"].reason.startswith("PersistentVolume store-host is a hostPath volume")
    assert "names no file system type" in users["blocks"].reason, users["blocks"]
    assert users["by-class"].reason.startswith("StorageClass files (file.csi.example.com)")
