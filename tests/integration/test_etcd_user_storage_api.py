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
