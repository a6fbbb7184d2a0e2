"""etcd's day 2 on one live Karmada, in order (issues 14 and 15), on the real host cluster with
the real ansible-operator: scaling through spec.etcd.local.replicas, a rolling change of the etcd
pod template, the replacement of a lost member, and a scale-in refused while a member is down and
carried out once it is back.

One Karmada (``etcd-scale`` in karmada-system, etcd on PersistentVolumeClaims, deletionPolicy
Delete) is installed with 1 etcd member; its life: 1 -> 3 -> 5 -> 3 under a writer, an etcd flag
added (the template rolls, leader last), member 1's claim and pod deleted (replaced), member 1's
process stopped while the spec asks for 1 (refused), then let go (3 -> 1 goes through). A writer
creates ConfigMaps through karmada-apiserver during each step. The tests assert:

* every ConfigMap whose create karmada-apiserver acknowledged exists at the end, and the longest
  run of failed creates is at most MAX_OUTAGE seconds (a quorum lost for minutes fails the test
  even when no acknowledged write is lost);
* after each size, status.etcd.members lists exactly the members etcd itself reports (all
  voters), the StatefulSet has that many replicas, and the claims of removed members are gone;
  status.etcdScaling names the count and the last change's steps (learners added then promoted,
  removals from the highest ordinal);
* karmada-apiserver's pods were never replaced or restarted by scaling;
* the template change replaces one member at a time (never two not Ready in a per-second sample),
  followers first, the leader last, with karmada-apiserver's /readyz answering every second;
* with 3 members, deleting one member's claim and pod gets that member replaced without a manual
  step (a new etcd member ID under the same name, on a new claim), an Event EtcdMemberReplaced
  and the EtcdReady message saying so;
* scaling in while one member is down is refused: EtcdReady False with reason EtcdScaleRefused and
  a message naming the member, and nothing changes (replicas, etcd's members, claims); once the
  member is back, the same spec goes through to 1 member without another edit;
* etcd's defragmentation: a fragmented etcd defragmented automatically, one member per pass,
  followers first, the leader last; on a schedule, every member at the tick; a full etcd
  (NOSPACE) recovered without a human; a node drain evicting one etcd member at a time.
"""

from __future__ import annotations

import base64
import concurrent.futures
import contextlib
import itertools
import json
import os
import signal
import subprocess
import threading
import time
from pathlib import Path

import pytest
import yaml

from karmada_operator.etcd.gateway import EtcdClient, b64, prefix_end, tls_files
from karmada_operator.plan.plan import build_plan
from support import karmada_e2e
from support.karmada_crds_server import serve
from support.karmada_e2e import Deployment, operator_kubeconfig
from support.operator_runtime import OperatorProcess
from support.readyz import ReadyzPoller, readyz
from support.sampling import Sampler
from support.testenv import HostCluster
from support.waiting import condition, crds_established
from support.writer import Writer

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(2400)]

NS = "karmada-system"
NAME = "etcd-scale"
STS = f"{NAME}-etcd"
PKI = "/etc/kubernetes/pki/etcd"
# The longest run of failed writes a step may cause: a member added or removed, or a pod rolled,
# costs a leader election at most (etcd's election timeout is 1 s); ten seconds of refused writes
# would be a quorum lost, which no step may do.
MAX_OUTAGE = 10.0


def ready_at_generation(fleet: Deployment) -> bool:
    obj = fleet.get()
    ready = condition(obj, "Ready")
    return ready.get("status") == "True" and ready.get("observedGeneration") == obj["metadata"]["generation"]


def etcd_members(host: HostCluster) -> list[dict]:
    """etcd's own member list (etcdctl in the member-0 pod, with the member's certificate)."""
    out = host.kubectl("exec", "-n", NS, f"{STS}-0", "-c", "etcd", "--", "etcdctl",
                       "--endpoints=https://127.0.0.1:2379", f"--cacert={PKI}/ca.crt", f"--cert={PKI}/server.crt",
                       f"--key={PKI}/server.key", "member", "list", "-w", "json").stdout
    return json.loads(out).get("members") or []


def apiserver_pods(host: HostCluster) -> dict[str, tuple[str, int]]:
    """karmada-apiserver's pods: name -> (uid, restarts)."""
    items = host.get("pods", "-n", NS, "-l", f"app.kubernetes.io/instance={NAME}")["items"]
    return {p["metadata"]["name"]: (p["metadata"]["uid"],
                                    sum(c.get("restartCount", 0) for c in (p.get("status") or {}).get(
                                        "containerStatuses") or []))
            for p in items if p["metadata"]["name"].startswith(f"{NAME}-apiserver-")}


def etcd_restarts(host: HostCluster) -> dict[str, int]:
    """etcd's pods: name -> container restarts."""
    items = host.get("pods", "-n", NS, "-l", f"app.kubernetes.io/name=etcd,app.kubernetes.io/instance={NAME}")["items"]
    return {p["metadata"]["name"]: sum(c.get("restartCount", 0) for c in (p.get("status") or {}).get(
        "containerStatuses") or []) for p in items}


