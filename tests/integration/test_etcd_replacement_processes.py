"""Issue 15, item 2 on real TLS etcd processes: a member whose data is gone is removed from etcd
and added back empty (a learner first, then promoted) by the scale driver alone, the cluster
ends healthy with its size and every acknowledged write; a member that is merely stopped or
restarting is left alone.

The test plays the kubelet and the StatefulSet controller (:class:`Kubelet`): a member's etcd
process that exits is started again with backoff, with the same data dir and the bootstrap
values of that moment (as a container restart reads its ConfigMap), its exits counted and the
log of the last one kept; a deleted pod is made again; a claim (a data dir with a UID) goes once
no pod uses it, and a pod made without one gets a new, empty one.
"""

from __future__ import annotations

import itertools
import os
import shutil
import signal
import threading
import time
from pathlib import Path

import pytest

from karmada_operator.etcd.gateway import EtcdError
from karmada_operator.etcd.health import cluster_health
from karmada_operator.etcd.replacement import Volume
from karmada_operator.etcd.scaling import bootstrap, scale
from support.etcd_cluster import EtcdTestCluster, make_certs
from support.processes import stop_process

STS = "karmada-etcd"
uids = itertools.count(1)


class Kubelet:
    """:class:`etcd_scaling.ScaleSource` over etcd processes, with restarts (see the module
    docstring). Every method holds one lock with the background loop."""

    def __init__(self, cluster: EtcdTestCluster, root: Path):
        self.cluster, self.root = cluster, root
        self.nodes = {i: cluster.new_node(f"{STS}-{i}") for i in range(7)}
        self.replicas = 0
        self.data: dict[str, str] = {}
        self.notes: dict[str, dict[str, str]] = {}
        self.claim: dict[int, dict] = {}  # ordinal -> uid, dir, terminating
        self.pod: dict[int, dict] = {}  # ordinal -> uid, restarts, exit, log, offset, next_start
        self.lock = threading.RLock()
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._loop, daemon=True)

    # ---- the kubelet and the StatefulSet controller

    def _new_claim(self, i: int) -> None:
        uid = f"claim-{next(uids)}"
        self.claim[i] = {"uid": uid, "dir": self.root / f"{STS}-{i}-{uid}", "terminating": False}

    def _start(self, i: int) -> None:
        node, pod = self.nodes[i], self.pod[i]
        pod["offset"] = node.log_path.stat().st_size if node.log_path.exists() else 0
        self.cluster.start_node(node, self.data["ETCD_INITIAL_CLUSTER"], self.data["ETCD_INITIAL_CLUSTER_STATE"],
                                "test", data_dir=self.claim[i]["dir"] / "data")

    def _tick(self) -> None:
        now = time.monotonic()
        for i, claim in list(self.claim.items()):
            if claim["terminating"] and i not in self.pod:  # pvc-protection lets it go
                shutil.rmtree(claim["dir"], ignore_errors=True)
                del self.claim[i]
        for i in range(self.replicas):
            if i not in self.pod:
                if i in self.claim and self.claim[i]["terminating"]:
                    continue  # the new pod would wait for the old claim
                if i not in self.claim:
                    self._new_claim(i)
                self.pod[i] = {"uid": f"pod-{next(uids)}", "restarts": 0, "exit": 0, "log": "", "next_start": now}
                self._start(i)
                continue
            node, pod = self.nodes[i], self.pod[i]
            if node.proc is not None and node.proc.poll() is not None and pod.get("running", True):
                text = node.log_path.read_text(errors="replace")[pod["offset"]:]
                pod.update(restarts=pod["restarts"] + 1, exit=node.proc.returncode, log=text[-20000:], running=False,
                           next_start=now + min(0.5 * 2 ** pod["restarts"], 4.0))
            if not pod.get("running", True) and now >= pod["next_start"]:
                pod["running"] = True
                self._start(i)

    def _loop(self) -> None:
        while not self.stop.wait(0.2):
            with self.lock:
                self._tick()

    def close(self) -> None:
        self.stop.set()
        if self.thread.is_alive():
            self.thread.join(timeout=10)

    def lose(self, i: int, keep_claim: bool = False) -> str:
        """The member's data goes: its pod and claim deleted (a new, empty claim comes with the new
        pod), or with ``keep_claim`` its data dir emptied in place (the claim's UID stays)."""
        with self.lock:
            stop_process(self.nodes[i].proc, 5)
            self.pod.pop(i, None)
            if keep_claim:
                shutil.rmtree(self.claim[i]["dir"] / "data")
            else:
                self.claim[i]["terminating"] = True
            self._tick()
            self._tick()
            return self.claim[i]["uid"]

    # ---- ScaleSource

    def peer_url(self, name: str) -> str:
        return self.nodes[int(name.rsplit("-", 1)[1])].peer_url

    def client(self):
        return self.cluster.client([n for n in self.nodes.values() if n.running] or [self.nodes[0]])

    def statefulset(self):
        return {"spec": {"replicas": self.replicas}}

    def pods(self):
        with self.lock:
            out = []
            for i, pod in sorted(self.pod.items()):
                running = self.nodes[i].running
                last = {"terminated": {"exitCode": pod["exit"]}} if pod["restarts"] else {}
                out.append({"metadata": {"name": f"{STS}-{i}", "uid": pod["uid"]},
                            "status": {"podIP": "127.0.0.1",
                                       "conditions": [{"type": "Ready", "status": "True" if running else "False"}],
                                       "containerStatuses": [{"name": "etcd", "restartCount": pod["restarts"],
                                                              "lastState": last}]}})
            return out

    def set_replicas(self, replicas: int) -> None:
        with self.lock:
            for i in range(replicas, self.replicas):
                stop_process(self.nodes[i].proc, 10)
                self.pod.pop(i, None)
            self.replicas = replicas
            self._tick()

    def write_bootstrap(self, data, only_if_missing: bool = False) -> bool:
        if (self.data and only_if_missing) or self.data == dict(data):
            return False
        self.data = dict(data)
        return True

    def claims(self, terminating: bool = False) -> list[str]:
        with self.lock:
            return sorted(f"data-{STS}-{i}" for i, c in self.claim.items() if terminating or not c["terminating"])

    def claim_volumes(self) -> dict[str, Volume]:
        with self.lock:
            return {f"data-{STS}-{i}": Volume(c["uid"], c["terminating"]) for i, c in self.claim.items()}

    def delete_claim(self, name: str) -> None:
        with self.lock:
            i = int(name.rsplit("-", 1)[1])
            if i in self.claim:
                self.claim[i]["terminating"] = True
            self._tick()

    def delete_pod(self, name: str, uid: str) -> None:
        with self.lock:
            i = int(name.rsplit("-", 1)[1])
            if self.pod.get(i, {}).get("uid") == uid:
                stop_process(self.nodes[i].proc, 10)
                del self.pod[i]
            self._tick()

    def last_log(self, pod: str) -> str:
        with self.lock:
            return str(self.pod.get(int(pod.rsplit("-", 1)[1]), {}).get("log") or "")

    def records(self):
        return {k: dict(v) for k, v in self.notes.items()}

    def write_records(self, records, last: str = "") -> None:
        self.notes = {k: dict(v) for k, v in records.items() if k}
        if last:
            self.notes[""] = {"message": last}


