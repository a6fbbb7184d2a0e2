"""The etcd rollout's decisions: which pod goes next (followers from the highest ordinal, the
leader last), and the gate that must hold before any pod is deleted."""

import pytest

from karmada_operator.etcd import rollout as er

STS = "karmada-etcd"
NEW, OLD = "rev-new", "rev-old"


def statefulset(generation=2, observed=2, update=NEW):
    return {"metadata": {"name": STS, "generation": generation},
            "status": {"observedGeneration": observed, "updateRevision": update}}


def pod(ordinal, revision=OLD, ready=True, terminating=False, ip=None, waiting=""):
    meta = {"name": f"{STS}-{ordinal}", "uid": f"uid-{ordinal}-{revision}",
            "labels": {"app.kubernetes.io/name": "etcd", er.REVISION_LABEL: revision}}
    if terminating:
        meta["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    status = {"podIP": ip or f"10.0.0.{ordinal + 10}",
              "conditions": [{"type": "Ready", "status": "True" if ready else "False"}],
              "containerStatuses": [{"name": "etcd", "image": "registry.k8s.io/etcd:3.6.6-0", "ready": ready}]}
    if waiting:
        status["containerStatuses"][0]["state"] = {"waiting": {"reason": waiting}}
    return {"metadata": meta, "status": status}


def health(n=3, leader=0, unhealthy=(), learners=(), raft=None, quorum=True, missing=()):
    members = []
    for i in range(n):
        if i in missing:
            continue
        members.append({"name": f"{STS}-{i}", "id": f"{i:x}", "healthy": i not in unhealthy,
                        "leader": i == leader, "learner": i in learners,
                        "raft_index": (raft or {}).get(i, 5000), "error": "down" if i in unhealthy else ""})
    return {"has_quorum": quorum, "members": members, "leader_id": f"{leader:x}" if leader is not None else ""}


def pods_of(*items):
    return er.member_pods(STS, list(items))


def test_pods_are_read_with_ordinal_revision_readiness_and_address():
    got = pods_of(pod(2, NEW), pod(0), {"metadata": {"name": "other-0"}, "status": {}})
    assert sorted(got) == [f"{STS}-0", f"{STS}-2"]
    assert got[f"{STS}-2"] == er.MemberPod(f"{STS}-2", 2, f"uid-2-{NEW}", NEW, True, False, "10.0.0.12",
                                           "registry.k8s.io/etcd:3.6.6-0")


def test_followers_go_first_from_the_highest_ordinal_and_the_leader_last():
    """Leader is member 1: the order is 2, 0, then 1 with leadership handed to an updated member."""
    order = []
    revisions = {0: OLD, 1: OLD, 2: OLD}
    for _ in range(4):
        d = er.decide(statefulset(), STS, pods_of(*(pod(i, r) for i, r in revisions.items())), health(leader=1), 3)
        if d.action == "done":
            break
        assert d.action == "delete", d
        ordinal = int(d.pod.rsplit("-", 1)[1])
        order.append((ordinal, d.leader, d.successor))
        revisions[ordinal] = NEW
    assert order == [(2, False, ""), (0, False, ""), (1, True, f"{STS}-2")]
    assert d.action == "done"


def test_a_first_install_with_every_pod_on_the_current_revision_deletes_nothing():
    d = er.decide(statefulset(), STS, pods_of(pod(0, NEW), pod(1, NEW), pod(2, NEW)), health(), 3)
    assert d.action == "done", d


def test_an_updated_leader_never_moves_while_followers_roll():
    d = er.decide(statefulset(), STS, pods_of(pod(0, NEW), pod(1), pod(2)), health(leader=0), 3)
    assert (d.action, d.pod, d.leader, d.successor) == ("delete", f"{STS}-2", False, "")


def test_a_single_member_rolls_without_a_successor():
    d = er.decide(statefulset(), STS, pods_of(pod(0)), health(n=1), 1)
    assert (d.action, d.pod, d.leader, d.successor) == ("delete", f"{STS}-0", True, "")


