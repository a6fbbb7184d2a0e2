"""One Karmada's life through its members and an upgrade (issues 7, 14 and 32), in file order.

The real ansible-operator (our watches.yaml, config/rbac's ServiceAccount) installs a small
Karmada named ``fleet`` on the host cluster **at the previous release** (KARMADA_PREVIOUS_VERSION;
one etcd member on a claim, two karmada-apiserver replicas), with three kwok member clusters from
the test bed: member1 and member2 Push, member3 Pull with its karmada-agent in the host cluster
(kwok nodes cannot run pods), and an EtcdBackup naming a volume store, so every version change
first takes a backup. Its life, one test each, every test leaving all three members joined:

1. members join, a second pass changes nothing, bookinfo propagates, members leave and come back,
   one down during the join, bad ones reported, a Pull member with its agent inside it;
2. Karmada's own e2e suite (the upgrade subset, hack/karmada-e2e/groups-upgrade.txt) on the old release;
3. an upgrade two minor versions up (a v1.16.0 plane asked for the current release) refused,
   nothing changed;
4. an upgrade whose karmada-controller-manager image does not exist stops there, and setting the
   old version back without allowDowngrade rolls back what it moved, in reverse order;
5. the full upgrade: every binary reports the new release (``version``/``--version`` run in each
   pod), karmada-apiserver, kube-controller-manager and etcd are not replaced, the components roll
   once each in the registry's order with the CRDs between the aggregated apiserver and the
   controllers, /readyz answers every second, no member workload is recreated, the backup first;
6. going back after the completed upgrade without allowDowngrade is refused, nothing changed;
   with it and strategy Components, the scheduler alone moves;
7. a spec.globals change rolls every component once, in the registry's order (etcd first), and
   the next full pass changes nothing;
8. the optional components (search, metrics-adapter) on the new release, Karmada's e2e suite
   (every group of hack/karmada-e2e/groups.txt) on the upgraded plane, and the deletion, which
   unjoins every member first.
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import signal
import ssl
import time
from datetime import datetime
from pathlib import Path

import pytest
import yaml
from cryptography import x509

from support import ca_scan, karmada_e2e, karmada_suite, plane_versions
from support.karmada_crds_server import karmada_version, pinned, serve
from support.karmada_e2e import BOOKINFO, Deployment, bookinfo, bookinfo_running, operator_kubeconfig, recaps
from support.operator_runtime import OperatorProcess
from support.pki_fixtures import signed_by
from support.readyz import ReadyzPoller, readyz
from support.sampling import Sampler
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



OLD, NEW = pinned("KARMADA_PREVIOUS_VERSION"), karmada_version()
KUBE = pinned("KUBERNETES_VERSION")
BACKUP_PVC = "fleet-backups"
AGENT = f"{NAME}-agent-member3"


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
    # Torn down even when the setup fails: a leftover operator would reconcile the next module's
    # Karmada too (two operators issuing two CAs for one etcd).
    with contextlib.ExitStack() as cleanup:
        crds = {OLD: serve(version=OLD), NEW: serve(version=NEW)}
        for server in crds.values():
            cleanup.callback(server.stop)
        host_cluster.kubectl("apply", "-k", str(karmada_e2e.ROOT / "config/crd"))
        crds_established(host_cluster.kubectl, ["karmadadeployments.operator.karmada.io",
                                                "etcdbackups.operator.karmada.io"])
        host_cluster.kubectl("create", "namespace", NS, check=False)
        seconds = karmada_e2e.load_operator_image(host_cluster)
        print(f"\noperator image (the backup Job's) built and imported in {seconds:.0f}s")
        # a missing image stops an upgrade after 30 s of ImagePullBackOff instead of 60 (test-only period)
        operator = OperatorProcess(bin_path("ansible-operator"), operator_kubeconfig(host_cluster, work), work,
                                   extra_env={"KARMADA_OPERATOR_IMAGE": karmada_e2e.OPERATOR_IMAGE,
                                              "KARMADA_OPERATOR_ROLLOUT_STUCK_AFTER": "30"})
        cleanup.callback(operator.stop)
        # run last first: the EtcdBackups and their claim, then the Karmada while the operator runs
        cleanup.callback(karmada_e2e.delete_karmada, host_cluster, NS, NAME)
        cleanup.callback(host_cluster.kubectl, "delete", "pvc", BACKUP_PVC, "-n", NS, "--wait=false", check=False)
        cleanup.callback(host_cluster.kubectl, "delete", "etcdbackups", "--all", "-n", NS, "--timeout=120s",
                         check=False)
        operator.wait_healthy()
        cr = karmada_e2e.sample()
        cr["metadata"]["name"] = NAME
        spec = cr["spec"]
        spec["karmadaVersion"] = OLD
        spec["crds"] = {"url": crds[OLD].url, "sha256": crds[OLD].sha256}
        # on a claim: a spec.globals change restarts the one member (an emptyDir would start empty)
        spec["etcd"]["local"] = {"replicas": 1, "storage": {"type": "PersistentVolumeClaim", "size": "1Gi",
                                                            "storageClassName": "standard"}}
        spec["apiServer"] = {"replicas": 2, "serviceType": "ClusterIP"}  # /readyz answers through every roll
        # cluster.karmada.io (where the members' Ready is read) answers through every roll too
        spec["components"] = {"aggregatedAPIServer": {"replicas": 2}}
        spec["certificates"] = {"keyAlgorithm": "ECDSA"}
        spec["members"] = MEMBERS
        fleet = Deployment(host_cluster, operator, work, NAME, NS, extra={"crds": crds})
        start = time.monotonic()
        host_cluster.kubectl("apply", "-f", "-", input=yaml.safe_dump(cr))
        fleet.wait_for(lambda: all_joined(fleet, "member1", "member2", "member3"), 1500,
                       "Ready with 3 members joined")
        print(f"\napply-to-3-members-joined at {OLD}: {time.monotonic() - start:.0f}s")
        # A backup store for this Karmada: every version change backs up to it first.
        for doc in ({"apiVersion": "v1", "kind": "PersistentVolumeClaim",
                     "metadata": {"name": BACKUP_PVC, "namespace": NS},
                     "spec": {"accessModes": ["ReadWriteMany"], "storageClassName": "cephfs",
                              "resources": {"requests": {"storage": "1Gi"}}}},
                    {"apiVersion": "operator.karmada.io/v1alpha1", "kind": "EtcdBackup",
                     "metadata": {"name": "nightly", "namespace": NS},
                     "spec": {"karmadaDeploymentRef": {"name": NAME}, "schedule": "0 3 * * *", "suspend": True,
                              "storage": {"pvc": {"claimName": BACKUP_PVC, "subPath": NAME}}}}):
            host_cluster.kubectl("apply", "-f", "-", input=yaml.safe_dump(doc))
        yield fleet


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
    # What runs is the old release, from each binary: where the upgrade starts.
    found = plane_versions.versions(running(fleet))
    print(f"\nbinaries at install: {found}")
    assert found == expected_versions(OLD), found


def full_pass(fleet: Deployment) -> Path:
    """Ask for a full pass (annotation operator.karmada.io/full-pass) and return the run that
    answered it (a fast-path run may follow it: the full pass writes status)."""
    before = {d.name for d in fleet.runs()}
    fleet.host.kubectl("annotate", "karmadadeployment", NAME, "-n", NS,
                       f"operator.karmada.io/full-pass={time.time()}", "--overwrite")
    return fleet.wait_for(lambda: next((d for d in fleet.runs() if d.name not in before and "full pass was asked for"
                                        in (karmada_e2e.fast_path(d).get("reason") or "")), None),
                          600, "a reconcile run for the full-pass annotation")


def test_second_reconcile_changes_nothing_on_any_member(fleet: Deployment):
    fleet.wait_for(lambda: karmada_e2e.settled(NS, NAME), 300, "the runs started by the join settled")
    # a full pass (touching an owned object would take the fast path, which runs no member
    # play): every member play runs and changes nothing
    earlier = fleet.runs()
    run = full_pass(fleet)
    stats, joins = recaps(run), karmada_e2e.member_results(run)
    print(f"\nno-op reconcile with 3 members: {stats}; members: "
          f"{ {n: (r['state'], r['changed'], r['changes']) for n, r in joins.items()} }")
    assert set(stats) == {"localhost"}  # every member in one task, a thread each
    # nothing but etcd's sizes in status (karmada_e2e.changes_nothing)
    assert stats["localhost"]["failed"] == 0 and karmada_e2e.changes_nothing(run, earlier) == [], stats
    assert set(joins) == {"member1", "member2", "member3"}
    for name, result in joins.items():
        assert result["state"] == "Joined" and result["ready"] and not result["changed"], (name, result)
        assert result["changes"] == [], (name, result)
    assert karmada_e2e.fast_path(run)["converged"] is False

    # The fast path: an owned object touched, the run ends after its check, which read every
    # member's Cluster Ready through karmada-apiserver.
    fleet.wait_for(lambda: karmada_e2e.settled(NS, NAME), 300, "the runs after the full pass settled")
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
    # a member whose API server is gone (crashed, its node lost): no graceful drain to wait out;
    # the test bed restarts it only once it is gone
    os.kill(pid, signal.SIGKILL)
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
    # Running means usable at the address the spec publishes: the certificate served there already
    # names it (the running karmada-apiserver picks the reissued pair up from its Secret volume at
    # once, not at the kubelet's next sync of it, a minute and a half later; pki/volume_refresh.py).
    served = x509.load_pem_x509_certificate(ssl.get_server_certificate((node_ip, NODE_PORT)).encode())
    names = served.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert node_ip in {str(ip) for ip in names.get_values_for_type(x509.IPAddress)}, names

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
    # the agent never failed to dial Karmada (a certificate not naming the address made it crash-loop)
    agent_pods = host.get("pods", "-n", "karmada-system", "-l",
                          ",".join(f"{k}={v}" for k, v in agent["spec"]["selector"]["matchLabels"].items()))["items"]
    assert agent_pods and all(cs["restartCount"] == 0 for p in agent_pods for cs in p["status"]["containerStatuses"]), [
        (p["metadata"]["name"], [cs["restartCount"] for cs in p["status"]["containerStatuses"]]) for p in agent_pods]
    entry = next(m for m in fleet.get()["status"]["members"] if m["name"] == "host")
    assert (entry["syncMode"], entry["agentPlacement"]) == ("Pull", "Member")
    assert clusters(fleet)["host"]["spec"]["syncMode"] == "Pull"
    # joining did not take over the member's existing karmada-system namespace
    labels = host.get("namespace", "karmada-system")["metadata"].get("labels", {})
    assert labels.get("app.kubernetes.io/managed-by") not in ("karmadadeployment-operator", "karmada-operator"), labels

    fleet.karmadactl("apply", "-f", "-", input=yaml.safe_dump_all(sleeper(host.busybox_image)))

    def sleeper_running():
        out = host.kubectl("get", "pods", "-n", "demo", "-l", "app=sleeper", "-o", "yaml", check=False)
        pods = yaml.safe_load(out.stdout)["items"] if out.returncode == 0 else []
        return pods if pods and all(p["status"].get("phase") == "Running" for p in pods) else None

    pods = fleet.wait_for(sleeper_running, 300, "the sleeper pod Running in the host member")
    assert pods[0]["spec"]["nodeName"] == settings()["KO_NODE_NAME"]

    before = set(fleet.runs())
    set_members(fleet, "member1", "member2", "member3")
    fleet.wait_for(lambda: all_joined(fleet, "member1", "member2", "member3"), 600, "host unjoined")
    # Karmada withdrew the sleeper through the agent (not the unjoin's timeout giving up on it)
    # the status is written during the pass, the run's record when the pass ends: wait for it
    unjoin = fleet.wait_for(lambda: karmada_e2e.unjoined([r for r in fleet.runs() if r not in before]).get("host"),
                            300, "the unjoining pass's record")
    assert unjoin["reason"] == "Unjoined", unjoin
    assert host.kubectl("get", "deployment", "karmada-agent", "-n", "karmada-system", check=False).returncode != 0
    assert host.kubectl("get", "clusterrole", "karmada-agent", check=False).returncode != 0
    fleet.wait_for(lambda: host.kubectl("get", "deployment", "sleeper", "-n", "demo", check=False).returncode != 0,
                   120, "the sleeper withdrawn from the host member")
    assert host.get("namespace", "karmada-system")["status"]["phase"] == "Active"
    assert condition(fleet.get(), "Ready")["status"] == "True"
    fleet.karmadactl("delete", "-f", "-", input=yaml.safe_dump_all(sleeper(host.busybox_image)), check=False)
    host.kubectl("delete", "secret", "host-kubeconfig", "-n", NS, check=False)


# ---- the upgrade (issues 14 and 32) ----------------------------------------------------------

# What a version change of Karmada moves, in the registry's order (docs/upgrades.md): Karmada's
# own components; the CRDs go between the aggregated apiserver and the controllers.
KARMADA_ORDER = ["karmada-aggregated-apiserver", "karmada-controller-manager", "karmada-scheduler", "karmada-webhook"]
# What a change of every pod template (spec.globals) moves, in the registry's order.
FULL_ORDER = ["etcd", "karmada-apiserver", "karmada-aggregated-apiserver", "kube-controller-manager",
              *KARMADA_ORDER[1:]]
# member3's taint (MEMBERS) is lifted for Karmada's suite; a policy that must reach it whatever the
# order of the tests tolerates it
TOLERATE_MEMBER3 = [{"key": "dedicated", "operator": "Equal", "value": "batch", "effect": "NoSchedule"}]
KUBE_APPS = ("karmada-apiserver", "kube-controller-manager")  # at spec.kubernetesVersion
FIXED_APPS = ("etcd", *KUBE_APPS)  # not moved by a Karmada version


def agent_selector(fleet: Deployment) -> str:
    labels = fleet.host.get("deployment", AGENT, "-n", NS)["spec"]["selector"]["matchLabels"]
    return ",".join(f"{k}={v}" for k, v in sorted(labels.items()))


def running(fleet: Deployment) -> list[plane_versions.Pod]:
    """Every pod of the plane and member3's agent, with the version its binary reports."""
    return plane_versions.plane(fleet.host, NS, NAME, (agent_selector(fleet),))


