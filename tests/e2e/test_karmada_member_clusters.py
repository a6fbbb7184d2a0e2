"""Issue 7: member clusters join and leave Karmada through KarmadaDeployment.spec.members.

The real ansible-operator (our watches.yaml, config/rbac's ServiceAccount) installs a small
Karmada (one etcd member) named ``fleet`` on the host cluster, with three kwok member
clusters from the test bed: member1 and member2 Push, member3 Pull with its karmada-agent
in the host cluster (kwok nodes cannot run pods). The tests run in file order on one
deployment and each leaves all three members joined. Before the deletion, Karmada's own e2e
suite runs on it (tests/support/karmada_suite.py).
"""

from __future__ import annotations

import os
import signal
import time

import pytest
import yaml

from support import karmada_e2e, karmada_suite
from support.karmada_crds_server import serve
from support.karmada_e2e import BOOKINFO, Deployment, bookinfo, bookinfo_running, operator_kubeconfig, recaps
from support.operator_runtime import OperatorProcess
from support.testenv import HostCluster, MemberCluster, settings
from support.waiting import condition, crds_established

pytestmark = pytest.mark.e2e

NS = "karmada-system"
NAME = "fleet"
MEMBERS = [
    {"name": "member1", "kubeconfigSecretRef": {"name": "member1-kubeconfig"}, "syncMode": "Push",
     "provider": "onprem", "region": "cn-east", "zones": ["az1"], "labels": {"env": "prod"}},
    {"name": "member2", "kubeconfigSecretRef": {"name": "member2-kubeconfig"}, "syncMode": "Push",
     "region": "cn-east"},
    {"name": "member3", "kubeconfigSecretRef": {"name": "member3-kubeconfig", "key": "kubeconfig"},
     "syncMode": "Pull", "agentPlacement": "Host", "region": "cn-north",
     "taints": [{"key": "dedicated", "value": "batch", "effect": "NoSchedule"}]},
]


def spec_members(*names: str) -> list[dict]:
    return [m for m in MEMBERS if m["name"] in names]


def set_members(fleet: Deployment, *names: str) -> None:
    patch = {"spec": {"members": spec_members(*names)}}
    fleet.host.kubectl("patch", "karmadadeployment", NAME, "-n", NS, "--type=merge", "-p", yaml.safe_dump(patch))


def member_states(fleet: Deployment) -> dict[str, tuple[str, str]]:
    return {m["name"]: (m["state"], m.get("reason", "")) for m in fleet.get().get("status", {}).get("members", [])}


def all_joined(fleet: Deployment, *names: str) -> bool:
    obj = fleet.get()
    status = obj.get("status", {})
    joined = {m["name"] for m in status.get("members", []) if m["state"] == "Joined" and m["ready"]}
    return (joined == set(names) and len(status.get("members", [])) == len(names)
            and condition(obj, "MembersReady").get("status") == "True"
            and condition(obj, "MembersReady").get("observedGeneration") == obj["metadata"]["generation"])


def clusters(fleet: Deployment) -> dict[str, dict]:
    items = yaml.safe_load(fleet.karmadactl("get", "clusters", "-o", "yaml").stdout)["items"]
    return {c["metadata"]["name"]: c for c in items}


def by_name(members: list[MemberCluster]) -> dict[str, MemberCluster]:
    return {m.name: m for m in members}


