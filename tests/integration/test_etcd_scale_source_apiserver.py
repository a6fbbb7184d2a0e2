"""etcd_scaling.KubeScaleSource against a real kube-apiserver: the member records (an annotation of
the bootstrap ConfigMap) survive rewrites of its values, claims come with their UIDs, a pod is
deleted only in the incarnation meant, and a pod that never ran has no previous log."""

from __future__ import annotations

import pytest

from karmada_operator.etcd.replacement import RECORDS_ANNOTATION, Volume
from karmada_operator.etcd.scaling import KubeScaleSource, bootstrap
from karmada_operator.kube.client import Kube
from support import kube_apiserver

NS = "etcd-source"
STS = "karmada-etcd"
SELECTOR = "app.kubernetes.io/name=etcd,app.kubernetes.io/instance=karmada"
LABELS = {"app.kubernetes.io/name": "etcd", "app.kubernetes.io/instance": "karmada"}


@pytest.fixture(scope="module")
def source(bin_path, tmp_path_factory):
    srv = kube_apiserver.start(bin_path("etcd"), bin_path("kube-apiserver"), bin_path("kubectl"),
                               tmp_path_factory.mktemp("kube-apiserver"))
    try:
        srv.kubectl("create", "namespace", NS)
        srv.kubectl("create", "serviceaccount", "default", "-n", NS)  # no controller-manager makes it here
        with Kube.from_file(str(srv.kubeconfig)) as kube:
            yield kube, KubeScaleSource(kube, NS, STS, SELECTOR, f"{STS}-bootstrap", LABELS)
    finally:
        srv.stop()


def claim(name: str) -> dict:
    return {"apiVersion": "v1", "kind": "PersistentVolumeClaim",
            "metadata": {"name": name, "namespace": NS, "labels": LABELS},
            "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}}


def pod(name: str) -> dict:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": NS, "labels": LABELS},
            "spec": {"automountServiceAccountToken": False,
                     "containers": [{"name": "etcd", "image": "registry.k8s.io/etcd:3.6.6-0"}]}}


def test_records_survive_bootstrap_rewrites(source):
    kube, src = source
    one = bootstrap([(f"{STS}-0", "https://a:2380")], "new")
    assert src.write_bootstrap(one)
    records = {f"{STS}-0": {"id": "8e9e05c52164694d", "volume": "uid-0"}}
    src.write_records(records)
    assert src.write_bootstrap(bootstrap([(f"{STS}-0", "https://a:2380")], "existing"))
    assert src.records() == records
    src.write_records(records, last="etcd member karmada-etcd-0 replaced: test")
    assert src.records() == {**records, "": {"message": "etcd member karmada-etcd-0 replaced: test"}}
    cm = kube.get("v1", "ConfigMap", f"{STS}-bootstrap", NS)
    assert cm["data"]["ETCD_INITIAL_CLUSTER_STATE"] == "existing"
    assert RECORDS_ANNOTATION in cm["metadata"]["annotations"]


def test_claims_come_with_their_uids_and_pods_go_only_in_the_incarnation_meant(source):
    kube, src = source
    made = kube.create(claim(f"data-{STS}-1"))
    assert src.claim_volumes() == {f"data-{STS}-1": Volume(made["metadata"]["uid"])}
    first = kube.create(pod(f"{STS}-1"))
    src.delete_pod(f"{STS}-1", "not-its-uid")  # another incarnation: left alone
    assert kube.get("v1", "Pod", f"{STS}-1", NS)["metadata"]["uid"] == first["metadata"]["uid"]
    assert src.last_log(f"{STS}-1") == ""  # never ran (no kubelet here)
    src.delete_pod(f"{STS}-1", first["metadata"]["uid"])
    assert kube.get("v1", "Pod", f"{STS}-1", NS) is None