def expected_versions(karmada: str) -> dict[str, set[str]]:
    etcd = pinned("ETCD_VERSION").lstrip("v")
    out = {app: {karmada} for app in KARMADA_ORDER}
    out.update({AGENT: {karmada}, "etcd": {etcd}, "karmada-apiserver": {KUBE},
                "kube-controller-manager": {KUBE}})
    return out


def patch_spec(fleet: Deployment, spec: dict) -> None:
    fleet.host.kubectl("patch", "karmadadeployment", NAME, "-n", NS, "--type=merge", "-p", json.dumps({"spec": spec}))


def crds_for(fleet: Deployment, version: str) -> dict:
    server = fleet.extra["crds"][version]
    return {"url": server.url, "sha256": server.sha256}


def ready_at_generation(fleet: Deployment) -> bool:
    obj = fleet.get()
    ready = condition(obj, "Ready")
    return ready.get("status") == "True" and ready.get("observedGeneration") == obj["metadata"]["generation"]


def converged_on(fleet: Deployment, version: str) -> bool:
    obj = fleet.get()
    return ready_at_generation(fleet) and obj["status"].get("karmadaVersion") == version


def refused_at_generation(fleet: Deployment):
    obj = fleet.get()
    ready = condition(obj, "Ready")
    return (ready.get("observedGeneration") == obj["metadata"]["generation"]
            and ready.get("reason") == "UnsupportedUpgrade" and ready)