@pytest.fixture(scope="module")
def fleet(host_cluster: HostCluster, member_clusters: list[MemberCluster], bin_path, tmp_path_factory):
    assert len(member_clusters) >= 3, "set KO_TESTENV_MEMBERS to 3 or more"
    work = tmp_path_factory.mktemp("members")
    crds = serve()
    host_cluster.kubectl("apply", "-k", str(karmada_e2e.ROOT / "config/crd"))
    crds_established(host_cluster.kubectl, ["karmadadeployments.operator.karmada.io"])
    host_cluster.kubectl("create", "namespace", NS, check=False)
    operator = OperatorProcess(bin_path("ansible-operator"), operator_kubeconfig(host_cluster, work), work)
    # Torn down even when the setup fails: a leftover operator would reconcile the next module's
    # Karmada too (two operators issuing two CAs for one etcd).
    try:
        operator.wait_healthy()
        cr = karmada_e2e.sample()
        cr["metadata"]["name"] = NAME
        spec = cr["spec"]
        spec["crds"] = {"url": crds.url, "sha256": crds.sha256}
        spec["etcd"]["local"] = {"replicas": 1, "storage": {"type": "EmptyDir"}}
        spec["apiServer"] = {"replicas": 1, "serviceType": "ClusterIP"}
        spec["certificates"] = {"keyAlgorithm": "ECDSA"}
        spec["members"] = MEMBERS
        fleet = Deployment(host_cluster, operator, work, NAME, NS)
        start = time.monotonic()
        host_cluster.kubectl("apply", "-f", "-", input=yaml.safe_dump(cr))
        fleet.wait_for(lambda: all_joined(fleet, "member1", "member2", "member3"), 1500,
                       "Ready with 3 members joined")
        print(f"\napply-to-3-members-joined: {time.monotonic() - start:.0f}s")
        yield fleet
    finally:
        karmada_e2e.delete_karmada(host_cluster, NS, NAME)
        operator.stop()
        crds.stop()


def test_three_members_join_and_turn_ready(fleet: Deployment):
    obj = fleet.get()
    assert condition(obj, "Ready")["status"] == "True"
    assert obj["status"]["readyMembers"] == "3/3"
    entries = {m["name"]: m for m in obj["status"]["members"]}
    assert {n: (e["state"], e["syncMode"]) for n, e in entries.items()} == {
        "member1": ("Joined", "Push"), "member2": ("Joined", "Push"), "member3": ("Joined", "Pull")}
    assert entries["member3"]["agentPlacement"] == "Host"

    found = clusters(fleet)
    assert set(found) == {"member1", "member2", "member3"}
    for name, cluster in found.items():
        ready = [c for c in cluster["status"]["conditions"] if c["type"] == "Ready"]
        assert ready and ready[0]["status"] == "True", name
    m1, m3 = found["member1"], found["member3"]
    assert (m1["spec"]["syncMode"], m1["spec"]["provider"], m1["spec"]["region"], m1["spec"]["zones"]) == \
        ("Push", "onprem", "cn-east", ["az1"])
    assert m1["metadata"]["labels"]["env"] == "prod"
    assert m1["spec"]["impersonatorSecretRef"]["name"] == "member1-impersonator"
    assert m3["spec"]["syncMode"] == "Pull"
    assert m3["spec"]["taints"] == [{"key": "dedicated", "value": "batch", "effect": "NoSchedule"}]
    # The Pull member's agent runs next to Karmada, as agentPlacement Host asks.
    agent = fleet.host.get("deployment", f"{NAME}-agent-member3", "-n", NS)
    assert agent["status"].get("readyReplicas") == 1


def test_second_reconcile_changes_nothing_on_any_member(fleet: Deployment):
    time.sleep(15)  # let runs started by the join settle
    before = {d.name for d in fleet.runs()}
    # a full pass (operator.karmada.io/full-pass; touching an owned object would take the fast
    # path, which runs no member play): every member play runs and changes nothing
    fleet.host.kubectl("annotate", "karmadadeployment", NAME, "-n", NS,
                       f"operator.karmada.io/full-pass={time.time()}", "--overwrite")
    # the run that answered the annotation (a fast-path run may follow it: the full pass writes status)
    run = fleet.wait_for(lambda: next((d for d in fleet.runs() if d.name not in before and "full pass was asked for"
                                       in (karmada_e2e.fast_path(d).get("reason") or "")), None),
                         600, "a reconcile run for the full-pass annotation")
    stats, joins = recaps(run), karmada_e2e.member_results(run)
    print(f"\nno-op reconcile with 3 members: {stats}; members: "
          f"{ {n: (r['state'], r['changed'], r['changes']) for n, r in joins.items()} }")
    assert set(stats) == {"localhost"}  # every member in one task, a thread each
    assert stats["localhost"]["changed"] == 0 and stats["localhost"]["failed"] == 0, stats
    assert set(joins) == {"member1", "member2", "member3"}
    for name, result in joins.items():
        assert result["state"] == "Joined" and result["ready"] and not result["changed"], (name, result)
        assert result["changes"] == [], (name, result)
    assert karmada_e2e.fast_path(run)["converged"] is False

    # The fast path: an owned object touched, the run ends after its check, which read every
    # member's Cluster Ready through karmada-apiserver.
    time.sleep(5)
    before = {d.name for d in fleet.runs()}
    fleet.host.kubectl("annotate", "service", f"{NAME}-apiserver", "-n", NS, f"e2e/touch={time.time()}",
                       "--overwrite")
    new = fleet.wait_for(lambda: [d for d in fleet.runs() if d.name not in before], 600, "a new reconcile run")
    fast = karmada_e2e.fast_path(new[0])  # the first run after the touch
    print(f"fast path with 3 members: {recaps(new[0])}, {fast}")
    assert fast["converged"] is True, fast
    assert all(c["changed"] == 0 and c["failed"] == 0 for c in recaps(new[0]).values())