@pytest.fixture
def kubelet(bin_path, tmp_path):
    (tmp_path / "etcd").mkdir()
    cluster = EtcdTestCluster(bin_path("etcd"), tmp_path / "etcd", make_certs(tmp_path / "pki"))
    k = Kubelet(cluster, tmp_path / "claims")
    first = k.nodes[0]
    k.write_bootstrap(bootstrap([(first.name, first.peer_url)], "new"))
    try:
        k.set_replicas(1)
        cluster.wait_ready([first])
        k.thread.start()
        drive(k, 3)
        yield k
    finally:
        k.close()
        cluster.close()


def drive(k: Kubelet, desired: int, start: bool = True, timeout: float = 180, **kw):
    return scale(k, lambda pods: k.client(), statefulset=STS, desired=desired, peer_url=k.peer_url, timeout=timeout,
                 start=start, poll=0.3, stuck_after=120, **kw)


class Writer(threading.Thread):
    def __init__(self, k: Kubelet):
        super().__init__(daemon=True)
        self.k, self.stop, self.acked = k, threading.Event(), set()

    def run(self) -> None:
        i = 0
        while not self.stop.is_set():
            key = f"w/{i:06d}".encode()
            try:
                self.k.client().put(key, b"v")
                self.acked.add(key)
                i += 1
            except EtcdError:
                time.sleep(0.05)


