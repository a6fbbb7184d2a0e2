"""etcd scaling steps on real TLS etcd processes: 1 -> 3 -> 5 -> 3 -> 1 under a writer, every
acknowledged write kept; scaling in refused while a member is down.

The StatefulSet is played by the test: a step's ``replicas`` starts a joiner's process with the
step's bootstrap values (as its pod would read them from the environment) or stops the removed
member's process. Every decision is :func:`etcd_scaling.next_step` on what etcd reports.
"""

from __future__ import annotations

import shutil
import threading
import time

import pytest

from karmada_operator.etcd.gateway import EtcdError
from karmada_operator.etcd.health import cluster_health
from karmada_operator.etcd.replacement import Volume
from karmada_operator.etcd.scaling import EtcdScaleStopped, apply_step, bootstrap, next_step, scale
from support.etcd_cluster import EtcdTestCluster, make_certs

STS = "karmada-etcd"


class Members:
    """Pods 0..replicas-1 as etcd processes on loopback (ports fixed per ordinal up front)."""

    def __init__(self, cluster: EtcdTestCluster):
        self.cluster = cluster
        self.nodes = {i: cluster.new_node(f"{STS}-{i}") for i in range(7)}
        self.replicas = 0
        self.steps: list[tuple[str, str]] = []

    def peer_url(self, name: str) -> str:
        return self.nodes[int(name.rsplit("-", 1)[1])].peer_url

    def running(self):
        return [n for n in self.nodes.values() if n.running]

    def client(self):
        return self.cluster.client(self.running())

    def scale_to(self, desired: int, timeout: float = 120) -> None:
        deadline = time.monotonic() + timeout
        while True:
            step = next_step(STS, desired, self.replicas, cluster_health(self.client()), self.peer_url)
            if step.action == "done":
                return
            if step.action == "refuse":
                raise RuntimeError(step.reason)
            assert time.monotonic() < deadline, f"stuck at {step}"
            if step.action == "wait":
                time.sleep(0.3)
                continue
            self.steps.append((step.action, step.member))
            apply_step(self.client(), step, wait_timeout=60)
            if step.action == "add":
                node = self.nodes[step.replicas - 1]
                env = step.bootstrap
                self.cluster.start_node(node, env["ETCD_INITIAL_CLUSTER"], env["ETCD_INITIAL_CLUSTER_STATE"], "test")
            elif step.action == "remove":
                node = self.nodes[step.replicas]
                self.cluster.stop_node(node)
                self.cluster.nodes.pop(node.name, None)
            self.replicas = step.replicas


@pytest.fixture
def members(bin_path, tmp_path):
    cluster = EtcdTestCluster(bin_path("etcd"), tmp_path / "etcd", make_certs(tmp_path / "pki"))
    m = Members(cluster)
    try:
        first = m.nodes[0]
        cluster.start_node(first, f"{first.name}={first.peer_url}", "new", "test")
        cluster.wait_ready([first])
        m.replicas = 1
        yield m
    finally:
        cluster.close()


class Writer(threading.Thread):
    def __init__(self, members: Members):
        super().__init__(daemon=True)
        self.members, self.stop, self.acked = members, threading.Event(), set()

    def run(self) -> None:
        i = 0
        while not self.stop.is_set():
            key = f"w/{i:06d}".encode()
            try:
                self.members.client().put(key, b"v")
                self.acked.add(key)
                i += 1
            except (EtcdError, IndexError):
                time.sleep(0.05)


def test_1_3_5_3_1_one_member_at_a_time_keeps_every_acknowledged_write(members: Members):
    writer = Writer(members)
    writer.start()
    try:
        for size in (3, 5, 3, 1):
            members.scale_to(size)
            voters = [m for m in members.client().member_list() if not m.is_learner]
            assert sorted(m.name for m in voters) == [f"{STS}-{i}" for i in range(size)]
    finally:
        writer.stop.set()
        writer.join(timeout=30)
    adds = [m for a, m in members.steps if a == "add"]
    promotes = [m for a, m in members.steps if a == "promote"]
    removes = [m for a, m in members.steps if a == "remove"]
    assert adds == promotes == [f"{STS}-{i}" for i in (1, 2, 3, 4)]
    assert removes == [f"{STS}-{i}" for i in (4, 3, 2, 1)]
    # each joiner promoted before the next was added
    assert members.steps[:4] == [("add", f"{STS}-1"), ("promote", f"{STS}-1"), ("add", f"{STS}-2"),
                                 ("promote", f"{STS}-2")]
    stored = {kv.key for kv in members.client().iter_prefix(b"w/")}
    print(f"\n{len(writer.acked)} writes acknowledged while scaling 1-3-5-3-1")
    assert len(writer.acked) > 50 and writer.acked <= stored