def rolled_events(fleet: Deployment, seen: set[str]) -> list[dict]:
    """ComponentRolledOut and EtcdMemberRolled Events of this KarmadaDeployment (by UID) not in
    ``seen``, in the order the API server stored them."""
    out = [e for reason in ("ComponentRolledOut", "EtcdMemberRolled") for e in karmada_e2e.events(fleet, reason)]
    fresh = (e for e in out if e["metadata"]["uid"] not in seen)
    return sorted(fresh, key=lambda e: int(e["metadata"]["resourceVersion"]))


def rolled_names(events: list[dict]) -> list[str]:
    return ["etcd" if e["reason"] == "EtcdMemberRolled" else e["message"].split(" rolled out", 1)[0] for e in events]


def event_uids(fleet: Deployment) -> set[str]:
    return {e["metadata"]["uid"] for e in rolled_events(fleet, set())}


def karmada_crds(fleet: Deployment) -> dict[str, dict]:
    items = json.loads(fleet.karmadactl("get", "crd", "-o", "json", "--show-managed-fields").stdout)["items"]
    return {c["metadata"]["name"]: c for c in items if c["spec"]["group"].endswith("karmada.io")}


def member_pod_uids(members: dict[str, MemberCluster]) -> dict[str, set[str]]:
    return {name: {p["metadata"]["uid"] for p in m.get("pods", "-n", "bookinfo")["items"]}
            for name, m in members.items()}


def check_pre_upgrade_backup(fleet: Deployment, record: dict, version: str, first_rolled: dict) -> None:
    """The backup the version change took: named in status.upgrade, Succeeded, and stored (its
    BackupSucceeded Event) before the first component rolled."""
    name = record.get("backup", {}).get("name", "")
    assert name.startswith(f"{NAME}-pre-upgrade-{version.replace('.', '-')}-"), record
    assert record["backup"]["location"].startswith(f"pvc://{BACKUP_PVC}/{NAME}/"), record
    backup = fleet.host.get("etcdbackup", name, "-n", NS)
    assert backup["status"]["phase"] == "Succeeded" and condition(backup, "Ready")["status"] == "True", backup["status"]
    done = fleet.host.get("events", "-n", NS, "--field-selector",
                          f"involvedObject.kind=EtcdBackup,involvedObject.name={name},reason=BackupSucceeded")["items"]
    assert done, f"no BackupSucceeded Event for {name}"
    assert int(done[0]["metadata"]["resourceVersion"]) < int(first_rolled["metadata"]["resourceVersion"]), \
        "the backup must be stored before the first component rolls"


