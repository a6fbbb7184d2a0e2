"""etcd scaling steps on real TLS etcd processes: 1 -> 3 -> 5 -> 3 -> 1 under a writer, every
acknowledged write kept; scaling in refused while a member is down.

The StatefulSet is played by the test: a step's ``replicas`` starts a joiner's process with the
step's bootstrap values (as its pod would read them from the environment) or stops the removed
member's process. Every decision is :func:`etcd_scaling.next_step` on what etcd reports.
"""

from __future__ import annotations

import threading
import time

import pytest
from etcd_cluster_health import cluster_health
from etcd_gateway import EtcdError
from etcd_scaling import apply_step, next_step

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