def voters(k: Kubelet) -> dict[str, str]:
    return {m.name: m.hex_id for m in k.client().member_list() if not m.is_learner}


def wait_for(what, test, timeout=60):
    deadline = time.monotonic() + timeout
    while not test():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.3)


@pytest.mark.parametrize("keep_claim", [False, True], ids=["claim-replaced", "data-dir-emptied"])
def test_a_member_whose_data_is_gone_is_removed_and_added_back_empty(kubelet: Kubelet, keep_claim: bool):
    """claim-replaced: the claim is deleted with the pod and comes back new (told by its UID);
    data-dir-emptied: the claim stays, the data dir is emptied (told by etcd's panic on its lost
    raft log, once the member has crash-looped). Both through the settling pass (start=False),
    which the rollout's gate waits on."""
    k = kubelet
    before = voters(k)
    assert sorted(before) == [f"{STS}-{i}" for i in range(3)]
    writer = Writer(k)
    writer.start()
    events: list[tuple[str, str]] = []
    try:
        time.sleep(1)
        k.lose(1, keep_claim=keep_claim)
        if keep_claim:  # nothing but etcd's own words tells this one: they come with the restarts
            wait_for("the member to crash-loop", lambda: k.pod[1]["restarts"] >= 2, 60)
        result = drive(k, 3, start=False, on_replaced=lambda m, msg: events.append((m, msg)))
        time.sleep(1)
    finally:
        writer.stop.set()
        writer.join(timeout=30)
    actions = [(s["action"], s["member"]) for s in result.steps]
    assert actions[0] == ("replace", f"{STS}-1") and ("add", f"{STS}-1") in actions, actions
    assert actions[-1] == ("promote", f"{STS}-1"), actions
    why = result.replaced[0]["why"]
    assert ("volume was replaced" if not keep_claim else "raft log is lost") in why, why
    assert [m for m, _ in events] == [f"{STS}-1"] and result.last_replacement == events[0][1]
    health = cluster_health(k.client())
    after = voters(k)
    assert health["healthy"] and health["member_count"] == 3, health
    assert sorted(after) == sorted(before) and after[f"{STS}-1"] != before[f"{STS}-1"]
    assert {n: after[n] for n in (f"{STS}-0", f"{STS}-2")} == {n: before[n] for n in (f"{STS}-0", f"{STS}-2")}
    assert k.replicas == 3
    stored = {kv.key for kv in k.client().iter_prefix(b"w/")}
    print(f"\n{len(writer.acked)} writes acknowledged while {STS}-1 was replaced ({why}); steps {actions}")
    assert len(writer.acked) > 20 and writer.acked <= stored
    # the member's own copy has every key too (it rejoined and caught up)
    own = k.cluster.client([k.nodes[1]])
    wait_for("the replaced member to serve every key",
             lambda: writer.acked <= {kv.key for kv in own.iter_prefix(b"w/", serializable=True)}, 30)
    # the next pass finds nothing to do, and the record names the new member
    again = drive(k, 3)
    assert again.steps == [] and k.notes[f"{STS}-1"]["id"] == after[f"{STS}-1"]


def test_a_member_that_is_stopped_or_restarting_is_not_replaced(kubelet: Kubelet):
    k = kubelet
    before = voters(k)
    k.nodes[2].proc.send_signal(signal.SIGSTOP)  # a member that does not answer (a frozen node)
    try:
        time.sleep(3)
        result = drive(k, 3, start=False)
        assert result.steps == [] and voters(k) == before
    finally:
        os.kill(k.nodes[2].proc.pid, signal.SIGCONT)
    k.nodes[1].proc.kill()  # a crash: the kubelet restarts it with its data
    wait_for("the restart", lambda: k.pod[1]["restarts"] >= 1 and k.nodes[1].running, 30)
    result = drive(k, 3, start=False)
    assert [s for s in result.steps if s["action"] in ("replace", "reset", "remove")] == []
    wait_for("every member healthy", lambda: cluster_health(k.client())["healthy"], 60)
    assert voters(k) == before