@pytest.mark.timeout(1800)
def test_karmada_e2e_subset_passes_on_the_old_release(fleet: Deployment, member_clusters: list[MemberCluster],
                                                       tmp_path):
    """Karmada's e2e suite (the groups of hack/karmada-e2e/groups-upgrade.txt) on the old release,
    with the members and controllers as Karmada's e2e environment has them (member3 untainted,
    the two controllers off by default on, every alpha and beta gate): the same groups run again
    on the upgraded plane (the last suite test): every spec that passed here must pass there."""
    assert converged_on(fleet, OLD)
    karmada_suite.build()
    suite_members = [{k: v for k, v in m.items() if k != "taints"} for m in MEMBERS]
    patch_spec(fleet, {"members": suite_members, "components": karmada_suite.COMPONENTS})
    fleet.wait_for(lambda: running_at_generation(fleet) and all_joined(fleet, "member1", "member2", "member3")
                   and not clusters(fleet)["member3"]["spec"].get("taints"), 900,
                   "Running with the suite's controller settings and member3 untainted")
    groups = karmada_suite.run_suite(fleet, member_clusters, ["member3"], tmp_path / "report",
                                     groups_file=karmada_suite.HACK / "groups-upgrade.txt", via_service=True)
    fleet.extra["suite_before"] = karmada_suite.passed_specs(tmp_path / "report")
    print(f"before the upgrade ({OLD}): {sum(map(len, groups.values()))} specs in {len(groups)} groups")


def test_an_upgrade_two_minor_versions_up_is_refused_and_nothing_changes(fleet: Deployment):
    """A plane at v1.16.0 asked for the current release: refused (UnsupportedUpgrade) on the live
    plane, every pod and CRD as it was. The plane runs the old release; status says v1.16.0 (set
    while the KarmadaDeployment is paused, the version the preflight reads), then is set back."""
    assert converged_on(fleet, OLD)
    major, minor = (int(x) for x in OLD[1:].split(".")[:2])
    two_below = f"v{major}.{minor - 1}.0"
    pods_before = running(fleet)
    crds_before = {n: c["metadata"]["resourceVersion"] for n, c in karmada_crds(fleet).items()}

    def paused_with_status(version: str, spec: dict) -> None:
        patch_spec(fleet, {"paused": True})
        def paused() -> bool:
            obj = fleet.get()
            ready = condition(obj, "Ready")
            return (ready.get("reason") == "Paused" and ready.get("observedGeneration") == obj["metadata"]["generation"]
                    and not karmada_e2e.runs_in_flight(NS, NAME))
        fleet.wait_for(paused, 300, "paused")
        fleet.host.kubectl("patch", "karmadadeployment", NAME, "-n", NS, "--subresource=status", "--type=merge",
                           "-p", json.dumps({"status": {"karmadaVersion": version}}))
        patch_spec(fleet, {"paused": False, **spec})

    paused_with_status(two_below, {"karmadaVersion": NEW, "crds": crds_for(fleet, NEW)})
    ready = fleet.wait_for(lambda: refused_at_generation(fleet), 600, "Ready False with UnsupportedUpgrade")
    print(f"\n{two_below} -> {NEW}: {ready['reason']}: {ready['message']}")
    assert ready["status"] == "False" and "one minor version at a time" in ready["message"], ready
    assert fleet.get()["status"]["karmadaVersion"] == two_below
    assert running(fleet) == pods_before, "a refused upgrade must not touch any pod"
    assert {n: c["metadata"]["resourceVersion"] for n, c in karmada_crds(fleet).items()} == crds_before
    assert fleet.karmadactl("get", "--raw", "/readyz").stdout.strip() == "ok"

    paused_with_status(OLD, {"karmadaVersion": OLD, "crds": crds_for(fleet, OLD)})
    fleet.wait_for(lambda: converged_on(fleet, OLD), 600, f"Ready again at {OLD}")
    assert running(fleet) == pods_before


def test_a_missing_image_stops_the_upgrade_there_and_the_old_version_rolls_it_back(fleet: Deployment):
    """An upgrade whose karmada-controller-manager image does not exist stops at it: the
    aggregated apiserver already moved, the scheduler and webhook untouched, the plane serving.
    Setting the old version back, without allowDowngrade (the upgrade is stopped), rolls back
    what moved, in reverse order, after its own backup."""
    assert converged_on(fleet, OLD)
    before = running(fleet)
    seen = event_uids(fleet)
    missing = f"{NEW}-missing"
    patch_spec(fleet, {"karmadaVersion": NEW, "crds": crds_for(fleet, NEW),
                       "components": {"controllerManager": {"image": {"tag": missing}}}})

    def stopped():
        obj = fleet.get()
        ready = condition(obj, "Ready")
        return (ready.get("status") == "False" and ready.get("observedGeneration") == obj["metadata"]["generation"]
                and "karmada-controller-manager" in ready.get("message", "") and ready)
    ready = fleet.wait_for(stopped, 1200, "Ready False naming karmada-controller-manager")
    print(f"\nstopped: {ready['reason']}: {ready['message'][:300]}")
    assert missing in ready["message"] and ("ImagePull" in ready["message"] or "ErrImage" in ready["message"])
    now = running(fleet)
    assert plane_versions.versions(now)["karmada-aggregated-apiserver"] == {NEW}
    untouched = ("karmada-scheduler", "karmada-webhook", *FIXED_APPS)
    assert {a: u for a, u in plane_versions.uids(now).items() if a in untouched} == \
        {a: u for a, u in plane_versions.uids(before).items() if a in untouched}
    assert rolled_names(rolled_events(fleet, seen)) == ["karmada-aggregated-apiserver"]
    assert fleet.karmadactl("get", "--raw", "/readyz").stdout.strip() == "ok"  # the plane serves
    obj = fleet.get()
    record = obj["status"]["upgrade"]
    assert (record["phase"], record["stoppedAt"], record["toVersion"]) == (
        "Stopped", "karmada-controller-manager", NEW), record
    assert condition(obj, "Upgrading")["reason"] == "UpgradeStopped"

    seen = event_uids(fleet)
    patch_spec(fleet, {"karmadaVersion": OLD, "crds": crds_for(fleet, OLD),
                       "components": {"controllerManager": {"image": None}}})
    fleet.wait_for(lambda: converged_on(fleet, OLD), 1200, f"rolled back to {OLD}")
    events = rolled_events(fleet, seen)
    print(f"rolled back, in order: {rolled_names(events)}")
    # backwards: the controller-manager (its broken template) before the aggregated apiserver
    assert rolled_names(events) == ["karmada-controller-manager", "karmada-aggregated-apiserver"]
    after = running(fleet)
    assert plane_versions.versions(after) == expected_versions(OLD)
    assert {a: u for a, u in plane_versions.uids(after).items() if a in untouched} == \
        {a: u for a, u in plane_versions.uids(before).items() if a in untouched}
    record = fleet.get()["status"]["upgrade"]
    assert (record["fromVersion"], record["toVersion"], record["phase"]) == (NEW, OLD, "Succeeded"), record
    check_pre_upgrade_backup(fleet, record, OLD, events[0])