def claims(host: HostCluster) -> list[str]:
    items = host.get("pvc", "-n", NS, "-l", f"app.kubernetes.io/name=etcd,app.kubernetes.io/instance={NAME}")["items"]
    return sorted(p["metadata"]["name"] for p in items if not p["metadata"].get("deletionTimestamp"))


def scale_to(fleet: Deployment, n: int) -> float:
    start = time.monotonic()
    fleet.host.kubectl("patch", "karmadadeployment", NAME, "-n", NS, "--type=merge",
                       "-p", json.dumps({"spec": {"etcd": {"local": {"replicas": n}}}}))
    fleet.wait_for(lambda: ready_at_generation(fleet) and len(fleet.get()["status"]["etcd"]["members"]) == n,
                   1500, f"Ready with {n} etcd members")
    return time.monotonic() - start


def check_scaling_record(fleet: Deployment, before: int, n: int) -> None:
    """status.etcdScaling after a scale from ``before`` to ``n`` members (read against etcd's own
    member list by assert_members first): the count, and the last change one step per member,
    learners added then promoted going out, removed from the highest ordinal coming in."""
    record = fleet.get()["status"]["etcdScaling"]
    assert (record["members"], record["replicas"]) == (n, n), record
    change = record["lastChange"]
    assert (change["from"], change["to"]) == (before, n), change
    steps = [(s["action"], s["member"]) for s in change["steps"]]
    if n > before:
        assert steps == [(a, f"{STS}-{i}") for i in range(before, n) for a in ("add", "promote")], steps
    else:
        assert steps == [("remove", f"{STS}-{i}") for i in reversed(range(n, before))], steps


def assert_members(fleet: Deployment, n: int) -> None:
    host = fleet.host
    etcd = etcd_members(host)
    assert len(etcd) == n and not any(m.get("isLearner") for m in etcd), etcd
    status = fleet.get()["status"]["etcd"]["members"]
    assert sorted(m["name"] for m in status) == sorted(m["name"] for m in etcd) == [f"{STS}-{i}" for i in range(n)]
    assert {m["id"] for m in status} == {format(int(m["ID"]), "x") for m in etcd}, (status, etcd)
    assert host.get("statefulset", STS, "-n", NS)["spec"]["replicas"] == n
    assert claims(host) == [f"data-{STS}-{i}" for i in range(n)]


@pytest.fixture(scope="module")
def fleet(host_cluster: HostCluster, bin_path, tmp_path_factory):
    work = tmp_path_factory.mktemp("etcd-scale")
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
        # Test-only period: a lost member, or a member back after a refusal, is acted on by the
        # next pass, which nothing but the periodic reconcile starts (the runtime does not
        # reconcile on a dependent's status, and etcd's pods and claims are not watched). The
        # default period is watches.yaml's 10m (docs/etcd.md says so); 15s keeps the tests short.
        cr["metadata"].setdefault("annotations", {})["ansible.sdk.operatorframework.io/reconcile-period"] = "15s"
        cr["spec"]["etcd"]["local"] = {"replicas": 1, "storage": {"type": "PersistentVolumeClaim", "size": "2Gi",
                                                                  "storageClassName": "standard"},
                                       # room for the defragmentation test's 480 MiB, small enough for
                                       # the NOSPACE test to fill in seconds
                                       "quotaBackendBytes": QUOTA}
        fleet = Deployment(host_cluster, operator, work, NAME, NS)
        start = time.monotonic()
        host_cluster.kubectl("apply", "-f", "-", input=yaml.safe_dump(cr))
        fleet.wait_for(lambda: ready_at_generation(fleet), 1500, "Ready with 1 etcd member")
        print(f"\napply-to-Ready with 1 etcd member: {time.monotonic() - start:.0f}s")
        yield fleet


def assert_writes_kept(writer: Writer, at_least: int) -> None:
    """Every acknowledged create is there, and creates never failed for more than MAX_OUTAGE."""
    existing = writer.existing()
    lost = [n for n in writer.acked if n not in existing]
    print(f"{writer.summary()}; {len(existing)} ConfigMaps exist, {len(lost)} acknowledged ones missing;"
          f" failed: {writer.failures[:5]}")
    assert len(writer.acked) >= at_least and not lost, lost[:20]
    assert writer.longest_outage() <= MAX_OUTAGE, (writer.longest_outage(), writer.failures[:20])


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


def etcd_pods_ready(host: HostCluster, n: int) -> bool:
    """Exactly members 0..n-1 have a pod, each Ready and none going away."""
    pods = etcd_pods(host)
    return sorted(pods) == [f"{STS}-{i}" for i in range(n)] and all(p["ready"] and not p["terminating"]
                                                                     for p in pods.values())


def not_ready_members(pods: dict[str, dict], members: list[str]) -> list[str]:
    return [m for m in members if m not in pods or not pods[m]["ready"] or pods[m]["terminating"]]


