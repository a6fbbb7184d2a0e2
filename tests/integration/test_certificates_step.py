"""The certificates step of a pass (karmada_pki with ``plan``) against a real kube-apiserver.

It reads the stored Secrets and a bring-your-own CA itself, writes the three Secrets and the
users' admin kubeconfig, returns no key (only the public CA certificates), drops the keys of a
component switched off, writes nothing on a second run, and decides whether
karmada-apiserver restarts for its certificates now or after the components (from the
Deployment running). Read back from the API server, through real ansible.
"""

from __future__ import annotations

import base64
import copy
import json
from pathlib import Path

import pytest
import yaml

from karmada_operator.pki import volume_refresh
from karmada_operator.plan import plan as kp
from support import kube_apiserver
from support.ansible_adhoc import run_module

ROOT = Path(__file__).resolve().parents[2]
NS = "karmada-system"
SECRETS = ("karmada-pki", "karmada-etcd-pki", "karmada-kubeconfigs")
ADMIN = "karmada-admin-kubeconfig"


@pytest.fixture(scope="module")
def server(bin_path, tmp_path_factory):
    srv = kube_apiserver.start(bin_path("etcd"), bin_path("kube-apiserver"), bin_path("kubectl"),
                               tmp_path_factory.mktemp("pki-step-apiserver"))
    try:
        srv.kubectl("create", "namespace", NS)
        yield srv
    finally:
        srv.stop()


def sample(**components) -> dict:
    cr = yaml.safe_load((ROOT / "config/samples/operator_v1alpha1_karmadadeployment.yaml").read_text())
    cr["metadata"].update({"namespace": NS, "uid": "u-1"})
    for key, on in components.items():
        cr["spec"].setdefault("components", {})[key] = {"enabled": on}
    return cr


def step(server, tmp_path, cr: dict, **extra) -> dict:
    plan = kp.build_plan(cr)
    return run_module("karmada_pki", {"plan": plan, "kubeconfig": str(server.kubeconfig), **extra}, tmp_path)


def secret(server, name: str) -> dict:
    return yaml.safe_load(server.kubectl("get", "secret", "-n", NS, name, "-o", "yaml").stdout)


def test_the_step_stores_its_secrets_keeps_them_and_drops_what_is_no_longer_issued(server, tmp_path):
    plan = kp.build_plan(sample(search=True))
    assert tuple(plan["names"][k] for k in ("pkiSecret", "etcdPkiSecret", "kubeconfigSecret")) == SECRETS
    first = step(server, tmp_path, sample(search=True))
    assert first.get("failed") is not True, first.get("msg")
    assert first["changed"] is True and first["written"] == [*SECRETS, ADMIN]
    stored = {name: secret(server, name) for name in (*SECRETS, ADMIN)}
    for name in (*SECRETS, ADMIN):
        assert stored[name]["metadata"]["labels"] == plan["labels"]
    pki = {k: base64.b64decode(v).decode() for k, v in stored["karmada-pki"]["data"].items()}
    assert "karmada-search.crt" in pki
    # the answer holds no key: only the CA certificates later steps publish, as stored
    assert "PRIVATE KEY" not in json.dumps(first) and "files" not in first
    assert first["caBundle"] == {"ca.crt": pki["ca.crt"], "front-proxy-ca.crt": pki["front-proxy-ca.crt"]}
    # the users' admin kubeconfig is the admin.conf stored with the component kubeconfigs
    admin = base64.b64decode(stored[ADMIN]["data"]["kubeconfig"]).decode()
    assert admin == base64.b64decode(stored["karmada-kubeconfigs"]["data"]["admin.conf"]).decode()
    assert yaml.safe_load(admin)["clusters"][0]["cluster"]["server"] == plan["endpoints"]["kubeconfigServer"]
    # the hashes the pods get, one per enabled component; no rotation: no rotation status
    assert set(first["hashes"]["components"]) == {c["component"] for c in plan["components"] if c["enabled"]}
    assert first["caRotation"] == {}

    again = step(server, tmp_path, sample(search=True))
    assert again["changed"] is False and again["written"] == []
    assert again["hashes"] == first["hashes"]
    assert {n: secret(server, n)["metadata"]["resourceVersion"] for n in (*SECRETS, ADMIN)} == {
        n: stored[n]["metadata"]["resourceVersion"] for n in (*SECRETS, ADMIN)}

    off = step(server, tmp_path, sample(search=False))
    assert "karmada-pki" in off["written"]
    left = secret(server, "karmada-pki")["data"]
    assert "karmada-search.crt" not in left and "ca.crt" in left
    assert base64.b64decode(left["ca.crt"]).decode() == pki["ca.crt"]  # the CA is kept
    assert "karmada-search" not in off["hashes"]["components"]