def test_full_upgrade_moves_every_component_once_in_order_and_keeps_serving(
        fleet: Deployment, member_clusters: list[MemberCluster]):
    assert converged_on(fleet, OLD)
    members = {m.name: m for m in member_clusters if m.name in ("member1", "member3")}
    workloads_before = member_pod_uids(members)
    pods_before = running(fleet)
    crds_before = {n: c["spec"] for n, c in karmada_crds(fleet).items()}
    seen = event_uids(fleet)
    poller = ReadyzPoller(fleet.kubeconfig(), str(Path(fleet.host.settings["KO_LINKS"]) / "kubectl"))
    started = time.monotonic()
    patch_spec(fleet, {"karmadaVersion": NEW, "crds": crds_for(fleet, NEW)})
    try:
        fleet.wait_for(lambda: converged_on(fleet, NEW), 1500, f"Ready on {NEW}")
        fleet.wait_for(lambda: plane_versions.versions(running(fleet)) == expected_versions(NEW), 300,
                       f"every binary on {NEW} (the agent follows the control plane)")
    finally:
        polls, failures = poller.finish()
    seconds = time.monotonic() - started
    print(f"\nupgrade {OLD} -> {NEW}: {seconds:.0f}s; /readyz polled {polls} times, {len(failures)} failures")
    fleet.extra["upgrade_seconds"] = seconds
    assert polls > 30 and not failures, failures[:5]
    after = running(fleet)
    # What runs, from each binary: Karmada's programs on NEW, the rest as they were, not replaced.
    assert plane_versions.versions(after) == expected_versions(NEW)
    assert {a: u for a, u in plane_versions.uids(after).items() if a in FIXED_APPS} == \
        {a: u for a, u in plane_versions.uids(pods_before).items() if a in FIXED_APPS}, \
        "etcd, karmada-apiserver and kube-controller-manager must not roll for a Karmada version"
    for app in KARMADA_ORDER:
        assert not plane_versions.uids(after)[app] & plane_versions.uids(pods_before)[app], f"{app} not replaced"
    # Each Karmada component rolled once, in the registry's order, and nothing else rolled.
    events = rolled_events(fleet, seen)
    print(f"rolled out, in order: {rolled_names(events)}")
    assert rolled_names(events) == KARMADA_ORDER
    # The CRDs of the new release were applied after the aggregated apiserver and before the
    # controllers (the times of the rollout steps and of each changed CRD's last write).
    record = fleet.get()["status"]["upgrade"]
    steps = {c["name"]: c for c in record["components"]}
    changed = {n: c for n, c in karmada_crds(fleet).items() if crds_before.get(n) != c["spec"]}
    assert changed, f"no Karmada CRD's spec changed from {OLD} to {NEW}"
    written = {n: max(datetime.fromisoformat(m["time"]) for m in c["metadata"]["managedFields"]
                      if not m.get("subresource")) for n, c in changed.items()}
    low = datetime.fromisoformat(steps["karmada-aggregated-apiserver"]["endTime"])
    high = datetime.fromisoformat(steps["karmada-controller-manager"]["startTime"])
    print(f"CRDs written {min(written.values())}..{max(written.values())} ({len(changed)} changed); "
          f"aggregated apiserver done {low}, controller-manager started {high}")
    assert all(low <= t <= high for t in written.values()), written
    assert (record["fromVersion"], record["toVersion"], record["phase"]) == (OLD, NEW, "Succeeded"), record
    assert [c["name"] for c in record["components"] if c.get("changed", True)] == KARMADA_ORDER, record
    assert condition(fleet.get(), "Upgrading")["reason"] == "UpgradeSucceeded"
    check_pre_upgrade_backup(fleet, record, NEW, events[0])
    # Members: nothing recreated, and a policy made now propagates.
    assert member_pod_uids(members) == workloads_before
    cm = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "after-upgrade", "namespace": "default"},
          "data": {"version": NEW}}
    pp = {"apiVersion": "policy.karmada.io/v1alpha1", "kind": "PropagationPolicy",
          "metadata": {"name": "after-upgrade", "namespace": "default"},
          "spec": {"resourceSelectors": [{"apiVersion": "v1", "kind": "ConfigMap", "name": "after-upgrade"}],
                   "placement": {"clusterAffinity": {"clusterNames": ["member1", "member3"]},
                                 "clusterTolerations": TOLERATE_MEMBER3}}}
    fleet.karmadactl("apply", "-f", "-", input=yaml.safe_dump_all([cm, pp]))
    fleet.wait_for(lambda: all(m.kubectl("get", "configmap", "after-upgrade", "-n", "default", check=False)
                               .returncode == 0 for m in members.values()), 180,
                   "the ConfigMap on member1 (Push) and member3 (Pull) through a policy made after the upgrade")
    fleet.karmadactl("delete", "-f", "-", input=yaml.safe_dump_all([pp, cm]), check=False)


