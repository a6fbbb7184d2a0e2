"""The pure parts of member join: manifests, the agent's credentials, status."""

from __future__ import annotations

import base64
import datetime as dt

import pytest
import yaml

from karmada_operator.members import join as mj
from karmada_operator.members import plan as km
from karmada_operator.pki import pki


def test_push_cluster_object_carries_the_spec():
    spec = mj.MemberSpec(name="m1", provider="onprem", region="r1", zones=["z1"], labels={"env": "prod"},
                         taints=[{"key": "k", "value": "v", "effect": "NoSchedule"}])
    obj = mj.cluster_object(spec, "https://10.0.0.1:6443", "uid-1", push=True, proxy_url="http://proxy:3128")
    assert obj["metadata"] == {"name": "m1", "labels": {"env": "prod", "app.kubernetes.io/managed-by":
                                                        "karmadadeployment-operator"}}
    assert obj["spec"] == {
        "syncMode": "Push", "apiEndpoint": "https://10.0.0.1:6443", "id": "uid-1", "proxyURL": "http://proxy:3128",
        "secretRef": {"namespace": "karmada-cluster", "name": "m1"},
        "impersonatorSecretRef": {"namespace": "karmada-cluster", "name": "m1-impersonator"},
        "provider": "onprem", "region": "r1", "zones": ["z1"],
        "taints": [{"key": "k", "value": "v", "effect": "NoSchedule"}]}
    # Pull: the agent owns the rest of the Cluster; we keep only labels and taints.
    pull = mj.cluster_object(mj.MemberSpec(name="m2", sync_mode="Pull"), "https://x", push=False)
    assert set(pull["spec"]) == {"taints"}


def test_member_side_objects_and_karmada_secrets_are_named_like_karmadactl():
    kinds = [(o["kind"], o["metadata"]["name"]) for o in mj.member_push_objects("m1")]
    assert kinds[0] == ("Namespace", "karmada-cluster")  # first: everything else lives in it
    assert ("ServiceAccount", "karmada-m1") in kinds and ("ServiceAccount", "karmada-impersonator") in kinds
    assert ("ClusterRoleBinding", "karmada-controller-manager:karmada-m1") in kinds
    tokens = [o for o in mj.member_push_objects("m1") if o["kind"] == "Secret"]
    assert all(t["type"] == "kubernetes.io/service-account-token" for t in tokens)
    secret, imp = mj.karmada_push_secrets("m1", b"CA", b"T1", b"T2")
    assert (secret["metadata"]["name"], imp["metadata"]["name"]) == ("m1", "m1-impersonator")
    assert base64.b64decode(secret["data"]["token"]) == b"T1" and base64.b64decode(imp["data"]["token"]) == b"T2"
    for obj in mj.member_push_objects("m1")[1:] + [secret, imp]:  # the namespace is shared by all members
        assert obj["metadata"]["labels"]["operator.karmada.io/member"] == "m1"


def test_agent_rbac_is_scoped_to_its_own_cluster():
    objs = mj.karmada_agent_rbac("m3")
    role = next(o for o in objs if o["kind"] == "ClusterRole")
    assert role["metadata"]["name"] == "system:karmada:m3:agent"
    own = [r for r in role["rules"] if r.get("resourceNames")]
    assert all(r["resourceNames"] == ["m3"] for r in own)
    bindings = [o for o in objs if o["kind"].endswith("Binding")]
    assert {b["subjects"][0]["name"] for b in bindings} == {"system:karmada:agent:m3"}
    work = next(o for o in objs if o["kind"] == "Role" and o["metadata"]["name"].endswith("-work"))
    assert work["metadata"]["namespace"] == "karmada-es-m3"


def agent(**extra):
    settings = dict(image="docker.io/karmada/karmada-agent:v1.18.2", host_namespace="karmada-system",
                    karmada_server_in_cluster="https://karmada-apiserver.karmada-system.svc.cluster.local:5443",
                    owner={"app.kubernetes.io/instance": "fleet"})
    settings.update(extra)
    return mj.AgentSettings(**settings)