def events(fleet: Deployment, reason: str) -> list[dict]:
    """This KarmadaDeployment's Events of one reason, oldest first (by UID: Events of an earlier
    Karmada of the same name outlive it by an hour)."""
    uid = fleet.get()["metadata"]["uid"]
    items = fleet.host.get("events", "-n", NS, "--field-selector",
                           f"involvedObject.kind=KarmadaDeployment,involvedObject.uid={uid},reason={reason}")["items"]
    return sorted(items, key=lambda e: int(e["metadata"]["resourceVersion"]))


def at_three(fleet: Deployment) -> None:
    """Where each later step starts (a no-op after the step before it): 3 members, every pod Ready."""
    scale_to(fleet, 3)
    assert_members(fleet, 3)
    fleet.wait_for(lambda: etcd_pods_ready(fleet.host, 3), 600, "exactly 3 etcd pods, each Ready")


def test_1_3_5_3_under_a_writer_keeps_every_acknowledged_write_and_karmada_apiserver(fleet: Deployment):
    host = fleet.host
    assert_members(fleet, 1)
    bootstrap = host.get("configmap", f"{NAME}-etcd-bootstrap", "-n", NS)["data"]
    assert bootstrap["ETCD_INITIAL_CLUSTER_STATE"] == "existing", bootstrap
    revision = host.get("statefulset", STS, "-n", NS)["status"]["updateRevision"]
    apiservers = apiserver_pods(host)
    assert apiservers
    writer = Writer(fleet.kubeconfig())
    timings = []
    try:
        fleet.wait_for(lambda: len(writer.acked) >= 20, 60, "the writer's first acknowledged creates")
        before = 1
        for n in (3, 5, 3):
            seconds = scale_to(fleet, n)
            timings.append((n, round(seconds)))
            assert_members(fleet, n)
            check_scaling_record(fleet, before, n)
            # every joiner started once: its peers took it for a peer by its certificate, not by a
            # DNS name of its new pod that cluster DNS had not published yet (docs/etcd.md)
            assert set(etcd_restarts(host).values()) == {0}, etcd_restarts(host)
            before = n
            print(f"scaled to {n} in {seconds:.0f}s; {len(writer.acked)} writes acknowledged so far")
        acked = len(writer.acked)
        fleet.wait_for(lambda: len(writer.acked) >= acked + 20, 60, "creates acknowledged after the last step")
    finally:
        writer.finish()
    print(f"\ntimings {timings}")
    assert_writes_kept(writer, 100)
    # scaling rewrote the bootstrap ConfigMap only: no new pod template revision
    assert host.get("statefulset", STS, "-n", NS)["status"]["updateRevision"] == revision
    assert apiserver_pods(host) == apiservers, "karmada-apiserver's pods were replaced or restarted"
    added = [e["message"] for e in events(fleet, "EtcdMemberAdded")]
    assert len(added) >= 4, added  # 1->3 and 3->5


def test_an_etcd_template_change_rolls_one_member_at_a_time_leader_last_with_quorum(fleet: Deployment):
    host = fleet.host
    at_three(fleet)
    members = [f"{STS}-{i}" for i in range(3)]
    sts = host.get("statefulset", STS, "-n", NS)
    assert sts["spec"]["updateStrategy"]["type"] == "OnDelete"
    before = etcd_pods(host)
    assert {p["revision"] for p in before.values()} == {sts["status"]["updateRevision"]}
    leaders = [m["name"] for m in fleet.get()["status"]["etcd"]["members"] if m.get("leader")]
    assert len(leaders) == 1, fleet.get()["status"]["etcd"]
    leader = leaders[0]
    assert not events(fleet, "EtcdMemberRolled"), "the install or scaling replaced etcd pods"
    kubeconfig = fleet.kubeconfig()
    kubectl = str(Path(fleet.host.settings["KO_LINKS"]) / "kubectl")
    assert readyz(kubeconfig, kubectl) == "ok"

    pods_sampler = Sampler(lambda: etcd_pods(host))
    poller = ReadyzPoller(kubeconfig, kubectl)
    writer = Writer(kubeconfig, prefix="roll")
    start = time.monotonic()
    try:
        host.kubectl("patch", "karmadadeployment", NAME, "-n", NS, "--type=merge",
                     "-p", json.dumps({"spec": {"etcd": {"local": {"extraArgs": {"log-level": "warn"}}}}}))
        fleet.wait_for(lambda: ready_at_generation(fleet), 1200, "Ready after the etcd change")
    finally:
        writer.finish()
        pod_samples = pods_sampler.finish()
        polls, failures = poller.finish()
    print(f"\netcd change to Ready: {time.monotonic() - start:.0f}s; {len(pod_samples)} pod samples, "
          f"{polls} /readyz polls, {len(failures)} failed; writer: {writer.summary()}")

    # every member replaced, on the new revision
    sts = host.get("statefulset", STS, "-n", NS)
    after = etcd_pods(host)
    new_revision = sts["status"]["updateRevision"]
    assert new_revision != next(iter(before.values()))["revision"]
    assert {m: p["revision"] for m, p in after.items()} == dict.fromkeys(members, new_revision)
    assert all(after[m]["uid"] != before[m]["uid"] for m in members)
    assert not not_ready_members(after, members)

    # one at a time: never two members not Ready in any sample
    broken = [(t, s) for t, s in pod_samples if isinstance(s, Exception)]
    assert len(broken) <= 2, broken  # a kubectl hiccup or two, not a blind spot
    down = [(t, not_ready_members(s, members)) for t, s in pod_samples if not isinstance(s, Exception)]
    print("members not Ready over time:", [(t, d) for t, d in down if d])
    assert max(len(d) for _, d in down) == 1, "no member was seen down: the sampler missed the rollout"
    assert all(len(d) <= 1 for _, d in down), [(t, d) for t, d in down if len(d) > 1]

    # followers first (highest ordinal first), the former leader last
    followers = sorted((m for m in members if m != leader), key=lambda m: -int(m.rsplit("-", 1)[1]))
    by_creation = sorted(members, key=lambda m: after[m]["created"])
    assert by_creation == [*followers, leader], (by_creation, leader)
    rolled = events(fleet, "EtcdMemberRolled")
    print("EtcdMemberRolled:", [e["message"] for e in rolled])
    assert [e["message"].split()[2] for e in rolled] == [*followers, leader]
    assert "the leader" in rolled[-1]["message"] and all("a follower" in e["message"] for e in rolled[:2])

    # quorum throughout: karmada-apiserver's /readyz (it checks etcd) never failed, writes kept
    assert polls >= 20 and not failures, failures
    assert_writes_kept(writer, 50)