def test_going_back_after_the_completed_upgrade_needs_allow_downgrade(fleet: Deployment):
    """Without spec.upgrade.allowDowngrade the old version is refused now that the upgrade has
    completed, nothing changes; with it (and strategy Components) the scheduler alone goes back."""
    assert converged_on(fleet, NEW)
    before = running(fleet)
    patch_spec(fleet, {"karmadaVersion": OLD, "crds": crds_for(fleet, OLD)})
    ready = fleet.wait_for(lambda: refused_at_generation(fleet), 600, "Ready False with UnsupportedUpgrade")
    print(f"\n{NEW} -> {OLD} without allowDowngrade: {ready['message']}")
    assert ready["status"] == "False" and "has completed" in ready["message"] and "allowDowngrade" in ready["message"]
    assert running(fleet) == before, "a refused downgrade must not touch any pod"

    seen = event_uids(fleet)
    patch_spec(fleet, {"upgrade": {"allowDowngrade": True, "strategy": "Components", "components": ["scheduler"]}})
    # the members' step (member3's agent) comes after Ready: MembersReady at this generation too
    fleet.wait_for(lambda: ready_at_generation(fleet) and all_joined(fleet, "member1", "member2", "member3"),
                   900, f"the scheduler alone on {OLD}, the members' step done")
    after = running(fleet)
    assert plane_versions.versions(after)["karmada-scheduler"] == {OLD}
    # Of the control plane only the scheduler moves. member3's agent follows spec.karmadaVersion
    # whatever the strategy (docs/upgrades.md): it runs the old release too.
    assert plane_versions.uids(after, "karmada-scheduler", AGENT) == \
        plane_versions.uids(before, "karmada-scheduler", AGENT), "only the scheduler may restart"
    assert plane_versions.versions(after)[AGENT] == {OLD}
    assert rolled_names(rolled_events(fleet, seen)) == ["karmada-scheduler"]

    patch_spec(fleet, {"karmadaVersion": NEW, "crds": crds_for(fleet, NEW), "upgrade": None})
    fleet.wait_for(lambda: converged_on(fleet, NEW)
                   and plane_versions.versions(running(fleet)) == expected_versions(NEW), 900, f"all on {NEW} again")
    assert plane_versions.uids(running(fleet), "karmada-scheduler", AGENT) == \
        plane_versions.uids(before, "karmada-scheduler", AGENT)


def test_a_globals_change_rolls_every_component_once_in_order_and_the_next_pass_changes_nothing(
        fleet: Deployment):
    before = running(fleet)
    seen = event_uids(fleet)
    patch_spec(fleet, {"globals": {"labels": {"example.com/team": "platform"}}})
    fleet.wait_for(lambda: running_at_generation(fleet), 1500, "Running with the new labels")
    events = rolled_events(fleet, seen)
    print(f"\nglobals change rolled, in order: {rolled_names(events)}")
    assert rolled_names(events) == FULL_ORDER
    after = running(fleet)
    control_plane = [app for app in plane_versions.uids(before) if app != AGENT]
    for app in control_plane:
        assert not plane_versions.uids(after)[app] & plane_versions.uids(before)[app], f"{app} not replaced"
    labelled = fleet.host.get("pods", "-n", NS, "-l", f"app.kubernetes.io/instance={NAME},example.com/team=platform")
    assert {p.name for p in after if p.app in control_plane} <= {p["metadata"]["name"] for p in labelled["items"]}

    # the next full pass changes nothing (etcd's sizes in status aside) and replaces nothing
    earlier = fleet.runs()
    run = full_pass(fleet)
    stats, extra = recaps(run), karmada_e2e.changes_nothing(run, earlier)
    print(f"next full pass: {stats}; beyond etcd's sizes: {extra}")
    assert stats["localhost"]["failed"] == 0 and extra == [], (stats, extra)
    assert running(fleet) == after
    assert event_uids(fleet) - seen == {e["metadata"]["uid"] for e in events}, "the full pass rolled something"

# ---- CA rotation (issues 15 and 32) -----------------------------------------------------------


def fresh_kubeconfig(fleet: Deployment, path: Path) -> Path:
    """The admin kubeconfig as its Secret holds it now, through the Service (a client that
    re-reads its kubeconfig: the rotation reissues its client certificate and its CA)."""
    secret = fleet.host.get("secret", f"{NAME}-admin-kubeconfig", "-n", NS)
    conf = yaml.safe_load(base64.b64decode(secret["data"]["kubeconfig"]))
    ip = fleet.host.get("service", f"{NAME}-apiserver", "-n", NS)["spec"]["clusterIP"]
    conf["clusters"][0]["cluster"]["server"] = f"https://{ip}:5443"
    conf["clusters"][0]["cluster"]["tls-server-name"] = f"{NAME}-apiserver.{NS}.svc.cluster.local"
    path.write_text(yaml.safe_dump(conf))
    path.chmod(0o600)
    return path


def member_ready(fleet: Deployment, kubeconfig: Path, member: str) -> str:
    """The member's Ready in Karmada ("True", "False", "Unknown"), or what kubectl said when
    cluster.karmada.io (karmada-aggregated-apiserver) did not answer."""
    proc = fleet.karmadactl("get", "cluster", member, "-o", "json", kubeconfig=kubeconfig, check=False)
    if proc.returncode != 0:
        return f"no answer: {proc.stderr.strip()[-200:]}"
    return condition(json.loads(proc.stdout), "Ready").get("status") or "Unknown"


def pem_certs(data: bytes) -> list[x509.Certificate]:
    try:
        return x509.load_pem_x509_certificates(data)
    except ValueError:
        return []