def test_karmada_apiserver_restarts_last_when_only_its_certificates_changed(server, tmp_path):
    cr = sample()
    first = step(server, tmp_path, cr)
    restart = first["hashes"]["apiserverRestart"]
    assert restart == {"now": first["hashes"]["apiserver"], "later": ""}  # nothing running yet
    plan = kp.build_plan(cr)
    running = {"apiVersion": "apps/v1", "kind": "Deployment",
               "metadata": {"name": plan["apiserver"]["name"], "namespace": NS,
                            "annotations": {"operator.karmada.io/spec-hash": first["hashes"]["apiserverSpec"]}},
               "spec": {"selector": {"matchLabels": {"a": "b"}}, "template": {
                   "metadata": {"labels": {"a": "b"}, "annotations": {"operator.karmada.io/pki-hash": "older"}},
                   "spec": {"containers": [{"name": "c", "image": "x"}]}}}}
    path = tmp_path / "deploy.yaml"
    path.write_text(yaml.safe_dump(running))
    server.kubectl("apply", "-f", str(path))
    later = step(server, tmp_path, cr)["hashes"]["apiserverRestart"]
    assert later == {"now": "older", "later": first["hashes"]["apiserver"]}
    # a spec change (here: the spec hash the Deployment carries differs) rolls it now
    changed = copy.deepcopy(running)
    changed["metadata"]["annotations"]["operator.karmada.io/spec-hash"] = "another"
    path.write_text(yaml.safe_dump(changed))
    server.kubectl("apply", "-f", str(path))
    assert step(server, tmp_path, cr)["hashes"]["apiserverRestart"]["later"] == ""


def test_a_missing_bring_your_own_ca_fails_naming_the_field_and_writes_nothing(server, tmp_path):
    cr = sample()
    cr["metadata"]["name"] = "byo"
    cr["spec"].setdefault("certificates", {})["caSecretRef"] = {"name": "no-such-ca"}
    out = step(server, tmp_path, cr)
    assert out["failed"] is True
    assert out["field"] == "spec.certificates.caSecretRef"
    assert "Secret no-such-ca not found" in out["msg"]
    names = server.kubectl("get", "secret", "-n", NS, "-o", "name").stdout
    assert "byo-pki" not in names


def test_the_operators_kubeconfig_goes_from_its_secret_to_a_private_file(server, tmp_path):
    """apiserver_connect: karmada_private_file with kubeconfig_from reads admin.conf from the
    kubeconfigs Secret the step wrote and writes it pointed at the address the operator dials,
    0600, with nothing of it in the task's answer."""
    assert step(server, tmp_path, sample()).get("failed") is not True
    stored = base64.b64decode(secret(server, "karmada-kubeconfigs")["data"]["admin.conf"]).decode()
    path = tmp_path / "work" / "u-1" / "admin.conf"
    source = {"namespace": NS, "name": "karmada-kubeconfigs", "key": "admin.conf",
              "server": "https://10.96.0.20:5443", "tls_server_name": "karmada-apiserver.karmada-system.svc"}
    wrote = run_module("karmada_private_file", {"path": str(path), "kubeconfig_from": source,
                                                "kubeconfig": str(server.kubeconfig)}, tmp_path)
    assert wrote.get("failed") is not True, wrote.get("msg")
    written = yaml.safe_load(path.read_text())
    assert written["clusters"][0]["cluster"]["server"] == "https://10.96.0.20:5443"
    assert written["clusters"][0]["cluster"]["tls-server-name"] == "karmada-apiserver.karmada-system.svc"
    assert written["users"] == yaml.safe_load(stored)["users"]  # the admin's own credentials
    assert oct(path.stat().st_mode & 0o777) == "0o600"
    key = written["users"][0]["user"]["client-key-data"]
    assert key not in json.dumps(wrote)
    missing = run_module("karmada_private_file", {"path": str(path), "kubeconfig": str(server.kubeconfig),
                                                  "kubeconfig_from": {**source, "key": "nope.conf"}}, tmp_path)
    assert missing["failed"] is True and "has no key nope.conf" in missing["msg"]