def test_host_placed_agent_reads_the_member_kubeconfig_and_rolls_on_new_credentials():
    spec = mj.MemberSpec(name="m3", sync_mode="Pull", region="r", zones=["a", "b"], agent_placement="Host")
    name = mj.host_agent_name("fleet", "m3")
    dep = mj.agent_deployment(spec, agent(), name, "karmada-system", f"{name}-kubeconfig", "https://m3:6443",
                              True, "hash1")
    pod = dep["spec"]["template"]["spec"]
    args = pod["containers"][0]["command"] + pod["containers"][0].get("args", []) \
        if "command" in pod["containers"][0] else pod["containers"][0]["args"]
    assert "--cluster-name=m3" in args and "--cluster-zones=a,b" in args
    assert "--kubeconfig=/etc/member/kubeconfig" in args
    assert pod["automountServiceAccountToken"] is False and "serviceAccountName" not in pod
    assert dep["spec"]["template"]["metadata"]["annotations"]["operator.karmada.io/config-hash"] == "hash1"
    assert dep["metadata"]["labels"]["app.kubernetes.io/instance"] == "fleet"
    # In the member it uses its own service account instead.
    in_member = mj.agent_deployment(spec, agent(), "karmada-agent", "karmada-system", "karmada-agent-kubeconfig",
                                    "https://m3:6443", False, "hash1")
    assert in_member["spec"]["template"]["spec"]["serviceAccountName"] == "karmada-agent"
    # Pod Security "restricted" in both places (kube/pod_security.py), /tmp writable
    for deployment in (dep, in_member):
        agent_pod = deployment["spec"]["template"]["spec"]
        assert agent_pod["securityContext"]["runAsNonRoot"] is True
        assert agent_pod["securityContext"]["runAsUser"] == 65532
        assert agent_pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
        container = agent_pod["containers"][0]["securityContext"]
        assert container == {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]},
                             "readOnlyRootFilesystem": True}
        assert {"name": "tmp", "mountPath": "/tmp"} in agent_pod["containers"][0]["volumeMounts"]
        # never BestEffort: the requests measured on the test bed
        assert agent_pod["containers"][0]["resources"] == {"requests": {"cpu": "5m", "memory": "24Mi"}}


@pytest.fixture(scope="module")
def karmada_ca():
    key = pki.generate_key(pki.KeyParams("ECDSA", 256))
    now = dt.datetime.now(dt.UTC)
    cert = pki.issue_ca("karmada", key, now, dt.timedelta(days=3650))
    return pki.cert_pem(cert), pki.key_pem(key)


def joiner(ca, name="m3"):
    return mj.Joiner(mj.MemberSpec(name=name, sync_mode="Pull", agent_placement="Host"), clients=None,
                     agent=agent(), ca=ca)


def test_agent_kubeconfig_is_a_client_certificate_for_the_agent_user_and_is_reused(karmada_ca):
    j = joiner(karmada_ca)
    first = j._agent_kubeconfig(None, "https://karmada:5443")
    conf = yaml.safe_load(base64.b64decode(first))
    assert conf["clusters"][0]["cluster"]["server"] == "https://karmada:5443"
    cert = pki.load_cert(base64.b64decode(conf["users"][0]["user"]["client-certificate-data"]))
    assert pki.common_name(cert) == "system:karmada:agent:m3"
    assert "O=system:karmada:agents" in cert.subject.rfc4514_string()
    assert pki.issued_by(cert, pki.load_cert(karmada_ca[0]))
    # Same CA, same server, valid: the same bytes (no change, no agent restart).
    assert j._agent_kubeconfig(first, "https://karmada:5443") == first
    # A new server, another CA or another member: a new credential.
    assert j._agent_kubeconfig(first, "https://other:5443") != first
    other_key = pki.generate_key(pki.KeyParams("ECDSA", 256))
    other_ca = pki.issue_ca("other", other_key, dt.datetime.now(dt.UTC), dt.timedelta(days=10))
    assert joiner((pki.cert_pem(other_ca), pki.key_pem(other_key)))._agent_kubeconfig(
        first, "https://karmada:5443") != first
    assert joiner(karmada_ca, "m4")._agent_kubeconfig(first, "https://karmada:5443") != first
    assert j._agent_kubeconfig("bm90IHlhbWw6IFs=", "https://karmada:5443") != "bm90IHlhbWw6IFs="