def evict(host: HostCluster, pod: str) -> subprocess.CompletedProcess:
    """Ask for ``pod``'s eviction through the Eviction API, as ``kubectl drain`` does."""
    body = {"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": pod, "namespace": NS}}
    return host.kubectl("create", "--raw", f"/api/v1/namespaces/{NS}/pods/{pod}/eviction", "-f", "-",
                        input=json.dumps(body), check=False)


def disruptions_allowed(host: HostCluster) -> int:
    return int((host.get("pdb", STS, "-n", NS).get("status") or {}).get("disruptionsAllowed", -1))


def test_a_drain_evicts_one_etcd_member_at_a_time(fleet: Deployment):
    """The PodDisruptionBudget over etcd's pods: a second eviction is refused (429) while the
    first member is away, and allowed once it is back and Ready; no acknowledged write lost."""
    host = fleet.host
    at_three(fleet)
    budget = host.get("pdb", STS, "-n", NS)
    assert budget["spec"]["maxUnavailable"] == 1, budget["spec"]
    fleet.wait_for(lambda: disruptions_allowed(host) == 1, 120, "the budget allowing one disruption")
    writer = Writer(fleet.kubeconfig(), prefix="drain")
    try:
        fleet.wait_for(lambda: len(writer.acked) >= 20, 60, "the writer's first acknowledged creates")
        first = evict(host, f"{STS}-2")
        assert first.returncode == 0, first.stderr
        second = evict(host, f"{STS}-1")
        print(f"\nsecond eviction while {STS}-2 is away: rc={second.returncode} {second.stderr.strip()}")
        assert second.returncode != 0 and "TooManyRequests" in second.stderr, second.stderr
        assert "disruption budget" in second.stderr, second.stderr
        assert not etcd_pods(host)[f"{STS}-1"]["terminating"]
        fleet.wait_for(lambda: etcd_pods_ready(host, 3) and disruptions_allowed(host) == 1, 600,
                       f"{STS}-2 back and Ready, one disruption allowed again")
        third = evict(host, f"{STS}-1")
        assert third.returncode == 0, third.stderr
        fleet.wait_for(lambda: etcd_pods_ready(host, 3) and disruptions_allowed(host) == 1, 600,
                       f"{STS}-1 back and Ready")
        acked = len(writer.acked)
        fleet.wait_for(lambda: len(writer.acked) >= acked + 20, 60, "creates acknowledged after the drain")
    finally:
        writer.finish()
    assert_members(fleet, 3)
    assert_writes_kept(writer, 40)


