"""Issue 14 (the etcd step): a change to the etcd pod template rolls etcd one member at a time,
the leader last, with etcd's quorum kept throughout, on the real host cluster with the real
ansible-operator.

One Karmada (``etcd-roll`` in karmada-system, 3 etcd members on PersistentVolumeClaims) is
installed; then an etcd flag is added (``spec.etcd.local.extraArgs``), which changes the etcd
StatefulSet's pod template. While the operator rolls etcd, every second a sampler reads the etcd
pods and a poller GETs karmada-apiserver's ``/readyz`` (which checks etcd). The test asserts:

* every member's pod was replaced and runs the StatefulSet's new revision;
* never were two members not Ready at once (sampled every second);
* the followers went first, highest ordinal first, and the pod of the member that led etcd
  before the change went last (pod creation times, and the operator's EtcdMemberRolled Events);
* karmada-apiserver's /readyz never failed;
* the KarmadaDeployment is Ready again at the new generation.
"""

from __future__ import annotations

import contextlib
import json
import time
from pathlib import Path

import pytest
import yaml

from support import karmada_e2e
from support.karmada_crds_server import serve
from support.karmada_e2e import Deployment, operator_kubeconfig
from support.operator_runtime import OperatorProcess
from support.readyz import ReadyzPoller, readyz
from support.sampling import Sampler
from support.testenv import HostCluster
from support.waiting import condition, crds_established

pytestmark = [pytest.mark.e2e, pytest.mark.extended, pytest.mark.timeout(3600)]

NS = "karmada-system"
NAME = "etcd-roll"
STS = f"{NAME}-etcd"
MEMBERS = [f"{STS}-{i}" for i in range(3)]


def ready_at_generation(fleet: Deployment) -> bool:
    obj = fleet.get()
    ready = condition(obj, "Ready")
    return ready.get("status") == "True" and ready.get("observedGeneration") == obj["metadata"]["generation"]


def etcd_pods(host: HostCluster) -> dict[str, dict]:
    """Pod name -> uid, revision, Ready, being deleted, creation time."""
    items = host.get("pods", "-n", NS, "-l", f"app.kubernetes.io/name=etcd,app.kubernetes.io/instance={NAME}")["items"]
    out = {}
    for pod in items:
        meta, status = pod["metadata"], pod.get("status", {})
        out[meta["name"]] = {
            "uid": meta["uid"], "revision": meta.get("labels", {}).get("controller-revision-hash", ""),
            "ready": any(c["type"] == "Ready" and c["status"] == "True" for c in status.get("conditions", [])),
            "terminating": bool(meta.get("deletionTimestamp")), "created": meta["creationTimestamp"]}
    return out


def not_ready_members(pods: dict[str, dict]) -> list[str]:
    return [m for m in MEMBERS if m not in pods or not pods[m]["ready"] or pods[m]["terminating"]]


def events(fleet: Deployment, reason: str) -> list[dict]:
    items = fleet.host.get("events", "-n", NS, "--field-selector",
                           f"involvedObject.kind=KarmadaDeployment,involvedObject.name={NAME},reason={reason}")["items"]
    return sorted(items, key=lambda e: int(e["metadata"]["resourceVersion"]))


@pytest.fixture(scope="module")
def fleet(host_cluster: HostCluster, bin_path, tmp_path_factory):
    work = tmp_path_factory.mktemp("etcd-roll")
    # Torn down even when the setup fails: a leftover operator would reconcile the next module's Karmada too.
    with contextlib.ExitStack() as cleanup:
        crds = serve()
        cleanup.callback(crds.stop)
        host_cluster.kubectl("apply", "-k", str(karmada_e2e.ROOT / "config/crd"))
        crds_established(host_cluster.kubectl, ["karmadadeployments.operator.karmada.io"])
        host_cluster.kubectl("create", "namespace", NS, check=False)
        operator = OperatorProcess(bin_path("ansible-operator"), operator_kubeconfig(host_cluster, work), work)
        cleanup.callback(operator.stop)
        # runs first: the Karmada is deleted while the operator still runs to finalize it
        cleanup.callback(karmada_e2e.delete_karmada, host_cluster, NS, NAME)
        operator.wait_healthy()
        cr = karmada_e2e.sample_for_test_bed(NAME, crds.url, crds.sha256)
        cr["spec"]["etcd"]["local"] = {"replicas": 3, "storage": {"type": "PersistentVolumeClaim", "size": "1Gi",
                                                                  "storageClassName": "standard"}}
        fleet = Deployment(host_cluster, operator, work, NAME, NS)
        start = time.monotonic()
        host_cluster.kubectl("apply", "-f", "-", input=yaml.safe_dump(cr))
        fleet.wait_for(lambda: ready_at_generation(fleet), 1500, "Ready with 3 etcd members")
        print(f"\napply-to-Ready with 3 etcd members: {time.monotonic() - start:.0f}s")
        yield fleet


