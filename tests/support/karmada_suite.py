"""Karmada's own end-to-end suite against a Karmada our operator installed.

``test/e2e/suites/base`` of the pinned Karmada module, compiled by ``hack/karmada-e2e/build.sh``
and run by ``hack/karmada-e2e/run.sh`` on the spec groups of a groups file
(``hack/karmada-e2e/groups.txt`` by default; docs/testing.md says why the other groups cannot
run here). :func:`run_suite` asserts the suite's own verdict: ginkgo's exit code and its JSON
report (specs run, none failed, every listed group ran at least one spec).
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path

import yaml

from support import karmada_e2e
from support.karmada_e2e import Deployment
from support.testenv import MemberCluster

HACK = karmada_e2e.ROOT / "hack" / "karmada-e2e"
GROUPS = HACK / "groups.txt"
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


def build() -> None:
    """The suite binary, ginkgo and karmadactl (skipped when built: seconds)."""
    proc = subprocess.run([str(HACK / "build.sh")], capture_output=True, text=True, timeout=3600)
    assert proc.returncode == 0, f"hack/karmada-e2e/build.sh failed:\n{proc.stderr[-4000:]}"


def groups(path: Path = GROUPS) -> list[str]:
    """The spec groups (top-level Describe texts) a groups file lists."""
    return [line for line in path.read_text().splitlines()
            if line.strip() and not line.startswith(("#", "skip "))]


def _entry(source: dict) -> tuple[dict, dict]:
    context = next(c for c in source["contexts"] if c["name"] == source["current-context"])["context"]
    cluster = next(c for c in source["clusters"] if c["name"] == context["cluster"])["cluster"]
    user = next(u for u in source["users"] if u["name"] == context["user"])["user"]
    return cluster, user


def _write(conf: dict, path: Path) -> Path:
    path.write_text(yaml.safe_dump(conf))
    path.chmod(0o600)
    return path


def suite_kubeconfig(karmada: Deployment, via_service: bool = False) -> Path:
    """One kubeconfig with the contexts the suite asks for: karmada-host (the host cluster) and
    karmada-apiserver (the admin kubeconfig the operator wrote, naming the balancer address:
    karmadactl's member commands override the server with the cluster-proxy URL, and client-go
    then drops a tls-server-name, so the address must be in the serving certificate).
    ``via_service``: through the Service's ClusterIP instead (no balancer; then the groups must
    leave out karmadactl's member commands)."""
    conf: dict = {"apiVersion": "v1", "kind": "Config", "clusters": [], "users": [], "contexts": [],
                  "current-context": "karmada-apiserver"}
    for name, path in (("karmada-host", karmada.host.kubeconfig), ("karmada-apiserver",
                                                                   karmada.kubeconfig(via_service=via_service))):
        cluster, user = _entry(yaml.safe_load(path.read_text()))
        conf["clusters"].append({"name": name, "cluster": cluster})
        conf["users"].append({"name": name, "user": user})
        conf["contexts"].append({"name": name, "context": {"cluster": name, "user": name}})
    return _write(conf, karmada.work / "karmada.config")


def pull_members_kubeconfig(karmada: Deployment, members: list[MemberCluster], names: list[str]) -> Path:
    """The Pull members' kubeconfig, one context per member named after it (the suite reaches a
    Pull member directly, PULL_BASED_CLUSTERS=<name>:<file>)."""
    conf: dict = {"apiVersion": "v1", "kind": "Config", "clusters": [], "users": [], "contexts": [],
                  "current-context": names[0] if names else ""}
    for member in (m for m in members if m.name in names):
        cluster, user = _entry(yaml.safe_load(member.kubeconfig.read_text()))
        conf["clusters"].append({"name": member.name, "cluster": cluster})
        conf["users"].append({"name": member.name, "user": user})
        conf["contexts"].append({"name": member.name, "context": {"cluster": member.name, "user": member.name}})
    return _write(conf, karmada.work / "members.config")


def passed_specs(report_dir: Path) -> set[str]:
    """The full text of every spec that passed in a run's report."""
    suite = json.loads((report_dir / "report.json").read_text())[0]
    return {" ".join([*s["ContainerHierarchyTexts"], s["LeafNodeText"]]) for s in suite["SpecReports"]
            if s["LeafNodeType"] == "It" and s["State"] == "passed"}


def run_suite(karmada: Deployment, members: list[MemberCluster], pull: list[str], report_dir: Path,
              groups_file: Path = GROUPS, timeout: float = 1800, via_service: bool = False) -> dict[str, list[str]]:
    """Run the suite's groups against ``karmada`` and assert it passed; the spec states per group.
    ``pull``: the Pull members (their kubeconfigs go to the suite)."""
    env = dict(os.environ, KUBECONFIG=str(suite_kubeconfig(karmada, via_service)),
               KARMADA_E2E_GROUPS=str(groups_file))
    if pull:
        members_file = pull_members_kubeconfig(karmada, members, pull)
        env["PULL_BASED_CLUSTERS"] = ";".join(f"{name}:{members_file}" for name in pull)
    start = time.monotonic()
    proc = subprocess.run([str(HACK / "run.sh"), str(report_dir)], env=env, capture_output=True, text=True,
                          timeout=timeout)
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
    # Every listed group ran (a focus that matches nothing, after an upgrade renamed a group,
    # would otherwise pass quietly).
    missing = sorted(set(groups(groups_file)) - set(by_group))
    assert not missing, f"groups that ran no spec: {missing}"
    return by_group