def bookinfo_absent(member: MemberCluster) -> bool:
    out = member.kubectl("get", "deployments,services", "-n", "bookinfo", "-o", "name", check=False)
    return out.returncode == 0 and not out.stdout.strip() or "NotFound" in out.stderr


def test_bookinfo_reaches_the_targeted_members(fleet: Deployment, member_clusters: list[MemberCluster]):
    members = by_name(member_clusters)
    fleet.karmadactl("apply", "-f", "-", input=yaml.safe_dump_all(bookinfo()))
    fleet.wait_for(lambda: bookinfo_running(members["member1"]) and bookinfo_running(members["member3"]), 300,
                   "bookinfo Running in member1 and member3")
    services = members["member3"].get("services", "-n", "bookinfo")["items"]
    assert {s["metadata"]["name"] for s in services} == {app for app, _ in BOOKINFO}
    assert bookinfo_absent(members["member2"]), "member2 is not targeted"


def test_removed_member_is_unjoined_and_rejoins(fleet: Deployment, member_clusters: list[MemberCluster]):
    member1 = by_name(member_clusters)["member1"]
    set_members(fleet, "member2", "member3")
    fleet.wait_for(lambda: all_joined(fleet, "member2", "member3"), 600, "member1 unjoined")
    assert "member1" not in clusters(fleet)
    fleet.wait_for(lambda: bookinfo_absent(member1), 120, "bookinfo gone from member1")
    # The member side of the join is cleaned too.
    assert member1.kubectl("get", "namespace", "karmada-cluster", check=False).returncode != 0 or \
        member1.get("namespace", "karmada-cluster")["status"]["phase"] == "Terminating"
    assert member1.kubectl("get", "clusterrole", "karmada-controller-manager:karmada-member1",
                           check=False).returncode != 0

    set_members(fleet, "member1", "member2", "member3")
    fleet.wait_for(lambda: all_joined(fleet, "member1", "member2", "member3"), 600, "member1 joined again")
    fleet.wait_for(lambda: bookinfo_running(member1), 300, "bookinfo back in member1")


def stop_apiserver(member: MemberCluster) -> None:
    pid_file = f"{settings()['KO_RUN']}/pids/{member.name}-apiserver.pid"
    with open(pid_file) as fh:
        pid = int(fh.read().strip())
    os.kill(pid, signal.SIGTERM)
    # kube-apiserver drains for a while; the test bed restarts it only once it is gone.
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        try:
            with open(f"/proc/{pid}/stat") as fh:
                if fh.read().rsplit(")", 1)[1].split()[0] == "Z":
                    break
        except OSError:
            break
        time.sleep(1)
    else:
        raise AssertionError(f"{member.name}'s kube-apiserver (pid {pid}) did not stop")


def test_member_down_during_join_leaves_others_and_joins_when_back(
    fleet: Deployment, host_cluster: HostCluster, member_clusters: list[MemberCluster]
):
    members = by_name(member_clusters)
    set_members(fleet, "member1", "member3")
    fleet.wait_for(lambda: all_joined(fleet, "member1", "member3"), 600, "member2 unjoined")
    stop_apiserver(members["member2"])
    set_members(fleet, "member1", "member2", "member3")

    def member2_failed():
        return member_states(fleet).get("member2", ("", ""))[0] == "Failed"

    fleet.wait_for(member2_failed, 600, "member2's failure in status")
    obj = fleet.get()
    states = member_states(fleet)
    assert states["member2"] == ("Failed", "MemberUnreachable")
    assert states["member1"] == ("Joined", "ClusterReady") and states["member3"] == ("Joined", "ClusterReady")
    members_ready = condition(obj, "MembersReady")
    assert members_ready["status"] == "False" and "member2" in members_ready["message"]
    assert obj["status"]["readyMembers"] == "2/3"
    assert condition(obj, "Ready")["status"] == "True", "the control plane is fine"
    assert bookinfo_running(members["member1"]) and bookinfo_running(members["member3"])

    host_cluster.script("members.sh", str(len(member_clusters)), str(member_clusters[0].nodes))
    fleet.wait_for(lambda: all_joined(fleet, "member1", "member2", "member3"), 900, "member2 joined once back")


