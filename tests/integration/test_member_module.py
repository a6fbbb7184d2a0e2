"""The karmada_member module through real Ansible against a real kube-apiserver: every member of
one call is worked on in its own thread, and each gets its own outcome.

One kube-apiserver stands in for the host cluster, Karmada (a CRD serves cluster.karmada.io
Clusters, as karmada-aggregated-apiserver would) and the members. It runs no controllers, so a
Push join stops where the member's token controller would issue a token: that is one of the
outcomes checked, next to a missing kubeconfig Secret, a member that does not answer, and an
unjoin that finishes.
"""

from __future__ import annotations

import base64
import json
import time

import pytest
import yaml

from support import kube_apiserver
from support.ansible_adhoc import run_module

NS = "karmada-system"


def secret(name: str, key: str, text: str) -> dict:
    return {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": name, "namespace": NS},
            "data": {key: base64.b64encode(text.encode()).decode()}}


@pytest.fixture(scope="module")
def server(bin_path, tmp_path_factory):
    srv = kube_apiserver.start(bin_path("etcd"), bin_path("kube-apiserver"), bin_path("kubectl"),
                               tmp_path_factory.mktemp("member-module-apiserver"))
    try:
        srv.stand_in_crd("cluster.karmada.io", "Cluster", "clusters", scope="Cluster")
        srv.kubectl("create", "namespace", NS)
        kubeconfig = srv.kubeconfig.read_text()
        down = yaml.safe_load(kubeconfig)
        for cluster in down["clusters"]:
            cluster["cluster"]["server"] = "https://127.0.0.1:9"  # nothing listens there
        objects = [secret("admin", "kubeconfig", kubeconfig), secret("member-kc", "kubeconfig", kubeconfig),
                   secret("down-kc", "kubeconfig", yaml.safe_dump(down)),
                   {"apiVersion": "cluster.karmada.io/v1alpha1", "kind": "Cluster", "metadata": {"name": "leaving"},
                    "spec": {"syncMode": "Push"}}]
        srv.kubectl("apply", "-f", "-", input_text=yaml.safe_dump_all(objects))
        yield srv
    finally:
        srv.stop()


def test_every_member_gets_its_own_outcome_in_one_call(server, tmp_path):
    members = [
        {"name": "leaving", "state": "absent", "kubeconfig_secret": {"name": "member-kc"}},
        {"name": "no-secret", "kubeconfig_secret": {"name": "missing-kc"}},
        {"name": "down", "kubeconfig_secret": {"name": "down-kc"}},
        {"name": "no-token", "kubeconfig_secret": {"name": "member-kc"}},
    ]
    started = time.monotonic()
    result = run_module("karmada_member", {"members": members, "namespace": NS,
                                           "karmada": {"admin_kubeconfig_secret": "admin"},
                                           "wait_timeout": 5, "request_timeout": 5},
                        tmp_path, env={"K8S_AUTH_KUBECONFIG": str(server.kubeconfig)})
    took = time.monotonic() - started
    print(f"\n4 members in one call: {took:.1f} s; "
          f"{ {n: (r['state'], r['reason']) for n, r in result.get('members', {}).items()} }")
    assert not result.get("failed"), result
    out = result["members"]
    assert set(out) == {"leaving", "no-secret", "down", "no-token"}

    # the unjoin finished: the Cluster is gone from "Karmada"
    assert (out["leaving"]["state"], out["leaving"]["reason"]) == ("Unjoined", "Unjoined"), out["leaving"]
    clusters = json.loads(server.kubectl("get", "clusters.cluster.karmada.io", "-o", "json").stdout)["items"]
    assert [c["metadata"]["name"] for c in clusters] == []

    assert (out["no-secret"]["state"], out["no-secret"]["reason"]) == ("Failed", "KubeconfigSecretMissing")
    assert "missing-kc" in out["no-secret"]["message"]
    assert (out["down"]["state"], out["down"]["reason"]) == ("Failed", "MemberUnreachable"), out["down"]
    # the member's objects were made; only the token (no token controller here) is missing
    assert (out["no-token"]["state"], out["no-token"]["reason"]) == ("Failed", "TokenNotIssued"), out["no-token"]
    assert "member: ServiceAccount karmada-cluster/karmada-no-token" in out["no-token"]["changes"]
    assert result["changed"] is True
    # no credentials in what Ansible reports
    text = json.dumps(result)
    assert "BEGIN" not in text and "token:" not in text