def test_running_apiserver_and_etcd_pods_are_annotated_when_their_secret_changes(server, tmp_path):
    """A Secret write makes the kubelet sync the pods that read it from disk at once: the step
    annotates the running karmada-apiserver and etcd pods (pki/volume_refresh.py), once."""
    cr = sample()
    step(server, tmp_path, cr)
    plan = kp.build_plan(cr)
    # no controller-manager here makes the namespace's default ServiceAccount a pod needs
    server.kubectl("create", "serviceaccount", "default", "-n", NS)
    for name, selector in (("api-a", plan["apiserver"]["pod"]["selector"]),
                           ("etcd-a", plan["etcd"]["pod"]["selector"])):
        pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": NS,
                                                             "labels": {**plan["labels"], **selector}},
               "spec": {"containers": [{"name": "c", "image": "x"}]}}
        (tmp_path / "pod.yaml").write_text(yaml.safe_dump(pod))
        server.kubectl("apply", "-f", str(tmp_path / "pod.yaml"))

    def annotations(name):
        return (yaml.safe_load(server.kubectl("get", "pod", "-n", NS, name, "-o", "yaml").stdout)["metadata"]
                .get("annotations") or {})

    # a pod with the same selector but not this KarmadaDeployment's (no label naming its UID)
    other = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "api-other", "namespace": NS,
                                                            "labels": plan["apiserver"]["pod"]["selector"]},
             "spec": {"containers": [{"name": "c", "image": "x"}]}}
    (tmp_path / "pod.yaml").write_text(yaml.safe_dump(other))
    server.kubectl("apply", "-f", str(tmp_path / "pod.yaml"))
    # nothing written: no pod touched
    assert step(server, tmp_path, cr)["refreshed"] == []
    assert "operator.karmada.io/pki-mounted" not in annotations("api-a")
    # a new address for karmada-apiserver's certificate: its Secret is written, its pod annotated
    cr["spec"].setdefault("apiServer", {})["externalLoadBalancer"] = {"addresses": ["192.0.2.9"], "port": 443}
    moved = step(server, tmp_path, cr)
    assert "karmada-pki" in moved["written"] and moved["refreshed"] == ["api-a"], moved["refreshed"]
    pki = {k: base64.b64decode(v).decode() for k, v in secret(server, "karmada-pki")["data"].items()}
    assert annotations("api-a")["operator.karmada.io/pki-mounted"] == volume_refresh.mounted_hash(
        pki, plan["apiserver"]["pkiFiles"])
    assert "operator.karmada.io/pki-mounted" not in annotations("etcd-a")  # its Secret did not change
    assert "operator.karmada.io/pki-mounted" not in annotations("api-other")  # not ours
    # every etcd leaf renewed: the etcd pod too
    renewed = step(server, tmp_path, cr, **{"plan": {**kp.build_plan(cr), "pki": {
        **kp.build_plan(cr)["pki"], "force_renew": ["etcd/server", "etcd/peer"]}}})
    assert "karmada-etcd-pki" in renewed["written"] and "etcd-a" in renewed["refreshed"], renewed["refreshed"]
    assert step(server, tmp_path, cr)["refreshed"] == []
