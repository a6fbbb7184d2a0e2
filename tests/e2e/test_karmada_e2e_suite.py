"""Karmada's own end-to-end suite against a Karmada our operator installed.

The real ansible-operator installs a small Karmada (one etcd member) named ``suite`` with the
test bed's three kwok members joined the way Karmada's e2e environment joins its own:
member1 and member2 Push, member3 Pull (its karmada-agent next to Karmada: kwok nodes run no
containers). Then Karmada's suite, ``test/e2e/suites/base`` of the pinned module compiled by
``hack/karmada-e2e/build.sh``, runs through ``hack/karmada-e2e/run.sh`` on the spec groups of
``hack/karmada-e2e/groups.txt`` (docs/testing.md says why the other groups cannot run here).
The test asserts the suite's own verdict: ginkgo's exit code and its JSON report (specs run,
none failed, every listed group ran).
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path

import pytest
import yaml

from support import karmada_e2e
from support.karmada_crds_server import serve
from support.karmada_e2e import Deployment, operator_kubeconfig
from support.operator_runtime import OperatorProcess
from support.testenv import HostCluster, MemberCluster
from support.waiting import condition, crds_established

# extended until it shares a Karmada with test_karmada_member_clusters.py: with its own install
# and teardown (60 % of its 668 s) `make test` would pass CI's 60-minute goal.
pytestmark = [pytest.mark.e2e, pytest.mark.extended, pytest.mark.timeout(4500)]

HACK = karmada_e2e.ROOT / "hack" / "karmada-e2e"
NS = "karmada-system"
NAME = "suite"
# test_karmada_member_clusters.py's Karmada uses 31443; modules run one after the other anyway.
NODE_PORT = 31543
# Karmada's e2e environment (hack/local-up-karmada.sh): member1 and member2 Push, member3 Pull.
MEMBERS = [
    {"name": "member1", "kubeconfigSecretRef": {"name": "member1-kubeconfig"}, "syncMode": "Push"},
    {"name": "member2", "kubeconfigSecretRef": {"name": "member2-kubeconfig"}, "syncMode": "Push"},
    {"name": "member3", "kubeconfigSecretRef": {"name": "member3-kubeconfig"}, "syncMode": "Pull",
     "agentPlacement": "Host"},
]
# What Karmada's e2e environment runs its controllers with (artifacts/deploy of the module):
# the two controllers off by default that the suite's specs need, every alpha and beta feature.
GATES = {"AllAlpha": True, "AllBeta": True}
COMPONENTS = {
    "controllerManager": {"featureGates": GATES,
                          "extraArgs": {"controllers": "*,hpaScaleTargetMarker,deploymentReplicasSyncer",
                                        "enable-no-execute-taint-eviction": "true"}},
    "scheduler": {"featureGates": GATES},
    "webhook": {"featureGates": GATES},
    "descheduler": {"enabled": False},
}


def groups() -> list[str]:
    """The spec groups (top-level Describe texts) run.sh runs: groups.txt, or KARMADA_E2E_GROUPS."""
    lines = Path(os.environ.get("KARMADA_E2E_GROUPS") or HACK / "groups.txt").read_text().splitlines()
    return [line for line in lines if line.strip() and not line.startswith(("#", "skip "))]


def all_joined(karmada: Deployment) -> bool:
    obj = karmada.get()
    status = obj.get("status", {})
    joined = {m["name"] for m in status.get("members", []) if m["state"] == "Joined" and m["ready"]}
    ready = condition(obj, "Ready")
    return (joined == {m["name"] for m in MEMBERS} and ready.get("status") == "True"
            and ready.get("observedGeneration") == obj["metadata"]["generation"]
            and condition(obj, "MembersReady").get("status") == "True")


@pytest.fixture(scope="module")
def karmada(host_cluster: HostCluster, member_clusters: list[MemberCluster], bin_path, tmp_path_factory):
    assert len(member_clusters) >= 3, "set KO_TESTENV_MEMBERS to 3 or more"
    build = subprocess.run([str(HACK / "build.sh")], capture_output=True, text=True, timeout=3600)
    assert build.returncode == 0, f"hack/karmada-e2e/build.sh failed:\n{build.stderr[-4000:]}"
    work = tmp_path_factory.mktemp("karmada-e2e")
    crds = serve()
    operator = None
    try:
        host_cluster.kubectl("apply", "-k", str(karmada_e2e.ROOT / "config/crd"))
        crds_established(host_cluster.kubectl, ["karmadadeployments.operator.karmada.io"])
        host_cluster.kubectl("create", "namespace", NS, check=False)
        operator = OperatorProcess(bin_path("ansible-operator"), operator_kubeconfig(host_cluster, work), work)
        operator.wait_healthy()
        cr = karmada_e2e.sample_for_test_bed(NAME, crds.url, crds.sha256)
        cr["spec"]["members"] = MEMBERS
        cr["spec"]["components"] = COMPONENTS
        # karmada-apiserver behind a balancer, as users reach it: the node's address and a node
        # port. The admin kubeconfig then names that address, which is in the serving certificate.
        # Through the Service's ClusterIP (not in the certificate; kubeconfig(via_service=True)
        # verifies the Service's DNS name with tls-server-name) karmadactl's member commands fail:
        # they override the server with the cluster-proxy URL, and client-go then drops
        # tls-server-name.
        node_ip = host_cluster.node_ip
        cr["spec"]["apiServer"] = {"replicas": 1, "serviceType": "NodePort", "nodePort": NODE_PORT,
                                   "externalLoadBalancer": {"addresses": [node_ip], "port": NODE_PORT}}
        deployment = Deployment(host_cluster, operator, work, NAME, NS)
        start = time.monotonic()
        host_cluster.kubectl("apply", "-f", "-", input=yaml.safe_dump(cr))
        deployment.wait_for(lambda: all_joined(deployment), 900, "Ready with member1-3 joined")
        print(f"\napply-to-3-members-joined: {time.monotonic() - start:.0f}s")
        yield deployment
    finally:
        if operator is not None:
            # The finalizer (unjoin every member, then remove the plane) needs the operator running.
            host_cluster.kubectl("delete", "karmadadeployment", NAME, "-n", NS, "--ignore-not-found",
                                 "--timeout=600s", check=False, timeout=660)
            operator.stop()
        crds.stop()


def suite_kubeconfig(karmada: Deployment) -> Path:
    """One kubeconfig with the contexts the suite asks for: karmada-host (the host cluster) and
    karmada-apiserver (the admin kubeconfig the operator wrote, naming the balancer address)."""
    host = yaml.safe_load(karmada.host.kubeconfig.read_text())
    plane = yaml.safe_load(karmada.kubeconfig(via_service=False).read_text())
    conf: dict = {"apiVersion": "v1", "kind": "Config", "clusters": [], "users": [], "contexts": [],
                  "current-context": "karmada-apiserver"}
    for name, source in (("karmada-host", host), ("karmada-apiserver", plane)):
        context = next(c for c in source["contexts"] if c["name"] == source["current-context"])["context"]
        cluster = next(c for c in source["clusters"] if c["name"] == context["cluster"])["cluster"]
        user = next(u for u in source["users"] if u["name"] == context["user"])["user"]
        conf["clusters"].append({"name": name, "cluster": cluster})
        conf["users"].append({"name": name, "user": user})
        conf["contexts"].append({"name": name, "context": {"cluster": name, "user": name}})
    path = karmada.work / "karmada.config"
    path.write_text(yaml.safe_dump(conf))
    path.chmod(0o600)
    return path


def pull_members_kubeconfig(karmada: Deployment, members: list[MemberCluster]) -> tuple[Path, list[str]]:
    """The Pull members' kubeconfig, one context per member named after it (the suite reaches a
    Pull member directly, PULL_BASED_CLUSTERS=<name>:<file>)."""
    conf: dict = {"apiVersion": "v1", "kind": "Config", "clusters": [], "users": [], "contexts": []}
    names = [m["name"] for m in MEMBERS if m["syncMode"] == "Pull"]
    for member in (m for m in members if m.name in names):
        source = yaml.safe_load(member.kubeconfig.read_text())
        context = next(c for c in source["contexts"] if c["name"] == source["current-context"])["context"]
        conf["clusters"].append({"name": member.name, "cluster": next(
            c for c in source["clusters"] if c["name"] == context["cluster"])["cluster"]})
        conf["users"].append({"name": member.name, "user": next(
            u for u in source["users"] if u["name"] == context["user"])["user"]})
        conf["contexts"].append({"name": member.name, "context": {"cluster": member.name, "user": member.name}})
    conf["current-context"] = names[0]
    path = karmada.work / "members.config"
    path.write_text(yaml.safe_dump(conf))
    path.chmod(0o600)
    return path, names


@pytest.mark.timeout(3000)
def test_karmada_e2e_suite_passes_on_the_operator_installed_karmada(
        karmada: Deployment, member_clusters: list[MemberCluster], tmp_path: Path):
    members_file, pull = pull_members_kubeconfig(karmada, member_clusters)
    env = dict(os.environ, KUBECONFIG=str(suite_kubeconfig(karmada)),
               PULL_BASED_CLUSTERS=";".join(f"{name}:{members_file}" for name in pull))
    report_dir = tmp_path / "report"
    start = time.monotonic()
    proc = subprocess.run([str(HACK / "run.sh"), str(report_dir)], env=env, capture_output=True, text=True,
                          timeout=1500)
    elapsed = time.monotonic() - start
    log = proc.stdout + proc.stderr
    summary = [line for line in log.splitlines() if line.startswith(("Ran ", "SUCCESS!", "FAIL!"))]
    print(f"\nKarmada e2e suite: {elapsed:.0f}s, exit {proc.returncode}; {' / '.join(summary)}; report {report_dir}")

    report_file = report_dir / "report.json"
    assert report_file.exists(), f"ginkgo wrote no report (exit {proc.returncode}):\n{log[-6000:]}"
    suite = json.loads(report_file.read_text())[0]
    specs = [s for s in suite["SpecReports"] if s["LeafNodeType"] == "It"]
    ran = [s for s in specs if s["State"] not in ("skipped", "pending")]
    failed = [s for s in ran if s["State"] != "passed"]
    by_group: dict[str, list[str]] = {}
    for spec in ran:
        by_group.setdefault(spec["ContainerHierarchyTexts"][0], []).append(spec["State"])
    print("\n".join(f"  {group}: {len(states)} specs, {states.count('passed')} passed"
                    for group, states in sorted(by_group.items())))

    def describe(spec: dict) -> str:
        failure = spec.get("Failure") or {}
        where = failure.get("Location", {})
        return (f"{' '.join(spec['ContainerHierarchyTexts'])} {spec['LeafNodeText']}: {spec['State']}: "
                f"{failure.get('Message', '')[:800]} ({where.get('FileName', '')}:{where.get('LineNumber', '')})")

    assert not failed, f"{len(failed)} of {len(ran)} specs failed:\n" + "\n".join(describe(s) for s in failed)
    assert proc.returncode == 0, f"ginkgo exited {proc.returncode} with no failed spec in its report:\n{log[-6000:]}"
    assert suite["SuiteSucceeded"] is True
    assert ran, "the suite ran no spec"
    # Every group groups.txt lists ran (a focus that matches nothing, after an upgrade renamed
    # a group, would otherwise pass quietly).
    assert set(groups()) <= set(by_group), f"groups that ran no spec: {sorted(set(groups()) - set(by_group))}"