def test_scaling_in_while_a_member_is_down_is_refused_and_changes_nothing(members: Members):
    members.scale_to(3)
    members.cluster.kill(f"{STS}-1")
    before = members.client().member_list()
    with pytest.raises(RuntimeError, match=f"not removing {STS}-2 while {STS}-1 is unhealthy"):
        members.scale_to(1, timeout=20)
    assert members.client().member_list() == before and members.replicas == 3


class ProcessStatefulSet:
    """:class:`etcd_scaling.ScaleSource` played by processes: replicas start and stop the members'
    etcd processes in ordinal order (with the bootstrap values last written, as a pod reads them
    from its ConfigMap when it starts) and a member's claim is its data dir."""

    def __init__(self, members: Members):
        self.members, self.data, self.writes, self.notes = members, {}, 0, {}

    def statefulset(self):
        return {"spec": {"replicas": self.members.replicas}}

    def pods(self):
        return [{"metadata": {"name": n.name, "uid": n.name},
                 "status": {"podIP": "127.0.0.1", "conditions": [{"type": "Ready", "status": "True"}]}}
                for n in self.members.running()]

    def set_replicas(self, replicas: int) -> None:
        m = self.members
        while m.replicas < replicas:
            node = m.nodes[m.replicas]
            env = self.data
            m.cluster.start_node(node, env["ETCD_INITIAL_CLUSTER"], env["ETCD_INITIAL_CLUSTER_STATE"], "test")
            m.replicas += 1
        while m.replicas > replicas:
            m.replicas -= 1
            m.cluster.stop_node(m.nodes[m.replicas])

    def write_bootstrap(self, data, only_if_missing: bool = False) -> bool:
        if (self.data and only_if_missing) or self.data == dict(data):
            return False
        self.data, self.writes = dict(data), self.writes + 1
        return True

    def claims(self, terminating: bool = False) -> list[str]:
        return [f"data-{n.name}" for n in self.members.nodes.values() if n.data_dir.exists()]

    def delete_claim(self, name: str) -> None:
        node = next(n for n in self.members.nodes.values() if f"data-{n.name}" == name)
        assert not node.running, f"{name} deleted under a running member"
        shutil.rmtree(node.data_dir)

    # replacing a lost member (tests/integration/test_etcd_replacement_processes.py): nothing is lost here
    def claim_volumes(self):
        return {c: Volume(c) for c in self.claims()}

    def delete_pod(self, name: str, uid: str) -> None:
        raise AssertionError(f"{name}'s pod deleted: no member lost its data here")

    def last_log(self, pod: str) -> str:
        return ""

    def records(self):
        return dict(self.notes)

    def write_records(self, records, last: str = "") -> None:
        self.notes = {k: dict(v) for k, v in records.items()}


def drive(members: Members, source: ProcessStatefulSet, desired: int, **kw):
    return scale(source, lambda pods: members.client(), statefulset=STS, desired=desired, peer_url=members.peer_url,
                 timeout=120, poll=0.3, **kw)