def test_bad_members_are_reported_while_the_others_stay_joined(fleet: Deployment):
    """A member whose kubeconfig Secret is missing and one whose kubeconfig is garbage: each
    gets its reason in status, the three good members stay joined, and both can be removed."""
    fleet.host.kubectl("create", "secret", "generic", "broken-kubeconfig", "-n", NS,
                       "--from-literal=kubeconfig=not: [a kubeconfig", check=False)
    bad = [{"name": "ghost", "kubeconfigSecretRef": {"name": "ghost-kubeconfig"}},
           {"name": "broken", "kubeconfigSecretRef": {"name": "broken-kubeconfig"}}]
    patch = {"spec": {"members": MEMBERS + bad}}
    fleet.host.kubectl("patch", "karmadadeployment", NAME, "-n", NS, "--type=merge", "-p", yaml.safe_dump(patch))

    def reported():
        states = member_states(fleet)
        return states.get("ghost", ("",))[0] == "Failed" and states.get("broken", ("",))[0] == "Failed" and states

    states = fleet.wait_for(reported, 600, "both bad members reported")
    assert states["ghost"] == ("Failed", "KubeconfigSecretMissing")
    assert states["broken"] == ("Failed", "InvalidKubeconfig")
    assert all(states[m] == ("Joined", "ClusterReady") for m in ("member1", "member2", "member3"))
    obj = fleet.get()
    assert obj["status"]["readyMembers"] == "3/5"
    message = condition(obj, "MembersReady")["message"]
    assert "ghost: Failed KubeconfigSecretMissing" in message and "broken: Failed InvalidKubeconfig" in message
    assert set(clusters(fleet)) == {"member1", "member2", "member3"}

    set_members(fleet, "member1", "member2", "member3")
    fleet.wait_for(lambda: all_joined(fleet, "member1", "member2", "member3"), 600, "the bad members removed")
    fleet.host.kubectl("delete", "secret", "broken-kubeconfig", "-n", NS, check=False)


def set_optional(fleet: Deployment, enabled: bool) -> None:
    patch = {"spec": {"components": {"search": {"enabled": enabled}, "metricsAdapter": {"enabled": enabled}}}}
    fleet.host.kubectl("patch", "karmadadeployment", NAME, "-n", NS, "--type=merge", "-p", yaml.safe_dump(patch))


def running_at_generation(fleet: Deployment) -> bool:
    obj = fleet.get()
    ready = condition(obj, "Ready")
    return (obj.get("status", {}).get("phase") == "Running" and ready.get("status") == "True"
            and ready.get("observedGeneration") == obj["metadata"]["generation"])


OPTIONAL_APIS = ["v1alpha1.search.karmada.io", "v1beta1.metrics.k8s.io", "v1beta1.custom.metrics.k8s.io",
                 "v1beta2.custom.metrics.k8s.io"]


def apiservices(fleet: Deployment) -> dict[str, str]:
    items = yaml.safe_load(fleet.karmadactl("get", "apiservices", "-o", "yaml").stdout)["items"]
    return {a["metadata"]["name"]: next((c["status"] for c in a.get("status", {}).get("conditions", [])
                                         if c["type"] == "Available"), "") for a in items}


def control_plane_pods(fleet: Deployment) -> dict[str, str]:
    pods = fleet.host.get("pods", "-n", NS, "-l", f"app.kubernetes.io/instance={NAME}")["items"]
    return {p["metadata"]["name"]: p["metadata"]["uid"] for p in pods}


