"""karmada_kube against a real kube-apiserver: server-side apply, idempotence, discovery, errors."""

from __future__ import annotations

import base64
import json
from pathlib import Path

import pytest
import yaml

from karmada_operator.kube.client import FIELD_MANAGER, Kube, KubeError
from support import kube_apiserver
from support.waiting import crds_established

NS = "apply-test"


@pytest.fixture(scope="module")
def server(bin_path, tmp_path_factory):
    srv = kube_apiserver.start(bin_path("etcd"), bin_path("kube-apiserver"), bin_path("kubectl"),
                               tmp_path_factory.mktemp("kube-apiserver"))
    try:
        srv.kubectl("create", "namespace", NS)
        yield srv
    finally:
        srv.stop()


@pytest.fixture
def kube(server):
    client = Kube.from_file(str(server.kubeconfig))
    try:
        yield client
    finally:
        client.close()


def rv(obj: dict) -> str:
    return obj["metadata"]["resourceVersion"]


def config_map(**data: str) -> dict:
    return {"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "settings", "namespace": NS, "labels": {"app": "demo"}}, "data": data}


def test_apply_creates_then_reports_no_change_until_a_field_changes(kube, server):
    created, changed = kube.apply(config_map(mode="a"))
    assert changed is True
    assert created["data"] == {"mode": "a"}
    managers = {m["manager"]: m["operation"] for m in created["metadata"]["managedFields"]}
    assert managers == {FIELD_MANAGER: "Apply"}

    again, changed = kube.apply(config_map(mode="a"))
    assert changed is False
    assert rv(again) == rv(created)  # nothing was written

    updated, changed = kube.apply(config_map(mode="b"))
    assert changed is True
    assert rv(updated) != rv(created)
    live = json.loads(server.kubectl("get", "configmap", "settings", "-n", NS, "-o", "json").stdout)
    assert live["data"] == {"mode": "b"}


def test_a_delete_with_a_uid_deletes_only_that_incarnation(kube):
    """The etcd rollout deletes a pod by uid: a pod the StatefulSet made again meanwhile stays."""
    first = kube.create({**config_map(mode="x"), "metadata": {"name": "incarnation", "namespace": NS}})
    assert kube.delete("v1", "ConfigMap", "incarnation", NS, uid=first["metadata"]["uid"]) is True
    second = kube.create({**config_map(mode="y"), "metadata": {"name": "incarnation", "namespace": NS}})
    with pytest.raises(KubeError) as refused:
        kube.delete("v1", "ConfigMap", "incarnation", NS, uid=first["metadata"]["uid"])
    assert refused.value.status == 409 and "the UID in the precondition" in refused.value.message
    assert kube.get("v1", "ConfigMap", "incarnation", NS)["metadata"]["uid"] == second["metadata"]["uid"]
    assert kube.delete("v1", "ConfigMap", "incarnation", NS) is True


def test_apply_leaves_fields_other_writers_own(kube, server):
    """A service-account token Secret: the token controller fills its data; re-applying ours
    (type, labels, annotation) neither removes that data nor counts as a change."""
    secret = {"apiVersion": "v1", "kind": "Secret", "type": "kubernetes.io/service-account-token",
              "metadata": {"name": "sa-token", "namespace": NS, "labels": {"app": "demo"},
                           "annotations": {"kubernetes.io/service-account.name": "sa"}}}
    server.kubectl("create", "serviceaccount", "sa", "-n", NS)
    _, changed = kube.apply(secret)
    assert changed is True
    # what kube-controller-manager's token controller does (this test bed runs none)
    token = base64.b64encode(b"issued-token").decode()
    server.kubectl("patch", "secret", "sa-token", "-n", NS, "--type=merge",
                   "-p", json.dumps({"data": {"token": token, "ca.crt": token}}))
    filled = kube.get("v1", "Secret", "sa-token", NS)

    out, changed = kube.apply(secret)
    assert changed is False
    assert rv(out) == rv(filled)
    assert out["data"] == {"token": token, "ca.crt": token}


def test_a_crd_kind_is_found_by_discovery_right_after_its_crd_is_created(kube, server):
    assert kube.get("v1", "Namespace", NS) is not None  # discovery is read and cached now
    crd = {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
           "metadata": {"name": "works.work.karmada.io"},
           "spec": {"group": "work.karmada.io", "scope": "Namespaced",
                    "names": {"plural": "works", "singular": "work", "kind": "Work", "listKind": "WorkList"},
                    "versions": [{"name": "v1alpha1", "served": True, "storage": True,
                                  "subresources": {"status": {}},
                                  "schema": {"openAPIV3Schema": {"type": "object",
                                                                 "x-kubernetes-preserve-unknown-fields": True}}}]}}
    _, changed = kube.apply(crd)
    assert changed is True
    work = {"apiVersion": "work.karmada.io/v1alpha1", "kind": "Work",
            "metadata": {"name": "w1", "namespace": NS}, "spec": {"workload": {"manifests": []}}}
    created, changed = kube.apply(work)
    assert changed is True and created["kind"] == "Work"
    assert [w["metadata"]["name"] for w in kube.list("work.karmada.io/v1alpha1", "Work", NS)] == ["w1"]
    # status goes through its subresource
    patched = kube.merge_patch("work.karmada.io/v1alpha1", "Work", "w1", {"status": {"phase": "Applied"}}, NS,
                               subresource="status")
    assert patched["status"] == {"phase": "Applied"}
    assert kube.delete("work.karmada.io/v1alpha1", "Work", "w1", NS) is True
    assert kube.get("work.karmada.io/v1alpha1", "Work", "w1", NS) is None


def test_a_kind_the_server_does_not_serve_is_absent(kube):
    kube.discovery_wait = 1
    assert kube.get("nothing.example.com/v1", "Thing", "x") is None
    with pytest.raises(KubeError) as err:
        kube.list("nothing.example.com/v1", "Thing")
    assert err.value.status == 404
    assert kube.delete("nothing.example.com/v1", "Thing", "x") is False


def test_list_follows_pages_and_selects_by_label(kube, server, monkeypatch):
    from karmada_operator.kube import client as karmada_kube

    for i in range(5):
        kube.apply({"apiVersion": "v1", "kind": "ConfigMap",
                    "metadata": {"name": f"page-{i}", "namespace": NS, "labels": {"paged": "yes"}}})
    monkeypatch.setattr(karmada_kube, "PAGE_SIZE", 2)
    names = [c["metadata"]["name"] for c in kube.list("v1", "ConfigMap", NS, label_selector="paged=yes")]
    assert names == [f"page-{i}" for i in range(5)]
    assert len(kube.list("v1", "ConfigMap", None, field_selector="metadata.name=page-3")) == 1


def test_refused_credentials_keep_the_servers_reason(server):
    bad = Kube.from_kubeconfig(server.kubeconfig.read_text().replace(server.token, "wrong"))
    with bad, pytest.raises(KubeError) as err:
        bad.get("v1", "Namespace", NS)
    assert (err.value.status, err.value.message) == (401, "Unauthorized")


def test_unreachable_server_is_status_0_with_a_one_line_reason(server):
    port = kube_apiserver.free_port()
    conf = yaml.safe_load(server.kubeconfig.read_text())
    conf["clusters"][0]["cluster"]["server"] = f"https://127.0.0.1:{port}"
    with Kube.from_kubeconfig(conf, timeout=5) as gone:
        for call in (gone.version, lambda: gone.get("v1", "Namespace", NS), lambda: gone.apply(config_map())):
            with pytest.raises(KubeError) as err:
                call()
            assert (err.value.status, err.value.reason) == (0, "Unreachable")
            assert err.value.message.startswith(f"cannot reach the Kubernetes API at https://127.0.0.1:{port}: ")
            assert "Connection refused" in err.value.message and "\n" not in err.value.message


ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def operator_kube(server, tmp_path_factory):
    """A client that is the operator's ServiceAccount with exactly config/rbac/role.yaml's
    ClusterRole: what the operator may do on a real cluster, not what an admin may."""
    role = yaml.safe_load((ROOT / "config/rbac/role.yaml").read_text())
    role["metadata"] = {"name": "karmada-operator-manager-role"}
    server.kubectl("create", "serviceaccount", "operator", "-n", NS)
    server.kubectl("apply", "-f", "-", input_text=json.dumps(role))
    server.kubectl("create", "clusterrolebinding", "karmada-operator-manager", "--clusterrole",
                   "karmada-operator-manager-role", f"--serviceaccount={NS}:operator")
    token = server.kubectl("create", "token", "operator", "-n", NS, "--duration=1h").stdout.strip()
    config = yaml.safe_load(server.kubeconfig.read_text())
    config["users"][0]["user"] = {"token": token}
    path = tmp_path_factory.mktemp("operator-sa") / "kubeconfig"
    path.write_text(yaml.safe_dump(config))
    path.chmod(0o600)
    client = Kube.from_file(str(path))
    try:
        yield client
    finally:
        client.close()


def test_restore_leaves_what_it_creates_unowned(kube, operator_kube):
    """ansible-operator's proxy gives what a run creates an ownerReference to the EtcdRestore
    (simulated here: the objects are created with it): the restore takes it off, on the first
    pass (create) and on later ones (the object exists), so deleting the restore never
    garbage-collects the restored Karmada's volumes or CA. It runs as the operator's
    ServiceAccount with the operator's ClusterRole (a missing verb there once stopped every
    restore on the test bed); ``kube`` (admin) plays the proxy."""
    from karmada_operator.backup.restore_controller import RestoreReconciler

    restore = {"apiVersion": "operator.karmada.io/v1alpha1", "kind": "EtcdRestore",
               "metadata": {"name": "move", "namespace": NS, "uid": "0b0c4b8e-1111-4222-8333-944455556666"}}
    owner = {"apiVersion": "operator.karmada.io/v1alpha1", "kind": "EtcdRestore", "name": "move",
             "uid": restore["metadata"]["uid"]}
    other = {"apiVersion": "v1", "kind": "ConfigMap", "name": "keeper", "uid": "0b0c4b8e-2222-4222-8333-944455556666"}
    reconciler = RestoreReconciler(operator_kube, restore, image="unused")
    secret = {"apiVersion": "v1", "kind": "Secret", "type": "Opaque",
              "metadata": {"name": "vault2-pki", "namespace": NS, "ownerReferences": [owner, other]},
              "data": {"ca.crt": base64.b64encode(b"ca").decode()}}
    pvc = {"apiVersion": "v1", "kind": "PersistentVolumeClaim",
           "metadata": {"name": "data-vault2-etcd-0", "namespace": NS, "ownerReferences": [owner, other]},
           "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}}
    for obj in (secret, pvc):
        api, kind, name = obj["apiVersion"], obj["kind"], obj["metadata"]["name"]
        reconciler._create_unowned(obj)  # created (owned, as through the proxy), then disowned
        got = kube.get(api, kind, name, NS)
        assert [o["kind"] for o in got["metadata"]["ownerReferences"]] == ["ConfigMap"], kind  # others' stay
        kube.merge_patch(api, kind, name, {"metadata": {"ownerReferences": [owner]}}, NS)
        reconciler._create_unowned(obj)  # exists (409): disowned again
        assert not kube.get(api, kind, name, NS)["metadata"].get("ownerReferences"), kind
        kube.merge_patch(api, kind, name, {"metadata": {"ownerReferences": [owner]}}, NS)
        reconciler._disown(api, kind, kube.get(api, kind, name, NS))  # the existing-object path
        assert not kube.get(api, kind, name, NS)["metadata"].get("ownerReferences"), kind


def test_a_failed_restore_wakes_the_karmada_that_waits_for_it(kube, operator_kube, server):
    """A KarmadaDeployment waiting for its restore mirrors the restore's state when it
    reconciles; a failed restore annotates it (the runtime watches annotation changes) so its
    status names the failure. One that already has an etcd is not touched. As the operator's
    ServiceAccount, on the real CRD."""
    from karmada_operator.backup.restore import ANN_FAILED
    from karmada_operator.backup.restore_controller import RestoreReconciler

    server.kubectl("apply", "-f", str(ROOT / "config/crd/bases/operator.karmada.io_karmadadeployments.yaml"))
    crds_established(server.kubectl, ["karmadadeployments.operator.karmada.io"])
    sample = yaml.safe_load((ROOT / "config/samples/operator_v1alpha1_karmadadeployment.yaml").read_text())
    restore = {"apiVersion": "operator.karmada.io/v1alpha1", "kind": "EtcdRestore",
               "metadata": {"name": "flipped", "namespace": NS, "uid": "0b0c4b8e-3333-4222-8333-944455556666"}}
    reconciler = RestoreReconciler(operator_kube, restore, image="unused")
    for name, status in (("waiting", None), ("running", {"conditions": [
            {"type": "EtcdReady", "status": "True", "reason": "Healthy", "message": "1/1",
             "lastTransitionTime": "2026-12-02T00:00:00Z"}]})):
        kd = {**sample, "metadata": {"name": name, "namespace": NS}}
        kube.create(kd)
        if status:
            kube.merge_patch("operator.karmada.io/v1alpha1", "KarmadaDeployment", name, {"status": status}, NS,
                             subresource="status")
        reconciler._tell_target(kube.get("operator.karmada.io/v1alpha1", "KarmadaDeployment", name, NS),
                                "IntegrityCheckFailed")
    waiting = kube.get("operator.karmada.io/v1alpha1", "KarmadaDeployment", "waiting", NS)
    assert waiting["metadata"]["annotations"][ANN_FAILED].startswith("flipped@")
    assert waiting["metadata"]["annotations"][ANN_FAILED].endswith(": IntegrityCheckFailed")
    running = kube.get("operator.karmada.io/v1alpha1", "KarmadaDeployment", "running", NS)
    assert ANN_FAILED not in (running["metadata"].get("annotations") or {})