def test_members_status_sums_up_results_and_asks_for_retry():
    spec = [{"name": "a", "kubeconfigSecretRef": {"name": "a"}},
            {"name": "b", "kubeconfigSecretRef": {"name": "b"}, "syncMode": "Pull", "agentPlacement": "Host"},
            {"name": "c", "kubeconfigSecretRef": {"name": "c"}}]
    previous = [{"name": "gone", "state": "Joined", "syncMode": "Pull", "agentPlacement": "Host",
                 "kubeconfigSecretRef": {"name": "g", "key": "kubeconfig"}},
                {"name": "left", "state": "Joined"}]
    results = {
        "a": {"state": "Joined", "ready": True, "reason": "ClusterReady", "message": "ok"},
        "b": {"state": "Failed", "ready": False, "reason": "MemberUnreachable", "message": "refused"},
        "gone": {"state": "Unjoining", "reason": "MemberNotCleaned", "message": "member down"},
        "left": {"state": "Unjoined", "reason": "Unjoined", "message": "done"},
    }
    out = km.members_status(spec, previous, results)
    entries = {e["name"]: e for e in out["members"]}
    assert set(entries) == {"a", "b", "c", "gone"}  # "left" finished unjoining and is dropped
    assert entries["a"]["ready"] and entries["a"]["specHash"] == km.member_spec_hash(spec[0])
    assert (entries["b"]["state"], entries["b"]["reason"], entries["b"]["agentPlacement"]) == \
        ("Failed", "MemberUnreachable", "Host")
    assert entries["c"]["state"] == "Pending"  # its host did not run
    assert (entries["gone"]["state"], entries["gone"]["agentPlacement"]) == ("Unjoining", "Host")
    assert out["readyMembers"] == "1/3" and out["retry"]
    cond = out["condition"]
    assert (cond["status"], cond["reason"]) == ("False", "MembersNotReady")
    assert "b: Failed MemberUnreachable: refused" in cond["message"] and "still being removed: gone" in cond["message"]
    # A crashed module has only Ansible's msg.
    crashed = km.members_status(spec[:1], [], {"a": {"msg": "Traceback ..."}})
    assert crashed["members"][0]["reason"] == "OperatorError" and crashed["members"][0]["state"] == "Failed"


def test_members_status_all_ready_and_empty():
    spec = [{"name": "a", "kubeconfigSecretRef": {"name": "a"}}]
    out = km.members_status(spec, [], {"a": {"state": "Joined", "ready": True}})
    assert (out["condition"]["status"], out["condition"]["reason"], out["retry"]) == ("True", "AllMembersReady", False)
    empty = km.members_status([], [], {})
    assert (empty["condition"]["reason"], empty["readyMembers"], empty["retry"]) == ("NoMembers", "0/0", False)


def test_a_member_removed_without_clean_unjoin_is_dropped_but_named_in_the_condition():
    previous = [{"name": "gone", "state": "Failed", "kubeconfigSecretRef": {"name": "missing", "key": "kubeconfig"}}]
    results = {"gone": {"state": "Unjoined", "reason": "MemberNotCleaned",
                        "message": "Secret karmada-system/missing (kubeconfig) does not exist"}}
    out = km.members_status([], previous, results)
    assert out["members"] == [] and not out["retry"]
    assert "removed with a warning: gone (MemberNotCleaned: Secret karmada-system/missing" in \
        out["condition"]["message"]
    clean = km.members_status([], previous, {"gone": {"state": "Unjoined", "reason": "Unjoined", "message": "ok"}})
    assert "removed" not in clean["condition"]["message"]


def _jobs(*names, present=True):
    return [mj.MemberJob(spec=mj.MemberSpec(name=n), present=present, kubeconfig_secret={"name": f"{n}-kc"})
            for n in names]