def test_search_and_metrics_adapter_serve_their_apis_and_go_away_cleanly(
        fleet: Deployment, member_clusters: list[MemberCluster]):
    """Issue 6 (optional components): karmada-search caches the members' Deployments through a
    ResourceRegistry and karmada-metrics-adapter serves the metrics APIs; switching them off removes
    their APIServices (no dangling discovery) and neither switch restarts any other pod."""
    fleet.wait_for(lambda: bookinfo_running(by_name(member_clusters)["member1"]), 300, "bookinfo in member1")
    before = control_plane_pods(fleet)
    start = time.monotonic()
    set_optional(fleet, True)
    fleet.wait_for(lambda: running_at_generation(fleet), 900, "Running with search and metrics-adapter")
    print(f"\nenable search + metrics-adapter: {time.monotonic() - start:.0f}s")
    available = apiservices(fleet)
    assert {name: available.get(name) for name in OPTIONAL_APIS} == dict.fromkeys(OPTIONAL_APIS, "True")
    components = {c["name"]: c for c in fleet.get()["status"]["components"]}
    for comp in ("karmada-search", "karmada-metrics-adapter"):
        assert components[comp]["readyReplicas"] == components[comp]["replicas"] == 1, components[comp]
    after_on = control_plane_pods(fleet)
    assert {n: u for n, u in after_on.items() if n in before} == before, "enabling restarted other pods"

    # search: a ResourceRegistry over the Push members' Deployments, read back through the cache
    registry = {"apiVersion": "search.karmada.io/v1alpha1", "kind": "ResourceRegistry",
                "metadata": {"name": "bookinfo-deployments"},
                "spec": {"targetCluster": {"clusterNames": ["member1", "member2"]},
                         "resourceSelectors": [{"apiVersion": "apps/v1", "kind": "Deployment",
                                                "namespace": "bookinfo"}]}}
    fleet.karmadactl("apply", "-f", "-", input=yaml.safe_dump(registry))

    def cached() -> dict[str, str]:
        out = fleet.karmadactl("get", "--raw",
                               "/apis/search.karmada.io/v1alpha1/search/cache/apis/apps/v1/deployments", check=False)
        if out.returncode != 0:
            return {}
        items = yaml.safe_load(out.stdout).get("items") or []
        source = "resource.karmada.io/cached-from-cluster"
        return {i["metadata"]["name"]: i["metadata"].get("annotations", {}).get(source, "") for i in items}

    found = fleet.wait_for(lambda: cached() if set(cached()) == {a for a, _ in BOOKINFO} else None, 300,
                           "bookinfo Deployments in karmada-search's cache")
    assert set(found.values()) == {"member1"}, found  # member2 runs no bookinfo

    # metrics-adapter: the three APIs answer through karmada-apiserver's aggregator
    for path in ("/apis/metrics.k8s.io/v1beta1", "/apis/custom.metrics.k8s.io/v1beta1",
                 "/apis/custom.metrics.k8s.io/v1beta2"):
        assert yaml.safe_load(fleet.karmadactl("get", "--raw", path).stdout)["kind"] == "APIResourceList", path
    pod_metrics = yaml.safe_load(fleet.karmadactl(
        "get", "--raw", "/apis/metrics.k8s.io/v1beta1/namespaces/bookinfo/pods").stdout)
    assert pod_metrics["kind"] == "PodMetricsList"

    fleet.karmadactl("delete", "resourceregistry", "bookinfo-deployments")
    set_optional(fleet, False)
    fleet.wait_for(lambda: running_at_generation(fleet), 900, "Running without search and metrics-adapter")
    assert not set(OPTIONAL_APIS) & set(apiservices(fleet))
    for kind in ("deployment", "service"):
        for comp in (f"{NAME}-search", f"{NAME}-metrics-adapter"):
            assert fleet.host.kubectl("get", kind, comp, "-n", NS, check=False).returncode != 0, (kind, comp)
    # discovery is whole again: no "unable to retrieve the complete list of server APIs"
    resources = fleet.karmadactl("api-resources", "-o", "name")
    assert resources.stderr.strip() == "", resources.stderr
    assert "clusters.cluster.karmada.io" in resources.stdout
    assert "resourceregistries.search.karmada.io" not in resources.stdout
    after_off = control_plane_pods(fleet)
    assert {n: u for n, u in after_off.items() if n in before} == before, "disabling restarted other pods"
    pki = fleet.host.get("secret", f"{NAME}-pki", "-n", NS)["data"]
    assert "karmada-search.crt" not in pki and "karmada-metrics-adapter.crt" not in pki


