"""Issue 15, item 1: the local etcd scales through spec.etcd.local.replicas, live, one member at a
time, on the real host cluster with the real ansible-operator.

One Karmada (``etcd-scale`` in karmada-system, etcd on PersistentVolumeClaims, deletionPolicy
Delete) is installed with 1 etcd member and taken 1 -> 3 -> 5 -> 3 -> 1 while a writer creates
ConfigMaps through karmada-apiserver the whole time. The tests assert:

* every ConfigMap whose create karmada-apiserver acknowledged exists at the end (count printed);
* after each size, status.etcd.members lists exactly the members etcd itself reports (all
  voters), the StatefulSet has that many replicas, and the claims of removed members are gone;
* karmada-apiserver's pods were never replaced or restarted;
* scaling in while one member is down (its etcd process stopped) is refused: EtcdReady False
  with reason EtcdScaleRefused and a message naming the member, and nothing changes (replicas,
  etcd's members, claims);
* issue 15, item 2: with 3 members, deleting one member's claim and pod gets that member replaced
  without a manual step (removed from etcd, added back empty as a learner, promoted: a new etcd
  member ID under the same name, on a new claim), an Event EtcdMemberReplaced naming it and the
  EtcdReady message saying so; the cluster ends healthy with 3 members, status lists exactly the
  members etcd reports, and every ConfigMap whose create was acknowledged meanwhile exists.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import threading
import time

import pytest
import yaml

from support import karmada_e2e
from support.karmada_crds_server import serve
from support.karmada_e2e import Deployment, operator_kubeconfig
from support.operator_runtime import OperatorProcess
from support.testenv import HostCluster
from support.waiting import condition, crds_established

pytestmark = [pytest.mark.e2e, pytest.mark.extended, pytest.mark.timeout(5400)]

NS = "karmada-system"
NAME = "etcd-scale"
STS = f"{NAME}-etcd"
PKI = "/etc/kubernetes/pki/etcd"


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


def claims(host: HostCluster) -> list[str]:
    items = host.get("pvc", "-n", NS, "-l", f"app.kubernetes.io/name=etcd,app.kubernetes.io/instance={NAME}")["items"]
    return sorted(p["metadata"]["name"] for p in items if not p["metadata"].get("deletionTimestamp"))


class Writer:
    """Creates ConfigMaps in Karmada (through karmada-apiserver) in a thread, as fast as a client
    with one connection does; keeps the names whose create was acknowledged. ``prefix`` keeps the
    writers of different tests apart."""

    def __init__(self, kubeconfig, prefix: str = "w"):
        from kubernetes import client, config

        self.prefix = prefix
        self.api = client.CoreV1Api(config.new_client_from_config(str(kubeconfig)))
        self.acked: list[str] = []
        self.failures: list[str] = []
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        from kubernetes import client

        i = 0
        while not self.stop.is_set():
            name = f"{self.prefix}-{i:06d}"
            body = client.V1ConfigMap(metadata=client.V1ObjectMeta(name=name, labels={"e2e": "etcd-scale",
                                                                                      "writer": self.prefix}),
                                      data={"i": str(i)})
            try:
                self.api.create_namespaced_config_map("default", body, _request_timeout=10)
                self.acked.append(name)
            except Exception as exc:  # noqa: BLE001 - an unacknowledged write is allowed, counted
                self.failures.append(f"{time.strftime('%H:%M:%S')} {name}: {str(exc)[:160]}")
            i += 1
            self.stop.wait(0.1)

    def finish(self) -> None:
        self.stop.set()
        self.thread.join(timeout=30)

    def existing(self) -> set[str]:
        names, token = set(), None
        while True:
            page = self.api.list_namespaced_config_map("default", label_selector=f"e2e=etcd-scale,writer={self.prefix}",
                                                       limit=500,
                                                       _continue=token, _request_timeout=30)
            names |= {c.metadata.name for c in page.items}
            token = page.metadata._continue
            if not token:
                return names


def scale_to(fleet: Deployment, n: int) -> float:
    start = time.monotonic()
    fleet.host.kubectl("patch", "karmadadeployment", NAME, "-n", NS, "--type=merge",
                       "-p", json.dumps({"spec": {"etcd": {"local": {"replicas": n}}}}))
    fleet.wait_for(lambda: ready_at_generation(fleet) and len(fleet.get()["status"]["etcd"]["members"]) == n,
                   1500, f"Ready with {n} etcd members")
    return time.monotonic() - start


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
        cr["spec"]["etcd"]["local"] = {"replicas": 1, "storage": {"type": "PersistentVolumeClaim", "size": "1Gi",
                                                                  "storageClassName": "standard"}}
        fleet = Deployment(host_cluster, operator, work, NAME, NS)
        start = time.monotonic()
        host_cluster.kubectl("apply", "-f", "-", input=yaml.safe_dump(cr))
        fleet.wait_for(lambda: ready_at_generation(fleet), 1500, "Ready with 1 etcd member")
        print(f"\napply-to-Ready with 1 etcd member: {time.monotonic() - start:.0f}s")
        yield fleet


def test_1_3_5_3_1_under_a_writer_keeps_every_acknowledged_write_and_karmada_apiserver(fleet: Deployment):
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
        time.sleep(5)
        for n in (3, 5, 3, 1):
            seconds = scale_to(fleet, n)
            timings.append((n, round(seconds)))
            assert_members(fleet, n)
            print(f"scaled to {n} in {seconds:.0f}s; {len(writer.acked)} writes acknowledged so far")
        time.sleep(5)
    finally:
        writer.finish()
    existing = writer.existing()
    lost = [n for n in writer.acked if n not in existing]
    print(f"timings {timings}; {len(writer.acked)} creates acknowledged, {len(writer.failures)} failed "
          f"(not acknowledged), {len(existing)} ConfigMaps exist, {len(lost)} acknowledged ones missing")
    print("failed creates:", writer.failures[:10])
    assert len(writer.acked) > 100 and not lost, lost[:20]
    # scaling rewrote the bootstrap ConfigMap only: no new pod template revision
    assert host.get("statefulset", STS, "-n", NS)["status"]["updateRevision"] == revision
    assert apiserver_pods(host) == apiservers, "karmada-apiserver's pods were replaced or restarted"
    added = [e["message"] for e in host.get("events", "-n", NS, "--field-selector",
                                            f"involvedObject.name={NAME},reason=EtcdMemberAdded")["items"]]
    assert len(added) >= 4, added  # 1->3 and 3->5 (the later 3 rejoins at ordinals whose claims went)


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


def test_scaling_in_while_a_member_is_down_is_refused_and_changes_nothing(fleet: Deployment):
    host = fleet.host
    scale_to(fleet, 3)
    assert_members(fleet, 3)
    before = (etcd_members(host), claims(host), host.get("statefulset", STS, "-n", NS)["spec"]["replicas"])
    # a pass still waiting at the rollout's gate (a new member not Ready yet) when the member stops
    # would wait there for the etcd timeout (600 s) before a pass reaches the refusal
    fleet.wait_for(lambda: all(p.get("status", {}).get("containerStatuses", [{}])[0].get("ready")
                               for p in host.get("pods", "-n", NS, "-l",
                                                 f"app.kubernetes.io/name=etcd,app.kubernetes.io/instance={NAME}")["items"]),
                   300, "every etcd pod Ready")
    time.sleep(30)
    stopper = Stopper(f"{STS}-1")
    try:
        fleet.wait_for(lambda: stopper.stopped, 60, f"the etcd process of {STS}-1 to stop")
        time.sleep(10)
        host.kubectl("patch", "karmadadeployment", NAME, "-n", NS, "--type=merge",
                     "-p", json.dumps({"spec": {"etcd": {"local": {"replicas": 1}}}}))
        refused = fleet.wait_for(lambda: (lambda c: c if c.get("reason") == "EtcdScaleRefused" else None)(
            condition(fleet.get(), "EtcdReady")), 1300, "EtcdReady False with reason EtcdScaleRefused")
        print("\nrefused:", refused["message"])
        assert refused["status"] == "False"
        assert f"not removing {STS}-2 while {STS}-1 is unhealthy" in refused["message"]
        assert condition(fleet.get(), "Ready")["reason"] == "EtcdScaleRefused"
        time.sleep(10)  # a pass that went on would have removed a member by now
        members = etcd_members(host)
        assert sorted(m["name"] for m in members) == sorted(m["name"] for m in before[0])
        assert (claims(host), host.get("statefulset", STS, "-n", NS)["spec"]["replicas"]) == before[1:]
    finally:
        stopper.finish()
    seconds = scale_to(fleet, 3)
    print(f"member back, spec back to 3: Ready in {seconds:.0f}s")
    assert_members(fleet, 3)


def etcd_pods_ready(host: HostCluster) -> bool:
    return all(p.get("status", {}).get("containerStatuses", [{}])[0].get("ready")
               for p in host.get("pods", "-n", NS, "-l",
                                 f"app.kubernetes.io/name=etcd,app.kubernetes.io/instance={NAME}")["items"])


def test_a_lost_member_is_replaced(fleet: Deployment):
    """Delete one member's claim and pod: the operator replaces the member by itself."""
    host = fleet.host
    lost = f"{STS}-1"
    scale_to(fleet, 3)
    assert_members(fleet, 3)
    # the operator has recorded each member's ID and claim (what a replaced claim is told from)
    fleet.wait_for(lambda: etcd_pods_ready(host) and len(json.loads(
        (host.get("configmap", f"{NAME}-etcd-bootstrap", "-n", NS)["metadata"].get("annotations") or {}).get(
            "operator.karmada.io/etcd-member-volumes", "{}"))) == 3, 700, "every etcd pod Ready, 3 members recorded")
    before = {m["name"]: format(int(m["ID"]), "x") for m in etcd_members(host)}
    claim_uid = host.get("pvc", f"data-{lost}", "-n", NS)["metadata"]["uid"]
    writer = Writer(fleet.kubeconfig(), prefix="lost")
    start = time.monotonic()
    try:
        time.sleep(5)
        host.kubectl("delete", "pvc", f"data-{lost}", "-n", NS, "--wait=false")
        host.kubectl("delete", "pod", lost, "-n", NS, "--wait=false")
        replaced = fleet.wait_for(lambda: [e["message"] for e in host.get(
            "events", "-n", NS, "--field-selector", f"involvedObject.name={NAME},reason=EtcdMemberReplaced")["items"]
            if lost in e["message"]], 1500, f"an EtcdMemberReplaced Event for {lost}")
        print(f"\nreplaced after {time.monotonic() - start:.0f}s: {replaced[0]}")
        fleet.wait_for(lambda: ready_at_generation(fleet) and "last replacement: etcd member " + lost in condition(
            fleet.get(), "EtcdReady").get("message", ""), 900, "Ready, EtcdReady naming the replacement")
        time.sleep(5)
    finally:
        writer.finish()
    assert_members(fleet, 3)
    after = {m["name"]: format(int(m["ID"]), "x") for m in etcd_members(host)}
    assert after[lost] != before[lost], "the lost member was not replaced by a new etcd member"
    assert {n: i for n, i in after.items() if n != lost} == {n: i for n, i in before.items() if n != lost}
    assert host.get("pvc", f"data-{lost}", "-n", NS)["metadata"]["uid"] != claim_uid
    assert all(m["healthy"] and not m["learner"] for m in fleet.get()["status"]["etcd"]["members"])
    print("EtcdReady:", condition(fleet.get(), "EtcdReady")["message"])
    existing = writer.existing()
    missing = [n for n in writer.acked if n not in existing]
    print(f"{len(writer.acked)} creates acknowledged, {len(writer.failures)} failed (not acknowledged), "
          f"{len(missing)} acknowledged ones missing; failed: {writer.failures[:5]}")
    assert len(writer.acked) > 50 and not missing, missing[:20]