def test_run_members_works_on_every_member_at_once_and_keys_results_by_name():
    import threading

    barrier = threading.Barrier(3, timeout=5)  # passes only when three members run at the same time

    def run(job, target, host_factory):
        barrier.wait()
        return mj.Result(state="Joined", ready=True, reason="ClusterReady", message=job.spec.name).as_dict()

    target = mj.Target(namespace="ns", karmada_secret="admin")
    results = mj.run_members(_jobs("a", "b", "c"), target, host_factory=None, workers=8, run=run)
    assert list(results) == ["a", "b", "c"]
    assert all(r["state"] == "Joined" and r["message"] == n for n, r in results.items())


def test_run_members_keeps_one_members_crash_to_itself():
    def run(job, target, host_factory):
        if job.spec.name == "bad":
            raise KeyError("spec")
        return mj.Result(state="Joined", ready=True).as_dict()

    target = mj.Target(namespace="ns", karmada_secret="admin")
    joins = mj.run_members(_jobs("good", "bad"), target, host_factory=None, run=run)
    assert joins["good"]["state"] == "Joined"
    assert (joins["bad"]["state"], joins["bad"]["reason"]) == ("Failed", "OperatorError")
    assert "KeyError" in joins["bad"]["message"]
    unjoins = mj.run_members(_jobs("bad", present=False), target, host_factory=None, run=run)
    assert unjoins["bad"]["state"] == "Unjoining"  # an unjoin that crashed is retried, never dropped


def test_run_member_without_host_credentials_is_that_members_failure():
    def no_credentials():
        raise mj.KubeConfigError("no kubeconfig")

    target = mj.Target(namespace="ns", karmada_secret="admin")
    result = mj.run_member(_jobs("m1")[0], target, no_credentials)
    assert (result["state"], result["reason"]) == ("Failed", "HostCredentials")
    assert "no kubeconfig" in result["message"]


def test_waits_poll_quickly_first_then_every_poll_seconds():
    slept = []
    j = mj.Joiner(mj.MemberSpec(name="m1"), clients=None, poll=2, sleep=slept.append)
    answers = iter([None, None, None, None, None, "token"])
    assert j._until(lambda: next(answers), timeout=60) == "token"
    assert slept == [0.25, 0.5, 1.0, 2, 2]


def test_a_wait_that_never_succeeds_returns_the_last_answer_at_its_deadline():
    j = mj.Joiner(mj.MemberSpec(name="m1"), clients=None, poll=0.01, sleep=lambda s: None)
    assert j._until(lambda: None, timeout=0.05) is None


def test_an_api_server_not_reached_is_named_for_the_cluster_it_belongs_to():
    """A call that reached no API server is the member's problem when it was the member's
    (MemberUnreachable), Karmada's otherwise: the 50-member bench had every member "Failed
    KarmadaUnreachable: cannot reach the Kubernetes API at <the member's address>"."""
    from karmada_operator.kube.client import Kube, KubeError

    member = Kube.from_kubeconfig({
        "apiVersion": "v1", "kind": "Config", "current-context": "m",
        "clusters": [{"name": "m", "cluster": {"server": "https://192.0.2.2:16441"}}],
        "users": [{"name": "m", "user": {"token": "t"}}],
        "contexts": [{"name": "m", "context": {"cluster": "m", "user": "m"}}]})
    clients = mj.Clients(host=None, karmada_factory=lambda: None, member_kubeconfig=lambda: {})
    j = mj.Joiner(mj.MemberSpec(name="m1"), clients=clients)
    down = KubeError(0, "Unreachable", "cannot reach the Kubernetes API at https://192.0.2.2:16441: timed out",
                     server="https://192.0.2.2:16441")
    j._record(down, api_state="Failed")
    assert j.result.reason == "KarmadaUnreachable"  # the member's client was never made: not the member's call
    clients._member = member
    j._record(down, api_state="Failed")
    assert (j.result.state, j.result.reason) == ("Failed", "MemberUnreachable")
    j._record(KubeError(0, "Unreachable", "cannot reach the Kubernetes API at https://10.0.0.1:5443: refused",
                        server="https://10.0.0.1:5443"), api_state="Failed")
    assert j.result.reason == "KarmadaUnreachable"
    j._record(KubeError(403, "Forbidden", "no"), api_state="Unjoining")
    assert (j.result.state, j.result.reason) == ("Unjoining", "ApiForbidden")