NODE_PORT = 31443
HOST_MEMBER = {"name": "host", "kubeconfigSecretRef": {"name": "host-kubeconfig"}, "syncMode": "Pull",
               "agentPlacement": "Member"}


def sleeper(image: str) -> list[dict]:
    """A Deployment that really runs (the host's kubelet has the test bed's busybox image) in namespace demo,
    propagated to the member "host" only."""
    labels = {"app": "sleeper"}
    placement = {"clusterAffinity": {"clusterNames": ["host"]}}
    return [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "demo"}},
        {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "sleeper", "namespace": "demo"},
         "spec": {"replicas": 1, "selector": {"matchLabels": labels}, "template": {
             "metadata": {"labels": labels},
             "spec": {"containers": [{"name": "sleeper", "image": image, "imagePullPolicy": "Never",
                                      "command": ["sleep", "3600"]}]}}}},
        {"apiVersion": "policy.karmada.io/v1alpha1", "kind": "ClusterPropagationPolicy",
         "metadata": {"name": "demo-namespace"},
         "spec": {"resourceSelectors": [{"apiVersion": "v1", "kind": "Namespace", "name": "demo"}],
                  "placement": placement}},
        {"apiVersion": "policy.karmada.io/v1alpha1", "kind": "PropagationPolicy",
         "metadata": {"name": "sleeper", "namespace": "demo"},
         "spec": {"resourceSelectors": [{"apiVersion": "apps/v1", "kind": "Deployment", "name": "sleeper"}],
                  "placement": placement}},
    ]


def test_pull_member_with_its_agent_inside_runs_real_pods(fleet: Deployment):
    """agentPlacement Member, the usual Pull setup: the host cluster (a real kubelet) joins as
    member "host" with karmada-agent running inside it, dialing Karmada at the address the
    spec publishes (a node port standing in for a balancer). Its workloads run as real pods.
    Unjoining it removes the agent and leaves the member's own karmada-system namespace (where
    this very Karmada runs) alone."""
    host = fleet.host
    node_ip = settings()["KO_NODE_IP"]
    patch = {"spec": {"apiServer": {"serviceType": "NodePort", "nodePort": NODE_PORT,
                                    "externalLoadBalancer": {"addresses": [node_ip], "port": NODE_PORT}}}}
    host.kubectl("patch", "karmadadeployment", NAME, "-n", NS, "--type=merge", "-p", yaml.safe_dump(patch))
    fleet.wait_for(lambda: running_at_generation(fleet), 900, "Running behind the node port")

    conf = yaml.safe_load(host.kubeconfig.read_text())
    conf["clusters"][0]["cluster"]["server"] = f"https://{node_ip}:6443"
    conf_file = fleet.work / "host-member.kubeconfig"
    conf_file.write_text(yaml.safe_dump(conf))
    host.kubectl("create", "secret", "generic", "host-kubeconfig", "-n", NS, f"--from-file=kubeconfig={conf_file}")
    members = {"spec": {"members": MEMBERS + [HOST_MEMBER]}}
    host.kubectl("patch", "karmadadeployment", NAME, "-n", NS, "--type=merge", "-p", yaml.safe_dump(members))
    fleet.wait_for(lambda: all_joined(fleet, "member1", "member2", "member3", "host"), 900, "host joined")
    agent = host.get("deployment", "karmada-agent", "-n", "karmada-system")
    assert agent["status"].get("readyReplicas") == 1
    entry = next(m for m in fleet.get()["status"]["members"] if m["name"] == "host")
    assert (entry["syncMode"], entry["agentPlacement"]) == ("Pull", "Member")
    assert clusters(fleet)["host"]["spec"]["syncMode"] == "Pull"
    # joining did not take over the member's existing karmada-system namespace
    labels = host.get("namespace", "karmada-system")["metadata"].get("labels", {})
    assert labels.get("app.kubernetes.io/managed-by") != "karmada-operator", labels

    fleet.karmadactl("apply", "-f", "-", input=yaml.safe_dump_all(sleeper(host.busybox_image)))

    def sleeper_running():
        out = host.kubectl("get", "pods", "-n", "demo", "-l", "app=sleeper", "-o", "yaml", check=False)
        pods = yaml.safe_load(out.stdout)["items"] if out.returncode == 0 else []
        return pods if pods and all(p["status"].get("phase") == "Running" for p in pods) else None

    pods = fleet.wait_for(sleeper_running, 300, "the sleeper pod Running in the host member")
    assert pods[0]["spec"]["nodeName"] == settings()["KO_NODE_NAME"]

    set_members(fleet, "member1", "member2", "member3")
    fleet.wait_for(lambda: all_joined(fleet, "member1", "member2", "member3"), 600, "host unjoined")
    assert host.kubectl("get", "deployment", "karmada-agent", "-n", "karmada-system", check=False).returncode != 0
    assert host.kubectl("get", "clusterrole", "karmada-agent", check=False).returncode != 0
    fleet.wait_for(lambda: host.kubectl("get", "deployment", "sleeper", "-n", "demo", check=False).returncode != 0,
                   120, "the sleeper withdrawn from the host member")
    assert host.get("namespace", "karmada-system")["status"]["phase"] == "Active"
    assert condition(fleet.get(), "Ready")["status"] == "True"
    fleet.karmadactl("delete", "-f", "-", input=yaml.safe_dump_all(sleeper(host.busybox_image)), check=False)
    host.kubectl("delete", "secret", "host-kubeconfig", "-n", NS, check=False)