def test_an_etcd_template_change_rolls_one_member_at_a_time_leader_last_with_quorum(fleet: Deployment):
    host = fleet.host
    sts = host.get("statefulset", STS, "-n", NS)
    assert sts["spec"]["updateStrategy"]["type"] == "OnDelete"
    before = etcd_pods(host)
    assert sorted(before) == MEMBERS and not not_ready_members(before)
    assert {p["revision"] for p in before.values()} == {sts["status"]["updateRevision"]}
    leaders = [m["name"] for m in fleet.get()["status"]["etcd"]["members"] if m.get("leader")]
    assert len(leaders) == 1, fleet.get()["status"]["etcd"]
    leader = leaders[0]
    rolled_before = len(events(fleet, "EtcdMemberRolled"))
    assert rolled_before == 0, "the first install replaced etcd pods"
    kubeconfig = fleet.kubeconfig()
    kubectl = str(Path(fleet.host.settings["KO_LINKS"]) / "kubectl")
    assert readyz(kubeconfig, kubectl) == "ok"

    pods_sampler = Sampler(lambda: etcd_pods(host))
    poller = ReadyzPoller(kubeconfig, kubectl)
    start = time.monotonic()
    try:
        host.kubectl("patch", "karmadadeployment", NAME, "-n", NS, "--type=merge",
                     "-p", json.dumps({"spec": {"etcd": {"local": {"extraArgs": {"log-level": "warn"}}}}}))
        fleet.wait_for(lambda: ready_at_generation(fleet), 1200, "Ready after the etcd change")
    finally:
        pod_samples = pods_sampler.finish()
        polls, failures = poller.finish()
    print(f"\netcd change to Ready: {time.monotonic() - start:.0f}s; {len(pod_samples)} pod samples, "
          f"{polls} /readyz polls")

    # every member replaced, on the new revision
    sts = host.get("statefulset", STS, "-n", NS)
    after = etcd_pods(host)
    new_revision = sts["status"]["updateRevision"]
    assert new_revision != next(iter(before.values()))["revision"]
    assert {m: p["revision"] for m, p in after.items()} == dict.fromkeys(MEMBERS, new_revision)
    assert all(after[m]["uid"] != before[m]["uid"] for m in MEMBERS)
    assert not not_ready_members(after)

    # one at a time: never two members not Ready in any sample
    broken = [(t, s) for t, s in pod_samples if isinstance(s, Exception)]
    assert len(broken) <= 2, broken  # a kubectl hiccup or two, not a blind spot
    down = [(t, not_ready_members(s)) for t, s in pod_samples if not isinstance(s, Exception)]
    print("members not Ready over time:", [(t, d) for t, d in down if d])
    assert max(len(d) for _, d in down) == 1, "no member was seen down: the sampler missed the rollout"
    assert all(len(d) <= 1 for _, d in down), [(t, d) for t, d in down if len(d) > 1]

    # followers first (highest ordinal first), the former leader last
    followers = sorted((m for m in MEMBERS if m != leader), key=lambda m: -int(m.rsplit("-", 1)[1]))
    by_creation = sorted(MEMBERS, key=lambda m: after[m]["created"])
    assert by_creation == [*followers, leader], (by_creation, leader)
    rolled = events(fleet, "EtcdMemberRolled")[rolled_before:]
    print("EtcdMemberRolled:", [e["message"] for e in rolled])
    assert [e["message"].split()[2] for e in rolled] == [*followers, leader]
    assert "the leader" in rolled[-1]["message"] and all("a follower" in e["message"] for e in rolled[:2])

    # quorum throughout: karmada-apiserver's /readyz (it checks etcd) never failed
    assert polls >= 20 and not failures, failures
