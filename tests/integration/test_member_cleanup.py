"""What an unjoin removes from a member, against a real kube-apiserver standing in for it.

The member already has a karmada-system namespace with somebody else's data in it and
somebody else's karmada-agent (the host cluster joined as a member, or a cluster that runs
other things there). Joining must not take that namespace over, and the unjoin must remove
exactly what the operator made: its service accounts, RBAC, tokens and the namespaces it
created, and nothing else.
"""

from __future__ import annotations

import json

import pytest
import yaml

from karmada_operator.kube.client import Kube
from karmada_operator.members import join as mj
from support import kube_apiserver


@pytest.fixture(scope="module")
def member(bin_path, tmp_path_factory):
    server = kube_apiserver.start(bin_path("etcd"), bin_path("kube-apiserver"), bin_path("kubectl"),
                                  tmp_path_factory.mktemp("member-apiserver"))
    client = Kube.from_kubeconfig(yaml.safe_load(server.kubeconfig.read_text()))
    try:
        yield server, client
    finally:
        client.close()
        server.stop()


FOREIGN = """
apiVersion: v1
kind: Namespace
metadata: {name: karmada-system, labels: {team: platform}}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: user-data, namespace: karmada-system}
data: {keep: "me"}
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: karmada-agent, namespace: karmada-system, labels: {owner: another-karmada}}
spec:
  selector: {matchLabels: {app: other-agent}}
  template:
    metadata: {labels: {app: other-agent}}
    spec: {containers: [{name: agent, image: example.test/agent:1}]}
"""


def names(server, *args) -> set[str]:
    out = server.kubectl("get", *args, "-o", "json")
    return {i["metadata"]["name"] for i in json.loads(out.stdout)["items"]}


def test_unjoin_removes_only_what_the_join_made(member):
    server, kube = member
    server.kubectl("apply", "-f", "-", input_text=FOREIGN)
    joiner = mj.Joiner(mj.MemberSpec(name="m1", sync_mode="Pull"), clients=None, wait=1, poll=0.1)

    # what Push and Pull joins put into a member (the agent's kubeconfig Secret with it)
    agent_secret = {"apiVersion": "v1", "kind": "Secret", "type": "Opaque",
                    "metadata": mj._meta("karmada-agent-kubeconfig", "karmada-system", "m1"),
                    "data": {"karmada-kubeconfig": "a2V5"}}
    for obj in [*mj.member_push_objects("m1"), *mj.member_agent_access("m1"), agent_secret]:
        joiner._apply(kube, obj, "member")
    assert "karmada-agent-kubeconfig" in names(server, "secrets", "-n", "karmada-system")
    system = json.loads(server.kubectl("get", "namespace", "karmada-system", "-o", "json").stdout)
    assert system["metadata"]["labels"] == {"team": "platform", "kubernetes.io/metadata.name": "karmada-system"}
    created = json.loads(server.kubectl("get", "namespace", "karmada-cluster", "-o", "json").stdout)
    assert created["metadata"]["labels"]["app.kubernetes.io/managed-by"] == "karmadadeployment-operator"
    assert {"karmada-agent", "karmada-impersonator", "karmada-m1"} <= (
        names(server, "serviceaccounts", "-n", "karmada-system") | names(server, "serviceaccounts", "-n",
                                                                           "karmada-cluster"))

    joiner.clean_member(kube)

    # ours are gone (karmada-cluster is deleted; a bare apiserver has no namespace controller
    # to finish it, so it stays Terminating) ...
    assert "karmada-agent" not in names(server, "serviceaccounts", "-n", "karmada-system")
    # the agent's credentials (Karmada's CA, a client key) do not stay behind in karmada-system
    assert "karmada-agent-kubeconfig" not in names(server, "secrets", "-n", "karmada-system")
    assert not {"karmada-agent", "karmada-controller-manager:karmada-m1"} & names(server, "clusterroles")
    cluster_ns = json.loads(server.kubectl("get", "namespace", "karmada-cluster", "-o", "json",
                                           check=False).stdout or "{}")
    assert not cluster_ns or cluster_ns["status"]["phase"] == "Terminating"
    # ... and what was there before is untouched
    system = json.loads(server.kubectl("get", "namespace", "karmada-system", "-o", "json").stdout)
    assert system["status"]["phase"] == "Active"
    assert "user-data" in names(server, "configmaps", "-n", "karmada-system")
    assert "karmada-agent" in names(server, "deployments", "-n", "karmada-system")
    assert any("deleted" in c for c in joiner.result.changes)


def test_a_pull_agent_keeps_its_work_access_until_its_works_are_withdrawn(member):
    """The server stands in for karmada-apiserver here. When Karmada deletes a Pull member's
    execution namespace, the namespace controller deletes the agent's Role and RoleBinding
    along with the Works; the agent must still be able to remove each Work's finalizer (after
    withdrawing the workload), or every Work and the Cluster wait for the unjoin's timeout."""
    server, _ = member
    server.stand_in_crd("work.karmada.io", "Work", "works")
    karmada = Kube.from_kubeconfig(yaml.safe_load(server.kubeconfig.read_text()))  # discovers the new CRD
    try:
        es = mj.execution_namespace("m3")
        joiner = mj.Joiner(mj.MemberSpec(name="m3", sync_mode="Pull"), clients=None, wait=5, poll=0.1)
        for obj in [mj.namespace(es), *mj.work_access("m3")]:
            joiner._apply(karmada, obj, "karmada")
        server.kubectl("apply", "-f", "-", input_text=yaml.safe_dump(
            {"apiVersion": "work.karmada.io/v1alpha1", "kind": "Work",
             "metadata": {"name": "bookinfo", "namespace": es, "finalizers": ["karmada.io/execution-controller"]}}))
        agent = ("--as", mj.agent_user("m3"), "--as-group", mj.AGENT_GROUP)
        assert names(server, *agent, "works", "-n", es) == {"bookinfo"}

        # Karmada removes the execution namespace; the namespace controller deletes what is in it
        # (a bare apiserver has none: done by hand, as it does it)
        server.kubectl("delete", "namespace", es, "--wait=false")
        server.kubectl("delete", "roles,rolebindings,works", "--all", "-n", es, "--wait=false")
        joiner.release_work_access(karmada, only_when_withdrawn=True)
        assert {"system:karmada:m3:agent-work"} == names(server, "roles", "-n", es)  # a Work is left: held

        # the agent withdraws the workload and lets its Work go: still allowed
        work = json.loads(server.kubectl(*agent, "get", "work", "bookinfo", "-n", es, "-o", "json").stdout)
        assert work["metadata"].get("deletionTimestamp")
        work["metadata"]["finalizers"] = []
        done = server.kubectl(*agent, "replace", "-f", "-", input_text=json.dumps(work), check=False)  # an update
        assert done.returncode == 0, done.stderr
        assert names(server, "works", "-n", es) == set()

        # no Work left: released, and the namespace can finish
        joiner.release_work_access(karmada, only_when_withdrawn=True)
        assert names(server, "roles", "-n", es) == set() and names(server, "rolebindings", "-n", es) == set()
        assert {f"karmada: released {kind} {es}/system:karmada:m3:agent-work" for kind in ("Role", "RoleBinding")} \
            <= set(joiner.result.changes)
    finally:
        karmada.close()