@pytest.mark.timeout(2700)
def test_karmada_e2e_suite_passes_on_this_karmada(
        fleet: Deployment, member_clusters: list[MemberCluster], tmp_path):
    """Karmada's own e2e suite (test/e2e/suites/base of the pinned module; the groups of
    hack/karmada-e2e/groups.txt) against this Karmada, behind its balancer address since the
    test above, with the members set up the way Karmada's e2e environment has them (member1
    and member2 Push, member3 Pull, none tainted: the suite expects every member schedulable)
    and the controllers configured as Karmada's e2e environment runs them, through the spec."""
    karmada_suite.build()
    suite_members = [{k: v for k, v in m.items() if k != "taints"} for m in MEMBERS]
    patch = {"spec": {"members": suite_members, "components": karmada_suite.COMPONENTS}}
    fleet.host.kubectl("patch", "karmadadeployment", NAME, "-n", NS, "--type=merge", "-p", yaml.safe_dump(patch))
    fleet.wait_for(lambda: running_at_generation(fleet) and all_joined(fleet, "member1", "member2", "member3")
                   and not clusters(fleet)["member3"]["spec"].get("taints"), 900,
                   "Running with the suite's controller settings and member3 untainted")
    karmada_suite.run_suite(fleet, member_clusters, ["member3"], tmp_path / "report")


def test_deleting_the_deployment_unjoins_every_member_first(
        fleet: Deployment, member_clusters: list[MemberCluster]):
    """The finalizer unjoins the members through Karmada (their workloads are withdrawn, the
    member-side service accounts and roles removed) before the control plane goes."""
    members = by_name(member_clusters)
    assert bookinfo_running(members["member1"]) and bookinfo_running(members["member3"])
    start = time.monotonic()
    fleet.host.kubectl("delete", "karmadadeployment", NAME, "-n", NS, "--wait=false")
    fleet.wait_for(lambda: fleet.host.kubectl("get", "karmadadeployment", NAME, "-n", NS,
                                              check=False).returncode != 0, 900, "the KarmadaDeployment gone")
    print(f"\ndelete with 3 members: {time.monotonic() - start:.0f}s")
    # withdrawn by Karmada, so the unjoin ran while the control plane was still there
    assert bookinfo_absent(members["member1"]) and bookinfo_absent(members["member3"])
    for name in ("member1", "member2"):
        assert members[name].kubectl("get", "clusterrole", f"karmada-controller-manager:karmada-{name}",
                                     check=False).returncode != 0, name
        assert members[name].kubectl("get", "serviceaccount", "karmada-impersonator", "-n", "karmada-cluster",
                                     check=False).returncode != 0, name
    assert members["member3"].kubectl("get", "clusterrole", "karmada-agent", check=False).returncode != 0
    assert fleet.host.kubectl("get", "deployment", f"{NAME}-agent-member3", "-n", NS,
                              check=False).returncode != 0
    assert fleet.host.kubectl("get", "deployment", f"{NAME}-apiserver", "-n", NS, check=False).returncode != 0
