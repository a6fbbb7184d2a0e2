"""The etcd rollout's loop on real TLS etcd processes: one member at a time, the leader last
after a real leadership hand-over, each member gated on etcd's health, writes kept throughout.

Kubernetes is played by :class:`ProcessStatefulSet`, a StatefulSet with ``OnDelete`` whose
"pods" are the etcd processes: deleting a pod stops its process (SIGTERM) and, like the
StatefulSet controller, starts it again a moment later on the update revision with the same
data dir. Everything etcd says (members, leader, health, raft indexes) comes from etcd.
"""

from __future__ import annotations

import threading
import time

import pytest

from karmada_operator.etcd.gateway import EtcdError
from karmada_operator.etcd.rollout import EtcdRolloutStopped, MemberRolled, roll
from support.etcd_cluster import EtcdNode, EtcdTestCluster, make_certs

STS = "karmada-etcd"
OLD, NEW = "rev-old", "rev-new"


class ProcessStatefulSet:
    """An OnDelete StatefulSet over an EtcdTestCluster (see the module docstring)."""

    def __init__(self, cluster: EtcdTestCluster, nodes: list[EtcdNode], initial: str, restart_after: float = 0.5):
        self.cluster, self.nodes, self.initial = cluster, {n.name: n for n in nodes}, initial
        self.revision = {n.name: OLD for n in nodes}
        self.uid = {n.name: 0 for n in nodes}
        self.update = OLD
        self.restart_after = restart_after
        self.recreate = True
        self.broken: set[str] = set()  # revisions whose pods never start (an image that does not exist)
        self.present = {n.name: True for n in nodes}
        self.deleted: list[dict] = []  # what etcd said at each deletion
        self.lock = threading.Lock()

    def statefulset(self) -> dict:
        return {"metadata": {"name": STS, "generation": 2}, "status": {"observedGeneration": 2,
                                                                       "updateRevision": self.update}}

    def _ready(self, node: EtcdNode) -> bool:
        if not node.running:
            return False
        try:
            return bool(self.cluster.client([node], timeout=2).status(node.client_url).leader)
        except EtcdError:
            return False

    def pods(self) -> list[dict]:
        with self.lock:
            out = []
            for name, node in self.nodes.items():
                if not self.present[name]:
                    continue  # deleted, not recreated yet
                out.append({"metadata": {"name": name, "uid": f"{name}-{self.uid[name]}",
                                         "labels": {"controller-revision-hash": self.revision[name]}},
                            "status": {"podIP": "127.0.0.1", "conditions": [
                                {"type": "Ready", "status": "True" if self._ready(node) else "False"}]}})
            return out

    def delete(self, name: str, uid: str) -> None:
        node = self.nodes[name]
        assert uid == f"{name}-{self.uid[name]}"
        client = self.cluster.client([n for n in self.nodes.values() if n.running])
        statuses = {n: client.status(x.client_url) for n, x in self.nodes.items() if x.running}
        self.deleted.append({"name": name, "running": sorted(n for n, x in self.nodes.items() if x.running),
                             "leader": name in statuses and statuses[name].is_leader,
                             "leaders": {n for n, s in statuses.items() if s.is_leader}})
        with self.lock:
            self.cluster.stop_node(node)
            node.proc, self.present[name] = None, False
        if self.recreate:
            threading.Timer(self.restart_after, self._recreate, args=(name,)).start()

    def _recreate(self, name: str) -> None:
        node = self.nodes[name]
        with self.lock:
            if self.update not in self.broken:
                self.cluster.start_node(node, self.initial, "new", "test")  # its data dir is kept
            self.revision[name], self.uid[name] = self.update, self.uid[name] + 1
            self.present[name] = True


@pytest.fixture
def statefulset(bin_path, tmp_path):
    certs = make_certs(tmp_path / "pki")
    cluster = EtcdTestCluster(bin_path("etcd"), tmp_path / "etcd", certs)
    nodes = [cluster.new_node(f"{STS}-{i}") for i in range(3)]
    initial = ",".join(f"{n.name}={n.peer_url}" for n in nodes)
    try:
        for node in nodes:
            cluster.start_node(node, initial, "new", "test")
        cluster.wait_ready(nodes)
        yield ProcessStatefulSet(cluster, nodes, initial)
    finally:
        cluster.close()


def leader_name(sts: ProcessStatefulSet) -> str:
    client = sts.cluster.client(list(sts.nodes.values()))
    leader = client.status().leader
    return next(m.name for m in client.member_list() if m.id == leader)