def test_a_lost_member_is_replaced(fleet: Deployment):
    """Delete one member's claim and pod: the operator replaces the member by itself."""
    host = fleet.host
    lost = f"{STS}-1"
    at_three(fleet)
    # the operator has recorded each member's ID and claim (what a replaced claim is told from)
    fleet.wait_for(lambda: len(json.loads(
        (host.get("configmap", f"{NAME}-etcd-bootstrap", "-n", NS)["metadata"].get("annotations") or {}).get(
            "operator.karmada.io/etcd-member-volumes", "{}"))) == 3, 700, "3 members' volumes recorded")
    before = {m["name"]: format(int(m["ID"]), "x") for m in etcd_members(host)}
    claim_uid = host.get("pvc", f"data-{lost}", "-n", NS)["metadata"]["uid"]
    writer = Writer(fleet.kubeconfig(), prefix="lost")
    start = time.monotonic()
    try:
        fleet.wait_for(lambda: len(writer.acked) >= 20, 60, "the writer's first acknowledged creates")
        host.kubectl("delete", "pvc", f"data-{lost}", "-n", NS, "--wait=false")
        host.kubectl("delete", "pod", lost, "-n", NS, "--wait=false")
        replaced = fleet.wait_for(lambda: [e["message"] for e in events(fleet, "EtcdMemberReplaced")
                                           if lost in e["message"]], 900, f"an EtcdMemberReplaced Event for {lost}")
        print(f"\nreplaced after {time.monotonic() - start:.0f}s: {replaced[0]}")
        fleet.wait_for(lambda: ready_at_generation(fleet) and "last replacement: etcd member " + lost in condition(
            fleet.get(), "EtcdReady").get("message", ""), 900, "Ready, EtcdReady naming the replacement")
        acked = len(writer.acked)
        fleet.wait_for(lambda: len(writer.acked) >= acked + 20, 60, "creates acknowledged after the replacement")
    finally:
        writer.finish()
    assert_members(fleet, 3)
    after = {m["name"]: format(int(m["ID"]), "x") for m in etcd_members(host)}
    assert after[lost] != before[lost], "the lost member was not replaced by a new etcd member"
    assert {n: i for n, i in after.items() if n != lost} == {n: i for n, i in before.items() if n != lost}
    assert host.get("pvc", f"data-{lost}", "-n", NS)["metadata"]["uid"] != claim_uid
    assert all(m["healthy"] and not m["learner"] for m in fleet.get()["status"]["etcd"]["members"])
    print("EtcdReady:", condition(fleet.get(), "EtcdReady")["message"])
    assert_writes_kept(writer, 50)


@contextlib.contextmanager
def etcd_client(fleet: Deployment):
    """etcd's own gateway, dialled from here at the members' pod addresses with the health-check
    client pair of the etcd PKI Secret (the source of truth for sizes and data)."""
    plan = build_plan(fleet.get())["etcd"]
    data = fleet.host.get("secret", f"{NAME}-etcd-pki", "-n", NS)["data"]
    pems = {"ca.crt": data["ca.crt"], "tls.crt": data["healthcheck-client.crt"],
            "tls.key": data["healthcheck-client.key"]}
    pods = fleet.host.get("pods", "-n", NS, "-l", f"app.kubernetes.io/name=etcd,app.kubernetes.io/instance={NAME}")
    resolve = {f"{p['metadata']['name']}.{plan['memberDomain']}": p["status"]["podIP"] for p in pods["items"]
               if (p.get("status") or {}).get("podIP")}
    with tls_files({k: base64.b64decode(v).decode() for k, v in pems.items()}, prefix="e2e-defrag-") as files:
        yield EtcdClient(plan["memberEndpoints"], cert=files["cert"], key=files["key"], ca=files["ca"], timeout=60,
                         resolve=resolve)


def member_sizes(client: EtcdClient) -> dict[str, dict]:
    """Member name -> dbSize, dbSizeInUse, free pages in percent, leader: each member's own status."""
    out = {}
    for m in client.member_list():
        st = client.status(m.client_urls[0])
        out[m.name] = {"dbSize": st.db_size, "dbSizeInUse": st.db_size_in_use, "leader": st.is_leader,
                       "free": round(100 * (st.db_size - st.db_size_in_use) / st.db_size, 1)}
    return out


def defrag_record(fleet: Deployment) -> dict:
    return (fleet.get().get("status") or {}).get("etcdDefragmentation") or {}


# 480 MiB (503 MB: issue 35's 500 MB) written, above the default 100Mi, 80 % of it deleted
FILL_KEYS, VALUE_BYTES, KEPT = 480, 2**20, 96