@pytest.mark.parametrize("sts, pods, h, why", [
    (None, [pod(0), pod(1), pod(2)], health(), "StatefulSet karmada-etcd not found"),
    (statefulset(observed=1), [pod(0), pod(1), pod(2)], health(), "has not observed its new spec yet"),
    (statefulset(update=""), [pod(0), pod(1), pod(2)], health(), "reports no update revision"),
    (statefulset(), [pod(0), pod(2)], health(), "karmada-etcd-1 has no pod yet"),
    (statefulset(), [pod(0), pod(1, terminating=True), pod(2)], health(), "karmada-etcd-1 is terminating"),
    (statefulset(), [pod(0), pod(1, NEW, ready=False), pod(2)], health(), "karmada-etcd-1 is not Ready"),
    (statefulset(), [pod(0), pod(1), pod(2), pod(3)], health(), "pods beyond 3 members still exist: karmada-etcd-3"),
    (statefulset(), [pod(0), pod(1), pod(2)], health(quorum=False, unhealthy=(0, 1)), "etcd has no quorum"),
    (statefulset(), [pod(0, NEW), pod(1, NEW), pod(2, NEW)], health(unhealthy=(2,)),
     "member karmada-etcd-2 is not healthy: down"),
    (statefulset(), [pod(0), pod(1), pod(2)], health(learners=(2,)), "karmada-etcd-2 is still a learner"),
    (statefulset(), [pod(0), pod(1), pod(2)], health(missing=(1,)), "karmada-etcd-1 is not an etcd member"),
    (statefulset(), [pod(0), pod(1), pod(2)], health(n=4), "etcd lists members that have no pod: karmada-etcd-3"),
    (statefulset(), [pod(0), pod(1), pod(2)], health(leader=None), "do not agree on one leader"),
    (statefulset(), [pod(0), pod(1), pod(2)], health(raft={0: 9000, 1: 1000, 2: 9000}),
     "karmada-etcd-1 is catching up with the leader (raft index 1000 of 9000)"),
])
def test_nothing_is_deleted_until_the_gate_holds(sts, pods, h, why):
    d = er.decide(sts, STS, pods_of(*pods), h, 3)
    assert d.action == "wait" and why in d.reason, d


def test_a_member_down_on_an_old_revision_is_replaced_first_when_the_others_keep_quorum():
    """A rollout stopped at a broken image (revision rev-broken) goes on once the spec is fixed (rev-new)."""
    broken = [pod(0), pod(1), pod(2, "rev-broken", ready=False, waiting="ImagePullBackOff")]
    d = er.decide(statefulset(), STS, pods_of(*broken), health(unhealthy=(2,)), 3)
    assert (d.action, d.pod) == ("delete", f"{STS}-2") and "down on the old revision rev-broken" in d.reason
    # not while another member is down too, nor for the pod of the new revision (it is starting)
    two_down = [pod(0, ready=False), pod(1), pod(2, "rev-broken", ready=False)]
    assert er.decide(statefulset(), STS, pods_of(*two_down), health(unhealthy=(0, 2)), 3).action == "wait"
    starting = [pod(0), pod(1), pod(2, NEW, ready=False)]
    assert er.decide(statefulset(), STS, pods_of(*starting), health(unhealthy=(2,)), 3).action == "wait"
    # a single member that is down on an old revision is replaced (it serves nothing as it is)
    alone = er.decide(statefulset(), STS, pods_of(pod(0, ready=False)),
                      {"has_quorum": False, "members": [], "errors": ["cannot connect"]}, 1)
    assert (alone.action, alone.pod) == ("delete", f"{STS}-0")
    # the leader is never replaced this way (it is up: it leads)
    assert er._broken_outdated(statefulset(), STS, pods_of(pod(0), pod(1), pod(2, ready=False)),
                               health(leader=2), 3) is None


@pytest.mark.parametrize("n, unhealthy, learners, victim, ok", [
    (3, (), (), 0, True),
    (3, (1,), (), 0, False),        # 3 voters, one down: stopping another leaves 1 of a quorum of 2
    (5, (1,), (), 0, True),         # 5 voters, one down: 3 healthy left, quorum 3
    (5, (1, 2), (), 0, False),
    (3, (), (2,), 0, False),        # 2 voters and a learner: the learner does not vote, 1 of a quorum of 2
    (1, (), (), 0, True),           # one member: its restart is a pause by nature
])
def test_a_member_goes_only_when_the_voters_left_keep_a_quorum(n, unhealthy, learners, victim, ok):
    h = health(n=n, unhealthy=unhealthy, learners=learners)
    why = er.quorum_without(h, f"{STS}-{victim}")
    assert (why == "") is ok, why


def test_pass_records_the_rolled_step_shape():
    result = er.RollResult("rev", [er.MemberRolled("karmada-etcd-2", False, "rev", "a", "b", 3.0)], "3.6.6-0",
                           "a", "b", 3.0, ["karmada-etcd-0"])
    assert result.changed
    assert result.step() == {"name": "etcd", "changed": True, "version": "3.6.6-0", "started": "a", "finished": "b",
                             "seconds": 3.0, "pods": ["karmada-etcd-0"]}


def test_members_are_dialled_at_their_pod_addresses():
    pods = pods_of(pod(0, ip="10.1.0.5"), pod(1, terminating=True), pod(2, NEW))
    assert er.resolve_map(pods, "karmada-etcd.karmada-system.svc.cluster.local") == {
        "karmada-etcd-0.karmada-etcd.karmada-system.svc.cluster.local": "10.1.0.5",
        "karmada-etcd-2.karmada-etcd.karmada-system.svc.cluster.local": "10.0.0.12"}