class Writer(threading.Thread):
    """Writes unique keys the whole time; records what was acknowledged and the longest gap."""

    def __init__(self, sts: ProcessStatefulSet):
        super().__init__(daemon=True)
        self.sts, self.stop, self.acked, self.gap = sts, threading.Event(), {}, 0.0

    def run(self) -> None:
        i, last = 0, time.monotonic()
        while not self.stop.is_set():
            key = f"w/{i:06d}".encode()
            try:
                self.sts.cluster.client([n for n in self.sts.nodes.values() if n.running], timeout=3).put(key, b"v")
                self.acked[key] = b"v"
                now = time.monotonic()
                self.gap, last, i = max(self.gap, now - last), now, i + 1
            except (EtcdError, IndexError):
                time.sleep(0.05)
            time.sleep(0.02)


def test_members_roll_one_at_a_time_the_leader_last_after_a_hand_over(statefulset: ProcessStatefulSet):
    sts = statefulset
    first_leader = leader_name(sts)
    assert roll(sts, lambda pods: sts.cluster.client(list(sts.nodes.values())), statefulset=STS, replicas=3,
                timeout=60, poll=0.3).changed is False  # nothing outdated: nothing deleted
    assert sts.deleted == []

    sts.update = NEW
    rolled: list[MemberRolled] = []
    writer = Writer(sts)
    writer.start()
    try:
        result = roll(sts, lambda pods: sts.cluster.client(list(sts.nodes.values())), statefulset=STS, replicas=3,
                      timeout=60, poll=0.3, on_member=rolled.append)
    finally:
        writer.stop.set()
        writer.join(timeout=30)

    followers = sorted((n for n in sts.nodes if n != first_leader), key=lambda n: -int(n.rsplit("-", 1)[1]))
    assert [d["name"] for d in sts.deleted] == [*followers, first_leader]
    # every deletion found every member running: one member down at a time
    assert all(d["running"] == sorted(sts.nodes) for d in sts.deleted), sts.deleted
    # the last one had handed its leadership to an updated member before it was stopped
    assert not sts.deleted[-1]["leader"] and sts.deleted[-1]["leaders"] <= set(followers), sts.deleted[-1]
    assert [(r.name, r.was_leader, r.revision) for r in rolled] == [
        (followers[0], False, NEW), (followers[1], False, NEW), (first_leader, True, NEW)]
    assert result.changed and result.revision == NEW and [m.name for m in result.members] == [r.name for r in rolled]
    assert set(sts.revision.values()) == {NEW}
    # quorum throughout: every acknowledged write is there, and writes never paused for long
    stored = {kv.key for kv in sts.cluster.client(list(sts.nodes.values())).iter_prefix(b"w/")}
    assert len(writer.acked) > 20 and set(writer.acked) <= stored
    print(f"\n{len(writer.acked)} writes acknowledged during the rollout; longest gap {writer.gap:.2f} s")
    assert writer.gap < 5.0


def test_a_member_that_does_not_come_back_stops_the_rollout_there(statefulset: ProcessStatefulSet):
    sts = statefulset
    first_leader = leader_name(sts)
    sts.update, sts.recreate = NEW, False
    with pytest.raises(EtcdRolloutStopped) as stopped:
        roll(sts, lambda pods: sts.cluster.client([n for n in sts.nodes.values() if n.running]),
             statefulset=STS, replicas=3, timeout=5, poll=0.3)
    victim = max((n for n in sts.nodes if n != first_leader), key=lambda n: int(n.rsplit("-", 1)[1]))
    assert stopped.value.member == victim and stopped.value.reason == "RolloutTimeout"
    assert str(stopped.value) == (f"etcd rollout stopped at {victim}: the gate did not hold within 5 s "
                                  f"({victim} has no pod yet)")
    assert [d["name"] for d in sts.deleted] == [victim]  # nothing else was touched
    running = [n for n in sts.nodes.values() if n.running]
    assert len(running) == 2 and sts.cluster.client(running).put("still", "writable")


def test_a_rollout_stopped_by_a_broken_revision_goes_on_once_the_spec_is_fixed(statefulset: ProcessStatefulSet):
    sts = statefulset
    first_leader = leader_name(sts)
    sts.update, sts.broken = "rev-broken", {"rev-broken"}
    with pytest.raises(EtcdRolloutStopped) as stopped:
        roll(sts, lambda pods: sts.cluster.client(list(sts.nodes.values())), statefulset=STS, replicas=3,
             timeout=5, poll=0.3)
    victim = stopped.value.member
    assert f"{victim} is not Ready" in str(stopped.value) and sts.revision[victim] == "rev-broken"
    # the spec is fixed: a new revision; the member down on the broken one goes first, then the rest
    sts.update = NEW
    result = roll(sts, lambda pods: sts.cluster.client(list(sts.nodes.values())), statefulset=STS, replicas=3,
                  timeout=60, poll=0.3)
    assert [d["name"] for d in sts.deleted][1:] == [m.name for m in result.members]
    assert result.members[0].name == victim and result.members[-1].name == first_leader
    assert set(sts.revision.values()) == {NEW}