def test_the_scale_driver_keeps_retained_claims_but_never_lets_their_data_rejoin(members: Members):
    """deletionPolicy Retain: scaling in keeps the removed members' data dirs; scaling out again
    deletes each one before its ordinal rejoins (a removed member's data cannot rejoin), and the
    rejoined members are new members (new IDs) that etcd accepts."""
    source = ProcessStatefulSet(members)
    assert drive(members, source, 3, delete_claims=False).members == [f"{STS}-{i}" for i in range(3)]
    assert source.data == bootstrap([(f"{STS}-{i}", members.peer_url(f"{STS}-{i}")) for i in range(3)], "existing")
    first_ids = {m.name: m.id for m in members.client().member_list()}
    result = drive(members, source, 1, delete_claims=False)
    assert result.members == [f"{STS}-0"] and members.replicas == 1
    assert source.claims() == [f"data-{STS}-{i}" for i in range(3)]  # kept
    result = drive(members, source, 3, delete_claims=False)
    assert [s["action"] for s in result.steps] == ["add", "promote", "add", "promote"]
    health = cluster_health(members.client())
    assert health["healthy"] and sorted(m["name"] for m in health["members"]) == [f"{STS}-{i}" for i in range(3)]
    ids = {m.name: m.id for m in members.client().member_list()}
    assert ids[f"{STS}-0"] == first_ids[f"{STS}-0"]
    assert all(ids[n] != first_ids[n] for n in (f"{STS}-1", f"{STS}-2"))
    # deletionPolicy Delete: the claims go with the members, once their processes are gone
    result = drive(members, source, 1, delete_claims=True)
    assert source.claims() == [f"data-{STS}-0"]
    assert [s["action"] for s in result.steps].count("delete-claim") == 2


def test_a_step_cut_short_is_finished_by_the_pass_that_must_not_start_one(members: Members):
    """A pass stopped after adding the learner, before the StatefulSet was raised: the settling
    pass (start=False) raises it and promotes the learner; a new change it leaves alone."""
    source = ProcessStatefulSet(members)
    source.write_bootstrap(bootstrap([(f"{STS}-0", members.peer_url(f"{STS}-0"))], "existing"))
    step = next_step(STS, 3, 1, cluster_health(members.client()), members.peer_url)
    assert step.action == "add"
    apply_step(members.client(), step, wait_timeout=30)  # ... and the pass stops here
    result = drive(members, source, 3, start=False)
    assert [s["action"] for s in result.steps] == ["add", "promote"] and members.replicas == 2
    assert result.deferred.startswith("2 of 3 members")
    voters = [m for m in members.client().member_list() if not m.is_learner]
    assert sorted(m.name for m in voters) == [f"{STS}-0", f"{STS}-1"]


def test_the_scale_driver_refuses_with_a_member_down_and_changes_nothing(members: Members):
    source = ProcessStatefulSet(members)
    drive(members, source, 3)
    members.cluster.kill(f"{STS}-1")
    before, writes = members.client().member_list(), source.writes
    with pytest.raises(EtcdScaleStopped, match=f"not removing {STS}-2 while {STS}-1 is unhealthy") as stopped:
        drive(members, source, 1)
    assert stopped.value.reason == "EtcdScaleRefused" and not stopped.value.done
    assert members.client().member_list() == before and members.replicas == 3 and source.writes == writes


class LaggingStatefulSet(ProcessStatefulSet):
    """Reads of the StatefulSet lag two reads behind each replicas change, as ansible-operator's
    caching proxy does when the operator runs outside the cluster."""

    def __init__(self, members: Members):
        super().__init__(members)
        self.shown, self.lag = members.replicas, 0

    def set_replicas(self, replicas: int) -> None:
        super().set_replicas(replicas)
        self.lag = 2

    def statefulset(self):
        if self.lag:
            self.lag -= 1
        else:
            self.shown = self.members.replicas
        return {"spec": {"replicas": self.shown}}


def test_a_lagging_statefulset_read_neither_repeats_a_step_nor_touches_the_joiners_claim(members: Members):
    """Found on the test bed: a read from before the scale-up took the joiner for one whose pod was
    never asked for, and the repeated add deleted the claim the joiner was running on. The
    driver waits until it reads its own write; a claim under a pod or of a learner is never
    deleted (ProcessStatefulSet.delete_claim fails for a running member)."""
    source = LaggingStatefulSet(members)
    result = drive(members, source, 3, delete_claims=False)
    assert [s["action"] for s in result.steps] == ["add", "promote", "add", "promote"]
    assert cluster_health(members.client())["healthy"] and members.replicas == 3
