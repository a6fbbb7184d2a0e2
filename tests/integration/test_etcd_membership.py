"""etcd membership and health through the etcd_member / etcd_health module code, on real TLS etcd."""

from __future__ import annotations

import threading
import time

import pytest

from karmada_operator.etcd.gateway import EtcdError, EtcdNotFoundError, Member
from karmada_operator.etcd.membership import EtcdMemberError
from karmada_operator.tasks.etcd_health import report as etcd_health_report
from support.etcd_cluster import EtcdTestCluster, load_module, make_certs, start_cluster


@pytest.fixture(scope="module")
def certs(tmp_path_factory):
    return make_certs(tmp_path_factory.mktemp("etcd-pki"))


@pytest.fixture
def cluster_factory(bin_path, certs, tmp_path):
    clusters: list[EtcdTestCluster] = []

    def make(count: int) -> EtcdTestCluster:
        cluster = start_cluster(bin_path("etcd"), count, tmp_path / f"c{len(clusters)}", certs)
        clusters.append(cluster)
        return cluster

    yield make
    for cluster in clusters:
        cluster.close()


class Writer(threading.Thread):
    """Keeps writing unique keys through whichever members are running; records what was acknowledged."""

    def __init__(self, cluster: EtcdTestCluster) -> None:
        super().__init__(daemon=True)
        self.cluster = cluster
        self.stop = threading.Event()
        self.acked: dict[bytes, bytes] = {}
        self.attempted: set[bytes] = set()
        self.errors = 0

    def run(self) -> None:
        i = 0
        while not self.stop.is_set():
            key, value = f"w/{i:07d}".encode(), f"value-{i}-{time.monotonic_ns()}".encode()
            self.attempted.add(key)
            while not self.stop.is_set():
                try:
                    nodes = [n for n in list(self.cluster.nodes.values()) if n.running]
                    self.cluster.client(nodes, timeout=5).put(key, value)
                    self.acked[key] = value
                    break
                except (EtcdError, IndexError):
                    self.errors += 1  # membership change in flight: retry the same idempotent put
                    time.sleep(0.05)
            i += 1


def voting(cluster: EtcdTestCluster) -> list[Member]:
    return [m for m in cluster.client().member_list() if not m.is_learner]


def test_scale_1_3_5_3_1_keeps_every_acknowledged_write(cluster_factory):
    cluster = cluster_factory(1)
    writer = Writer(cluster)
    writer.start()
    try:
        for target in (3, 5):
            while len(cluster.nodes) < target:
                cluster.add_member()
            assert len(voting(cluster)) == target
            time.sleep(0.5)
        # first removal: the leader itself, so leadership has to move away before it goes
        health = etcd_health_report(cluster.conn_params())
        leader = next(m["name"] for m in health["members"] if m["leader"])
        removed = [cluster.remove_member(leader)]
        assert removed[0]["moved_leader"]
        for target in (3, 1):
            while len(cluster.nodes) > target:
                removed.append(cluster.remove_member(next(iter(cluster.nodes))))  # the oldest
            assert len(voting(cluster)) == target
            time.sleep(0.5)
        assert all(r["changed"] and r["member_id"] for r in removed)
    finally:
        writer.stop.set()
        writer.join(timeout=30)
    health = etcd_health_report(cluster.conn_params())
    assert health["has_quorum"] and health["healthy_count"] == 1 and health["member_count"] == 1
    stored = {kv.key: kv.value for kv in cluster.client().iter_prefix(b"w/")}
    assert len(writer.acked) > 50, "writer made too little progress to prove anything"
    missing = [k for k in writer.acked if k not in stored]
    assert not missing, f"{len(missing)} acknowledged writes lost, e.g. {missing[:5]}"
    assert all(stored[k] == v for k, v in writer.acked.items())
    assert set(stored) <= writer.attempted  # nothing appeared that was never written
    assert len(stored) - len(writer.acked) <= 1  # at most the in-flight write when the writer stopped


def test_quorum_refusal_health_and_replace(cluster_factory):
    cluster = cluster_factory(3)
    member_module = load_module("etcd_member")
    client = cluster.client()
    client.put("before", "replace")
    names = list(cluster.nodes)
    victim, survivors = names[1], [names[0], names[2]]

    # bad input first, nothing changes
    before = client.member_list()
    with pytest.raises(EtcdMemberError, match="already taken"):
        member_module.run_module(
            {**cluster.conn_params(), "name": names[0], "peer_urls": ["https://127.0.0.1:1"]}
        )
    with pytest.raises(EtcdNotFoundError, match="not in the cluster"):
        member_module.run_module({**cluster.conn_params(), "member_id": "abcdef12", "state": "absent"})
    assert client.member_list() == before

    cluster.kill(victim)
    live = [cluster.nodes[n] for n in survivors]
    health = etcd_health_report(cluster.conn_params())
    report = {m["name"]: m for m in health["members"]}
    assert health["has_quorum"] and health["healthy_count"] == 2 and health["member_count"] == 3
    assert not report[victim]["reachable"] and not report[victim]["healthy"] and report[victim]["error"]
    assert all(
        report[n]["healthy"] and report[n]["version"] and report[n]["raft_index"] > 0 for n in survivors
    )
    assert sum(m["leader"] for m in health["members"]) == 1

    # removing a healthy member would leave 2 voters with 1 healthy: refused, nothing changed
    with pytest.raises(EtcdMemberError, match="quorum"):
        member_module.run_module({**cluster.conn_params(live), "name": survivors[0], "state": "absent"})
    assert len(client.with_endpoints(cluster.endpoints(live)).member_list()) == 3

    # replace the dead member: remove it, add a new one with a new data dir
    removed = cluster.remove_member(victim)
    assert removed["changed"] and removed["member_id"]
    new = cluster.add_member()
    assert new.data_dir != cluster.stopped[-1].data_dir
    health = etcd_health_report(cluster.conn_params())
    assert health["healthy"] and health["has_quorum"] and health["healthy_count"] == 3
    assert new.name in {m["name"] for m in health["members"]}
    assert cluster.client([new]).get("before", serializable=True) == b"replace"
    # every member has the same key-value hash at the same revision
    rev = cluster.client().put("after", "replace")
    time.sleep(0.5)
    hashes = {cluster.client().hash_kv(url, rev)["hash"] for url in cluster.endpoints()}
    assert len(hashes) == 1
    # idempotent: present again is no change, absent of a gone name is no change
    again = member_module.run_module({**cluster.conn_params(), "name": new.name, "peer_urls": [new.peer_url]})
    assert not again["changed"] and not again["learner"]
    gone = member_module.run_module({**cluster.conn_params(), "name": victim, "state": "absent"})
    assert not gone["changed"]
