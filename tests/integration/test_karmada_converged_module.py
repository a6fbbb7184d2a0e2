"""The karmada_converged module against a real kube-apiserver: it records what a full pass left,
and answers converged only while nothing the operator owns was edited, deleted or recreated."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from support import kube_apiserver
from support.ansible_adhoc import run_module
from support.waiting import crds_established

ROOT = Path(__file__).resolve().parents[2]
NS = "karmada-system"
LABELS = {"app.kubernetes.io/instance": "fast", "app.kubernetes.io/managed-by": "karmada-operator"}
SELECTOR = ",".join(f"{k}={v}" for k, v in LABELS.items())


@pytest.fixture(scope="module")
def server(bin_path, tmp_path_factory):
    srv = kube_apiserver.start(bin_path("etcd"), bin_path("kube-apiserver"), bin_path("kubectl"),
                               tmp_path_factory.mktemp("converged-apiserver"))
    try:
        srv.kubectl("apply", "-k", str(ROOT / "config/crd"))
        crds_established(srv.kubectl)
        srv.kubectl("create", "namespace", NS)
        yield srv
    finally:
        srv.stop()


def converged(srv, tmp_path, **args) -> dict:
    """One karmada_converged call through real ansible (ad hoc), returning the module's result."""
    params = {"namespace": NS, "selector": SELECTOR, "build": "build-1", "kubeconfig": str(srv.kubeconfig), **args}
    return run_module("karmada_converged", params, tmp_path)


def get(server, kind: str, name: str) -> dict:
    return json.loads(server.kubectl("get", kind, name, "-n", NS, "-o", "json").stdout)


def apply(server, *objs: dict) -> None:
    server.kubectl("apply", "-f", "-", input_text=yaml.safe_dump_all(objs))


def owned() -> list[dict]:
    meta = {"namespace": NS, "labels": LABELS}
    pod = {"metadata": {"labels": {"app": "fast"}}, "spec": {"containers": [{"name": "c", "image": "pause"}]}}
    return [
        {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "fast-scheduler", **meta},
         "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "fast"}}, "template": pod}},
        {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "fast-apiserver", **meta},
         "spec": {"ports": [{"port": 5443}], "selector": {"app": "fast"}}},
        {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "fast-pki", **meta}, "stringData": {"ca.crt": "A"}},
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "fast-etcd-bootstrap", **meta},
         "data": {"ETCD_INITIAL_CLUSTER_STATE": "new"}},
    ]


def ready_status(server) -> None:
    """What a finished full pass leaves: the Deployment's replicas ready, the KarmadaDeployment Ready."""
    dep = get(server, "deployment", "fast-scheduler")
    server.kubectl("patch", "deployment", "fast-scheduler", "-n", NS, "--subresource=status", "--type=merge", "-p",
                   json.dumps({"status": {"observedGeneration": dep["metadata"]["generation"], "replicas": 1,
                                          "readyReplicas": 1, "updatedReplicas": 1}}))
    kd = get(server, "karmadadeployment", "fast")
    server.kubectl("patch", "karmadadeployment", "fast", "-n", NS, "--subresource=status", "--type=merge", "-p",
                   json.dumps({"status": {"observedGeneration": kd["metadata"]["generation"], "conditions": [
                       {"type": "Ready", "status": "True", "reason": "Running", "message": "serving",
                        "lastTransitionTime": "2026-12-02T12:00:00Z"}]}}))


def test_a_recorded_pass_stays_converged_until_an_owned_object_changes(server, tmp_path):
    apply(server, {"apiVersion": "operator.karmada.io/v1alpha1", "kind": "KarmadaDeployment",
                   "metadata": {"name": "fast", "namespace": NS}, "spec": {}}, *owned())
    ready_status(server)
    certs = [{"name": "apiserver", "notAfter": "2099-01-01T00:00:00Z"}]
    first = converged(server, tmp_path, mode="record", cr=get(server, "karmadadeployment", "fast"), certificates=certs,
                      server="https://10.0.0.1:5443")
    assert first["changed"] is True, first
    record = get(server, "karmadadeployment", "fast")["status"]["converged"]
    assert len(record["fingerprint"]) == 64 and record["generation"] == 1
    assert record["renewAt"] == "2098-12-02T00:00:00Z"  # the notAfter less the default 30 days
    # the schema keeps every field the module writes
    assert record["server"] == "https://10.0.0.1:5443" and record["at"].endswith("Z")
    assert converged(server, tmp_path, mode="record", cr=get(server, "karmadadeployment", "fast"),
                     certificates=certs)["changed"] is False

    def check() -> dict:
        return converged(server, tmp_path, mode="check", cr=get(server, "karmadadeployment", "fast"))

    assert check()["converged"] is True, check()
    # metadata churn is not a change
    server.kubectl("annotate", "service", "fast-apiserver", "-n", NS, "touched=1")
    assert check()["converged"] is True

    # a Secret deleted and made again with the same data is another object
    server.kubectl("delete", "secret", "fast-pki", "-n", NS)
    apply(server, owned()[2])
    result = check()
    assert result["converged"] is False and "changed" in result["reason"], result
    converged(server, tmp_path, mode="record", cr=get(server, "karmadadeployment", "fast"), certificates=certs)
    assert check()["converged"] is True

    # a Service's spec edited
    server.kubectl("patch", "service", "fast-apiserver", "-n", NS, "--type=merge",
                   "-p", '{"spec":{"ports":[{"port":6443}]}}')
    assert check()["converged"] is False
    converged(server, tmp_path, mode="record", cr=get(server, "karmadadeployment", "fast"), certificates=certs)

    # a replica not ready
    server.kubectl("patch", "deployment", "fast-scheduler", "-n", NS, "--subresource=status", "--type=merge",
                   "-p", '{"status":{"readyReplicas":0}}')
    result = check()
    assert result["converged"] is False and result["reason"] == "not every replica ready: Deployment fast-scheduler"

    # a spec edit
    ready_status(server)
    assert check()["converged"] is True
    server.kubectl("patch", "karmadadeployment", "fast", "-n", NS, "--type=merge", "-p", '{"spec":{"paused":true}}')
    result = check()
    assert result["converged"] is False and "generation 2 not reconciled" in result["reason"], result