def kubeconfig_client_certs(data: bytes) -> list[x509.Certificate]:
    """The client certificates of a kubeconfig ([] when ``data`` is not one)."""
    try:
        conf = yaml.safe_load(data)
    except yaml.YAMLError:
        return []
    if not isinstance(conf, dict):
        return []
    users = [u.get("user") or {} for u in conf.get("users") or [] if isinstance(u, dict)]
    return [c for u in users if u.get("client-certificate-data")
            for c in pem_certs(base64.b64decode(u["client-certificate-data"]))]


def everything(kubectl, kinds: str) -> list[dict]:
    return json.loads(kubectl("get", kinds, "-A", "-o", "json").stdout)["items"]


def test_ca_rotation_keeps_both_members_ready_and_leaves_the_old_ca_nowhere(
        fleet: Deployment, member_clusters: list[MemberCluster]):
    """spec.certificates.caRotation {ca: karmada} goes Trusting, Reissuing, Dropping, Done. Through
    it, karmada-apiserver's /readyz (2 replicas, through the Service, each poll with the admin
    kubeconfig as its Secret holds it then) never fails, and member1 (Push) and member3 (Pull)
    are Ready at every check. Afterwards the old CA is in no Secret or ConfigMap of the host
    cluster, of karmada-apiserver (kube-root-ca.crt in every namespace, webhook, APIService and
    CRD caBundles too) or of either member, every certificate the CA signs is signed by the new
    one, and a policy made now reaches both members."""
    members = by_name(member_clusters)
    pki = {k: base64.b64decode(v) for k, v in fleet.host.get("secret", f"{NAME}-pki", "-n", NS)["data"].items()}
    (old_ca,) = pem_certs(pki["ca.crt"])
    kubectl = str(Path(fleet.host.settings["KO_LINKS"]) / "kubectl")
    poll_conf, check_conf = fleet.work / "poll.conf", fleet.work / "check.conf"
    poller = Sampler(lambda: readyz(fresh_kubeconfig(fleet, poll_conf), kubectl))
    requested = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    started = time.monotonic()
    patch_spec(fleet, {"certificates": {"caRotation": {"ca": "karmada", "requestedAt": requested}}})
    phases: dict[str, float] = {}
    not_ready: list[str] = []
    checks = [0]

    def done():
        conf = fresh_kubeconfig(fleet, check_conf)
        for name in ("member1", "member3"):
            checks[0] += 1
            ready = member_ready(fleet, conf, name)
            if ready != "True":
                not_ready.append(f"{time.strftime('%H:%M:%S')} {name}: {ready}")
        rotation = fleet.get().get("status", {}).get("caRotation") or {}
        if rotation.get("requestedAt") == requested:
            phases.setdefault(rotation["phase"], time.monotonic() - started)
        return (rotation.get("requestedAt") == requested and rotation.get("phase") == "Done"
                and ready_at_generation(fleet) and rotation)

    try:
        rotation = fleet.wait_for(done, 2400, "status.caRotation Done")
    finally:
        samples = poller.finish()
    took = time.monotonic() - started
    failures = [f"{when}: {result}" for when, result in samples if result != "ok"]
    marks = sorted(phases.items(), key=lambda kv: kv[1])
    print(f"\nCA rotation Done {took:.0f}s after the request; phases first seen at "
          + ", ".join(f"{p} {at:.0f}s" for p, at in marks)
          + f"; /readyz polled {len(samples)} times, {len(failures)} failures; members checked {checks[0]} times, "
          f"{len(not_ready)} not Ready")
    fleet.extra["ca_rotation_seconds"] = took
    assert len(samples) > 60 and not failures, failures[:5]
    assert not not_ready, not_ready[:5]
    assert {"Reissuing", "Dropping", "Done"} <= set(phases), phases

    pki = {k: base64.b64decode(v) for k, v in fleet.host.get("secret", f"{NAME}-pki", "-n", NS)["data"].items()}
    (new_ca,) = pem_certs(pki["ca.crt"])
    assert new_ca != old_ca and rotation["newSerial"] == format(new_ca.serial_number, "x")
    # The old CA nowhere: the host, karmada-apiserver, both members.
    conf = fresh_kubeconfig(fleet, check_conf)
    places = {
        "host": everything(fleet.host.kubectl, "secrets,configmaps"),
        "karmada-apiserver": everything(lambda *a: fleet.karmadactl(*a, kubeconfig=conf), "secrets,configmaps")
        + everything(lambda *a: fleet.karmadactl(*a, kubeconfig=conf),
                     "mutatingwebhookconfigurations,validatingwebhookconfigurations,apiservices,"
                     "customresourcedefinitions"),
        **{name: everything(members[name].kubectl, "secrets,configmaps") for name in ("member1", "member3")},
    }
    for where, objects in places.items():
        found = ca_scan.places(objects, old_ca)
        print(f"old CA in {where}: {len(objects)} objects searched, {len(found)} holding it")
        assert not found, f"the old CA is still in {where}: {found[:10]}"
    # kube-root-ca.crt exists where kube-controller-manager publishes it (its root-ca-cert-publisher
    # is not among the controllers Karmada runs): each one there must hold the new CA alone
    root_ca = [o for o in places["karmada-apiserver"] if o["metadata"]["name"] == "kube-root-ca.crt"]
    print(f"kube-root-ca.crt ConfigMaps in karmada-apiserver: {len(root_ca)}")
    assert all(pem_certs(o["data"]["ca.crt"].encode()) == [new_ca] for o in root_ca), \
        "kube-root-ca.crt in karmada-apiserver must hold the new CA alone"
    assert ca_scan.places(places["host"], new_ca), "the new CA is where the old one was"
    # Every certificate of the Karmada CA in the host's Secrets is signed by the new one.
    signed = 0
    for secret in (o for o in places["host"] if o["kind"] == "Secret" and o["metadata"]["namespace"] == NS):
        for key, value in (secret.get("data") or {}).items():
            for cert in pem_certs(base64.b64decode(value)) + kubeconfig_client_certs(base64.b64decode(value)):
                if cert.issuer == new_ca.subject and cert != new_ca:
                    assert signed_by(cert, new_ca), f"{secret['metadata']['name']}/{key}"
                    signed += 1
    print(f"{signed} certificates of the Karmada CA in the host's Secrets (leaves and kubeconfigs' client "
          "certificates), each signed by the new CA")
    assert signed >= 15

    # Karmada still works for both members: a policy made now.
    cm = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "after-ca-rotation", "namespace": "default"},
          "data": {"k": "v"}}
    pp = {"apiVersion": "policy.karmada.io/v1alpha1", "kind": "PropagationPolicy",
          "metadata": {"name": "after-ca-rotation", "namespace": "default"},
          "spec": {"resourceSelectors": [{"apiVersion": "v1", "kind": "ConfigMap", "name": "after-ca-rotation"}],
                   "placement": {"clusterAffinity": {"clusterNames": ["member1", "member3"]},
                                 "clusterTolerations": TOLERATE_MEMBER3}}}
    fleet.karmadactl("apply", "-f", "-", input=yaml.safe_dump_all([cm, pp]), kubeconfig=conf)
    fleet.wait_for(lambda: all(members[n].kubectl("get", "configmap", "after-ca-rotation", "-n", "default",
                                                  check=False).returncode == 0 for n in ("member1", "member3")),
                   180, "the ConfigMap on member1 (Push) and member3 (Pull) through a policy made after the rotation")
    fleet.karmadactl("delete", "-f", "-", input=yaml.safe_dump_all([pp, cm]), kubeconfig=conf, check=False)


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
    """The serving pods of the plane: not a Job's (backups), not one on its way out (a rotation's
    last old pod may still be draining when the test before has seen Done)."""
    pods = fleet.host.get("pods", "-n", NS, "-l", f"app.kubernetes.io/instance={NAME}")["items"]
    return {p["metadata"]["name"]: p["metadata"]["uid"] for p in pods
            if "deletionTimestamp" not in p["metadata"]
            and not any(o["kind"] == "Job" for o in p["metadata"].get("ownerReferences") or [])}


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

    # karmada-search ran through without a restart (a liveness probe that killed it while it
    # started left the cache empty and its API answering 503)
    search = fleet.host.get("pods", "-n", NS, "-l", f"app.kubernetes.io/instance={NAME},"
                            "app.kubernetes.io/name=karmada-search")["items"]
    assert [s["restartCount"] for p in search for s in p["status"]["containerStatuses"]] == [0], search

    # metrics-adapter: the three APIs answer through karmada-apiserver's aggregator
    for path in ("/apis/metrics.k8s.io/v1beta1", "/apis/custom.metrics.k8s.io/v1beta1",
                 "/apis/custom.metrics.k8s.io/v1beta2"):
        assert yaml.safe_load(fleet.karmadactl("get", "--raw", path).stdout)["kind"] == "APIResourceList", path
    pod_metrics = yaml.safe_load(fleet.karmadactl(
        "get", "--raw", "/apis/metrics.k8s.io/v1beta1/namespaces/bookinfo/pods").stdout)
    assert pod_metrics["kind"] == "PodMetricsList"

    # Through karmada-search's aggregated API: seen once to answer 503 (ServiceUnavailable)
    # right after the reads above succeeded; a user would try again, and so does the test.
    def registry_deleted() -> bool:
        out = fleet.karmadactl("delete", "resourceregistry", "bookinfo-deployments", "--ignore-not-found",
                               check=False)
        if out.returncode != 0:
            assert "ServiceUnavailable" in out.stderr, out.stderr
            print(f"deleting the ResourceRegistry: {out.stderr.strip()}; again")
        return out.returncode == 0

    fleet.wait_for(registry_deleted, 120, "the ResourceRegistry deleted")
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