def test_a_fragmented_etcd_is_defragmented_one_member_per_pass_followers_first_leader_last(fleet: Deployment):
    """480 MiB (503 MB) written straight into etcd, 80 % of it deleted and compacted away: with the default
    policy (45 % on at least 100Mi) the next full pass starts a round; every member ends below
    10 % free pages by etcd's own status, followers before the leader (Events), one member per
    pass (each pass's status write seen on its own), karmada-apiserver's /readyz answering every
    second and the writer acknowledged throughout; the data kept is intact."""
    host = fleet.host
    at_three(fleet)
    with etcd_client(fleet) as client:
        before = member_sizes(client)
        print(f"\nbefore filling: {before}")
        value = os.urandom(VALUE_BYTES // 2).hex().encode()
        with concurrent.futures.ThreadPoolExecutor(4) as pool:
            list(pool.map(lambda i: client.put(f"/e2e-defrag/{i:03d}", value), range(FILL_KEYS)))
        # keys 000 to 383 deleted, 384 to 479 kept
        client.call("kv/deleterange", {"key": b64("/e2e-defrag/000"),
                                       "range_end": b64(f"/e2e-defrag/{FILL_KEYS - KEPT:03d}")})
        revision = client.status().revision
        client.call("kv/compaction", {"revision": str(revision), "physical": True}, timeout=300)
        # each member frees the compacted revisions' pages in batches of its own
        fragmented = fleet.wait_for(lambda: (lambda sizes: sizes if all(
            m["dbSize"] >= 400 * 2**20 and m["free"] >= 70 for m in sizes.values()) else None)(member_sizes(client)),
            300, "every member at 400 MiB or more with 70 % or more free pages")
    print(f"fragmented: {fragmented}")
    leader = next(name for name, m in fragmented.items() if m["leader"])
    followers = sorted((n for n in fragmented if n != leader), key=lambda n: (len(n), n))
    assert not events(fleet, "EtcdMemberDefragmented")

    kubeconfig = fleet.kubeconfig()
    kubectl = str(Path(fleet.host.settings["KO_LINKS"]) / "kubectl")
    records = Sampler(lambda: defrag_record(fleet))
    poller = ReadyzPoller(kubeconfig, kubectl)
    writer = Writer(kubeconfig, prefix="defrag")
    start = time.monotonic()
    try:
        fleet.wait_for(lambda: len(writer.acked) >= 10, 60, "the writer's first acknowledged creates")
        # the default policy needs no spec change: the next full pass finds the members due
        host.kubectl("annotate", "karmadadeployment", NAME, "-n", NS, "--overwrite",
                     f"operator.karmada.io/full-pass=defrag-{time.time():.0f}")
        fleet.wait_for(lambda: len((defrag_record(fleet).get("lastRound") or {}).get("done") or []) == 3
                       and defrag_record(fleet).get("phase") == "Idle", 900, "a finished defragmentation round")
        acked = len(writer.acked)
        fleet.wait_for(lambda: len(writer.acked) >= acked + 10, 60, "creates acknowledged after the round")
    finally:
        writer.finish()
        polls, failures = poller.finish()
        samples = records.finish()
    seconds = time.monotonic() - start
    with etcd_client(fleet) as client:
        after = member_sizes(client)
        kept = [kv.key for kv in client.range("/e2e-defrag/", prefix_end(b"/e2e-defrag/"), keys_only=True)["kvs"]]
        intact = all(client.get(key) == value for key in kept)
    print(f"round in {seconds:.0f} s; after: {after}; {polls} /readyz polls, {len(failures)} failed; "
          f"writer: {writer.summary()}")
    defragmented = events(fleet, "EtcdMemberDefragmented")
    for e in defragmented:
        print("EtcdMemberDefragmented:", e["message"])

    # every member below 10 % free pages by its own status, and smaller than before by the 80 %
    assert all(m["free"] < 10 and m["dbSize"] < fragmented[n]["dbSize"] / 2 for n, m in after.items()), after
    # followers first, the leader last, one Event each
    assert [e["message"].split()[2] for e in defragmented] == [*followers, leader], (defragmented, leader)
    assert "(the leader)" in defragmented[-1]["message"]
    # one member per pass: each pass's status write was seen with one more member done
    done_counts = [len((r.get("round") or {}).get("done") or []) for _, r in samples
                   if isinstance(r, dict) and r.get("phase") == "InProgress"]
    print("InProgress records seen, members done:", sorted(set(done_counts)))
    assert sorted(set(done_counts)) == [1, 2], done_counts
    # the data kept is intact, the rest gone
    assert kept == [f"/e2e-defrag/{i:03d}".encode() for i in range(FILL_KEYS - KEPT, FILL_KEYS)]
    assert intact
    # status tells the truth: sizes of the pass that finished the round, the condition
    status = fleet.get()["status"]
    sizes = {m["name"]: m for m in status["etcd"]["members"]}
    assert all(sizes[n]["dbSize"] < fragmented[n]["dbSize"] / 2 and sizes[n]["dbSizeInUse"] > 0 for n in after), sizes
    defragmented_condition = condition(fleet.get(), "EtcdDefragmented")
    assert (defragmented_condition["status"], defragmented_condition["reason"]) == ("True", "NotNeeded")
    # no outage: /readyz answered every second, every acknowledged write is there
    assert polls >= 10 and not failures, failures
    assert_writes_kept(writer, 20)


def test_a_defragmentation_schedule_defragments_every_member_at_its_tick_leader_last(fleet: Deployment):
    """spec.etcd.local.defragmentation.schedule every minute, on members no longer fragmented (the
    round before left each below 10 % free pages): nothing before the first tick after the
    schedule was seen; at the tick, with no other edit or annotation, a round of every member,
    followers first, the leader last (Events, after the tick), recorded as trigger Schedule for
    that tick; removing the schedule ends it."""
    at_three(fleet)
    with etcd_client(fleet) as client:
        sizes = member_sizes(client)
    assert all(m["free"] < 10 for m in sizes.values()), sizes  # nothing due by the threshold
    leader = next(name for name, m in sizes.items() if m["leader"])
    followers = sorted((n for n in sizes if n != leader), key=lambda n: (len(n), n))
    seen = {e["metadata"]["uid"] for e in events(fleet, "EtcdMemberDefragmented")}
    fleet.host.kubectl("patch", "karmadadeployment", NAME, "-n", NS, "--type=merge", "-p", json.dumps(
        {"spec": {"etcd": {"local": {"defragmentation": {"schedule": "* * * * *"}}}}}))
    recorded = fleet.wait_for(lambda: (defrag_record(fleet).get("schedule") or {}).get("nextTick")
                              and ready_at_generation(fleet) and defrag_record(fleet)["schedule"], 300,
                              "the schedule recorded with its next tick")
    print(f"\nschedule recorded: {recorded}")
    assert recorded["cron"] == "* * * * *" and recorded["nextTick"] > recorded["since"]
    assert "lastTick" not in recorded  # a new schedule waits for its first tick
    tick = recorded["nextTick"]
    done = fleet.wait_for(lambda: (lambda r: r if (r.get("lastRound") or {}).get("trigger") == "Schedule"
                                   and len(r["lastRound"]["done"]) == 3 else None)(defrag_record(fleet)),
                          300, "a scheduled round of every member")
    print(f"scheduled round: {done['lastRound']}")
    assert done["schedule"]["lastTick"] >= tick and done["lastRound"]["startedAt"] >= tick
    new = [e for e in events(fleet, "EtcdMemberDefragmented") if e["metadata"]["uid"] not in seen]
    for e in new:
        print("EtcdMemberDefragmented:", e["message"])
    # (the next tick's round may have begun by now: the first three are this round's)
    assert [e["message"].split()[2] for e in new[:3]] == [*followers, leader], (new, leader)
    assert [d["name"] for d in done["lastRound"]["done"]] == [*followers, leader]
    fleet.host.kubectl("patch", "karmadadeployment", NAME, "-n", NS, "--type=json", "-p", json.dumps(
        [{"op": "remove", "path": "/spec/etcd/local/defragmentation/schedule"}]))
    fleet.wait_for(lambda: ready_at_generation(fleet) and "schedule" not in defrag_record(fleet), 300,
                   "the schedule gone from status")


QUOTA, QUOTA_BYTES = "800Mi", 800 * 2**20


def karmada_write(fleet: Deployment, kubectl: str, kubeconfig: Path, name: str) -> subprocess.CompletedProcess:
    """A ConfigMap created through karmada-apiserver (what etcd's NOSPACE refuses)."""
    return subprocess.run([kubectl, "--kubeconfig", str(kubeconfig), "create", "configmap", name, "-n", "default"],
                          capture_output=True, text=True, timeout=30, check=False)


def test_a_full_etcd_is_compacted_defragmented_and_disarmed_and_karmada_writes_again(fleet: Deployment):
    """etcd filled to its quota (800Mi) with history, as churn does: etcd raises NOSPACE and
    karmada-apiserver refuses writes. With no spec change, the next reconcile's fast path reads the
    alarm from etcd and the full pass runs etcd's runbook: compact, defragment every member
    (followers first, the leader last), disarm. Writes are acknowledged again; etcd itself reports
    no alarm and every database below the quota; the Events and status.etcdSpace say what was done."""
    host = fleet.host
    at_three(fleet)
    kubeconfig = fleet.kubeconfig()
    kubectl = str(Path(host.settings["KO_LINKS"]) / "kubectl")
    assert karmada_write(fleet, kubectl, kubeconfig, "space-before").returncode == 0
    assert not events(fleet, "EtcdSpaceRecovered")
    value = os.urandom(VALUE_BYTES // 2).hex().encode()
    with etcd_client(fleet) as client:
        puts, refusals = itertools.count(), []

        def fill() -> int:
            """Overwrite 4 keys (history, as Works and bindings churn) until etcd refuses."""
            done = 0
            while not refusals and next(puts) < 4000:
                try:
                    client.put(f"/e2e-space/{done % 4}", value)
                    done += 1
                except Exception as exc:  # noqa: BLE001 - the refusal is the point, asserted below
                    refusals.append(str(exc))
            return done

        with concurrent.futures.ThreadPoolExecutor(4) as pool:
            written = sum(pool.map(lambda _: fill(), range(4)))
        refused = refusals[0] if refusals else ""
        full_at = time.monotonic()
        alarms = client.alarms()
        sizes = member_sizes(client)
    print(f"\n{written} MiB written before etcd refused: {refused[:200]}; alarms {alarms}; sizes {sizes}")
    assert "database space exceeded" in refused and {a["alarm"] for a in alarms} == {"NOSPACE"}
    blocked = karmada_write(fleet, kubectl, kubeconfig, "space-blocked")
    print(f"karmada-apiserver: {blocked.stderr.strip()[:200]}")
    assert blocked.returncode != 0 and "database space exceeded" in blocked.stderr

    ok = fleet.wait_for(lambda: karmada_write(fleet, kubectl, kubeconfig, "space-after").returncode == 0 or None,
                        600, "a write through karmada-apiserver acknowledged again")
    seconds = time.monotonic() - full_at
    with etcd_client(fleet) as client:
        alarms, after = client.alarms(), member_sizes(client)
        client.call("kv/deleterange", {"key": b64("/e2e-space/"), "range_end": b64(prefix_end(b"/e2e-space/"))})
    exhausted, recovered = events(fleet, "EtcdSpaceExhausted"), events(fleet, "EtcdSpaceRecovered")
    for e in exhausted + recovered:
        print(f"{e['reason']}: {e['message']}")
    print(f"writes acknowledged again {seconds:.0f} s after etcd refused; sizes after: {after}")
    assert ok and alarms == []
    assert all(m["dbSize"] < QUOTA_BYTES * 0.8 for m in after.values()), after
    assert len(exhausted) == 1 and len(recovered) == 1
    leader = next(n for n, m in sizes.items() if m["leader"])
    # the recovering pass writes status when it ends, after the steps that follow the recovery
    record = fleet.wait_for(lambda: (lambda r: r if r.get("lastRecovery") and r.get("phase") == "Ok" else None)(
        (fleet.get().get("status") or {}).get("etcdSpace") or {}), 300, "status.etcdSpace with the recovery")
    order = [m["name"] for m in record["lastRecovery"]["members"]]
    assert sorted(order) == sorted(sizes) and order[-1] == leader, (order, leader)
    assert "compacted to revision" in recovered[0]["message"] and "alarm disarmed" in recovered[0]["message"]
    assert record["phase"] == "Ok" and condition(fleet.get(), "EtcdSpaceLow")["status"] == "False"


class Stopper:
    """Keeps the etcd process of one member stopped (SIGSTOP, again after the kubelet restarts it)."""

    def __init__(self, member: str):
        self.pattern = f"etcd --name={member}( |$)"
        self.stopped: set[int] = set()
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def pids(self) -> set[int]:
        out = subprocess.run(["pgrep", "-f", self.pattern], capture_output=True, text=True, check=False).stdout
        return {int(p) for p in out.split()}

    def _run(self) -> None:
        while not self.stop.is_set():
            for pid in self.pids() - self.stopped:
                os.kill(pid, signal.SIGSTOP)
                self.stopped.add(pid)
            self.stop.wait(1)

    def finish(self) -> None:
        self.stop.set()
        self.thread.join(timeout=10)
        for pid in self.stopped:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGCONT)


def test_scaling_in_while_a_member_is_down_is_refused_then_done_when_it_is_back(fleet: Deployment):
    host = fleet.host
    at_three(fleet)
    before = (etcd_members(host), claims(host), host.get("statefulset", STS, "-n", NS)["spec"]["replicas"])
    # a pass still at the rollout's gate when the member stops would wait there for the etcd
    # timeout (600 s) before a pass reaches the refusal: stop it only when no pass is running
    fleet.wait_for(lambda: not karmada_e2e.runs_in_flight(NS, NAME), 600, "no reconcile running")
    writer = Writer(fleet.kubeconfig(), prefix="in")
    stopper = Stopper(f"{STS}-1")
    try:
        fleet.wait_for(lambda: stopper.stopped, 60, f"the etcd process of {STS}-1 to stop")
        host.kubectl("patch", "karmadadeployment", NAME, "-n", NS, "--type=merge",
                     "-p", json.dumps({"spec": {"etcd": {"local": {"replicas": 1}}}}))
        refused = fleet.wait_for(lambda: (lambda c: c if c.get("reason") == "EtcdScaleRefused" else None)(
            condition(fleet.get(), "EtcdReady")), 1300, "EtcdReady False with reason EtcdScaleRefused")
        print("\nrefused:", refused["message"])
        assert refused["status"] == "False"
        assert f"not removing {STS}-2 while {STS}-1 is unhealthy" in refused["message"]
        assert condition(fleet.get(), "Ready")["reason"] == "EtcdScaleRefused"
        # the pass that refused has ended (its status is written last); nothing was removed
        members = etcd_members(host)
        assert sorted(m["name"] for m in members) == sorted(m["name"] for m in before[0])
        assert (claims(host), host.get("statefulset", STS, "-n", NS)["spec"]["replicas"]) == before[1:]
    finally:
        stopper.finish()
    # the member is back: the same spec goes through, one member at a time, without another edit
    start = time.monotonic()
    try:
        fleet.wait_for(lambda: ready_at_generation(fleet) and len(fleet.get()["status"]["etcd"]["members"]) == 1,
                       1500, "Ready with 1 etcd member once the stopped member is back")
        print(f"member back: scaled in to 1 in {time.monotonic() - start:.0f}s")
        acked = len(writer.acked)
        fleet.wait_for(lambda: len(writer.acked) >= acked + 20, 60, "creates acknowledged after the scale-in")
    finally:
        writer.finish()
    assert_members(fleet, 1)
    assert_writes_kept(writer, 50)
