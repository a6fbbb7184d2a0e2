"""The real ansible-operator runtime runs our watches.yaml, playbooks and status module.

A KarmadaDeployment gets the finalizer and a truthful status written by our own
k8s_status module (conditions with reason, message, observedGeneration); a second
reconcile with nothing new changes nothing; paused is honoured; deletion finalizes.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
import yaml

from support import kube_apiserver, waiting
from support.operator_runtime import OperatorProcess
from support.waiting import condition, crds_established

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def cluster(bin_path, tmp_path_factory):
    work = tmp_path_factory.mktemp("runtime")
    server = kube_apiserver.start(bin_path("etcd"), bin_path("kube-apiserver"), bin_path("kubectl"), work)
    operator = None
    try:
        server.kubectl("apply", "-k", str(ROOT / "config/crd"))
        crds_established(server.kubectl)
        server.kubectl("create", "namespace", "karmada-system")
        operator = OperatorProcess(bin_path("ansible-operator"), server.kubeconfig, work)
        operator.wait_healthy()
        yield server, operator
    finally:
        if operator:
            operator.stop()
        server.stop()


def get(server, kind, name):
    out = server.kubectl("get", kind, name, "-n", "karmada-system", "-o", "json", check=False)
    return json.loads(out.stdout) if out.returncode == 0 else None


def wait_for(predicate, timeout, what, operator):
    return waiting.wait_for(predicate, timeout, what, operator.log_tail)


def ready_condition(obj):
    return condition(obj, "Ready") or None


def test_failed_step_is_reported_then_paused_then_finalized(cluster):
    """External etcd whose TLS Secret is missing: the PKI step runs, the etcd step fails, and
    status says which field is wrong, without the operator crashing; then pause and delete."""
    server, operator = cluster
    sample = yaml.safe_load((ROOT / "config/samples/operator_v1alpha1_karmadadeployment.yaml").read_text())
    sample["spec"]["etcd"] = {"external": {"endpoints": ["https://etcd.example.invalid:2379"],
                                           "tlsSecretRef": {"name": "missing-etcd-tls"}}}
    sample["spec"]["certificates"]["keySize"] = 2048
    server.kubectl("apply", "-f", "-", input_text=yaml.safe_dump(sample))
    obj = wait_for(lambda: (o := get(server, "karmadadeployment", "karmada")) and
                   (c := ready_condition(o)) and c["reason"] == "EtcdNotReady" and o,
                   180, "the EtcdNotReady condition", operator)
    cond = ready_condition(obj)
    assert cond["status"] == "False"
    assert "spec.etcd.external.tlsSecretRef" in cond["message"]
    assert cond["observedGeneration"] == obj["metadata"]["generation"]
    assert obj["status"]["phase"] == "Failed"
    assert "operator.karmada.io/finalizer" in obj["metadata"]["finalizers"]
    assert operator.proc.poll() is None, "the operator must keep running"

    # The certificates step ran before: kubeadm-named material in three Secrets.
    pki = json.loads(server.kubectl("get", "secret", "karmada-pki", "-n", "karmada-system", "-o", "json").stdout)
    for key in ("ca.crt", "ca.key", "apiserver.crt", "apiserver-etcd-client.crt", "front-proxy-ca.crt",
                "front-proxy-client.crt", "sa.key", "sa.pub", "karmada-webhook.crt"):
        assert key in pki["data"], key
    etcd = json.loads(server.kubectl("get", "secret", "karmada-etcd-pki", "-n", "karmada-system",
                                     "-o", "json").stdout)
    assert {"ca.crt", "server.crt", "peer.crt", "healthcheck-client.crt"} <= set(etcd["data"])
    wait_for(lambda: "EtcdNotReady" in server.kubectl(
        "get", "events", "-n", "karmada-system", "--field-selector", "involvedObject.name=karmada,type=Warning",
        "-o", "json").stdout, 60, "a Warning Event", operator)

    # Paused: status says so.
    server.kubectl("patch", "karmadadeployment", "karmada", "-n", "karmada-system", "--type=merge",
                   "-p", '{"spec":{"paused":true}}')
    wait_for(lambda: (c := ready_condition(get(server, "karmadadeployment", "karmada"))) and c["reason"] == "Paused",
             120, "the Paused condition", operator)
    # While paused nothing changes: reconciles triggered now end with the same status.
    paused = get(server, "karmadadeployment", "karmada")["status"]
    server.kubectl("annotate", "karmadadeployment", "karmada", "-n", "karmada-system", "touch=1")
    time.sleep(8)
    assert get(server, "karmadadeployment", "karmada")["status"] == paused

    # Deleting runs the finalizer (deletionPolicy Delete removes the Secrets) and the object goes away.
    server.kubectl("delete", "karmadadeployment", "karmada", "-n", "karmada-system", "--wait=false")
    wait_for(lambda: get(server, "karmadadeployment", "karmada") is None, 180, "deletion", operator)
    assert get(server, "secret", "karmada-pki") is None


# The samples wait for something, and say what: the nightly schedule's first tick; the
# EtcdBackup the restore reads (deleted by the case before).
@pytest.mark.parametrize("kind,reason", [("EtcdBackup", "Scheduled"), ("EtcdRestore", "BackupNotFound")])
def test_backup_and_restore_samples_report_what_they_wait_for(cluster, kind, reason):
    server, operator = cluster
    sample = yaml.safe_load((ROOT / f"config/samples/operator_v1alpha1_{kind.lower()}.yaml").read_text())
    server.kubectl("apply", "-f", "-", input_text=yaml.safe_dump(sample))
    name = sample["metadata"]["name"]
    obj = wait_for(lambda: (o := get(server, kind.lower(), name)) and ready_condition(o) and o, 180,
                   f"{kind} status", operator)
    assert ready_condition(obj)["reason"] == reason
    server.kubectl("delete", kind.lower(), name, "-n", "karmada-system")


def test_unreachable_external_etcd_gives_a_false_condition(cluster):
    """A spec only the operator can judge: the external etcd's TLS Secret is fine but nothing
    answers at its endpoint. EtcdNotReady with the endpoint in the message; the operator lives."""
    import base64

    from karmada_operator.pki import pki

    server, operator = cluster
    files = pki.reconcile_pki({"name": "ext", "namespace": "karmada-system",
                               "certificates": {"keyAlgorithm": "ECDSA", "keySize": 256}}).files
    data = {"ca.crt": files["etcd/ca.crt"], "tls.crt": files["apiserver-etcd-client.crt"],
            "tls.key": files["apiserver-etcd-client.key"]}
    secret = {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "ext-etcd", "namespace": "karmada-system"},
              "data": {k: base64.b64encode(v.encode()).decode() for k, v in data.items()}}
    server.kubectl("apply", "-f", "-", input_text=yaml.safe_dump(secret))
    kd_obj = {"apiVersion": "operator.karmada.io/v1alpha1", "kind": "KarmadaDeployment",
              "metadata": {"name": "ext", "namespace": "karmada-system"},
              "spec": {"etcd": {"external": {"endpoints": ["https://127.0.0.1:1"],
                                             "tlsSecretRef": {"name": "ext-etcd"}}},
                       "certificates": {"keyAlgorithm": "ECDSA", "keySize": 256}}}
    server.kubectl("apply", "-f", "-", input_text=yaml.safe_dump(kd_obj))
    obj = wait_for(lambda: (o := get(server, "karmadadeployment", "ext")) and
                   (c := ready_condition(o)) and c["reason"] == "EtcdNotReady" and o,
                   240, "EtcdNotReady for an unreachable external etcd", operator)
    message = ready_condition(obj)["message"]
    assert "spec.etcd.external.endpoints" in message and "https://127.0.0.1:1" in message
    assert operator.proc.poll() is None
    server.kubectl("delete", "karmadadeployment", "ext", "-n", "karmada-system", "--wait=false")
    wait_for(lambda: get(server, "karmadadeployment", "ext") is None, 180, "deletion", operator)