@pytest.mark.timeout(2700)
def test_karmada_e2e_suite_passes_on_the_upgraded_karmada(
        fleet: Deployment, member_clusters: list[MemberCluster], tmp_path):
    """Karmada's own e2e suite (test/e2e/suites/base of the pinned module; every group of
    hack/karmada-e2e/groups.txt, the upgrade subset among them) against this Karmada, upgraded
    from the old release, behind its balancer address, with the members and controllers set up
    the way Karmada's e2e environment has them (set before the subset ran on the old release)."""
    assert converged_on(fleet, NEW)
    fleet.wait_for(lambda: running_at_generation(fleet) and all_joined(fleet, "member1", "member2", "member3"),
                   900, "Running with 3 members")
    groups = karmada_suite.run_suite(fleet, member_clusters, ["member3"], tmp_path / "report")
    before, after = fleet.extra.get("suite_before") or set(), karmada_suite.passed_specs(tmp_path / "report")
    print(f"specs passed: {len(before)} of the upgrade subset on {OLD}; on {NEW} {len(after)} "
          f"({sum(map(len, groups.values()))} in {len(groups)} groups), every one of the {len(before)} among them")
    assert before, "the subset did not run on the old release"
    assert before <= after, f"passed on {OLD}, not on {NEW}: {sorted(before - after)}"


def test_deleting_the_deployment_unjoins_every_member_first(
        fleet: Deployment, member_clusters: list[MemberCluster]):
    """The finalizer unjoins the members through Karmada (their workloads are withdrawn, the
    member-side service accounts and roles removed) before the control plane goes."""
    members = by_name(member_clusters)
    assert bookinfo_running(members["member1"]) and bookinfo_running(members["member3"])
    before = set(fleet.runs())
    start = time.monotonic()
    fleet.host.kubectl("delete", "karmadadeployment", NAME, "-n", NS, "--wait=false")
    fleet.wait_for(lambda: fleet.host.kubectl("get", "karmadadeployment", NAME, "-n", NS,
                                              check=False).returncode != 0, 900, "the KarmadaDeployment gone")
    print(f"\ndelete with 3 members: {time.monotonic() - start:.0f}s")
    # every member's work withdrawn by Karmada, the Pull member's through its agent (not given up on)
    unjoins = karmada_e2e.unjoined([r for r in fleet.runs() if r not in before])
    assert {name: r["reason"] for name, r in unjoins.items()} == {m: "Unjoined" for m in ("member1", "member2",
                                                                                       "member3")}, unjoins
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
