"""etcd scaling decisions: learners first, promotion, removal from the highest ordinal, refusals."""

from datetime import UTC, datetime

import pytest

from karmada_operator.etcd import scaling as es

STS = "karmada-etcd"


def url(name):
    return f"https://{name}.karmada-etcd.karmada-system.svc.cluster.local:2380"


def health(n, unhealthy=(), learner=None, unstarted=False, quorum=True):
    members = [{"name": f"{STS}-{i}", "healthy": i not in unhealthy, "learner": False, "reachable": True}
               for i in range(n)]
    if learner is not None:
        members.append({"name": f"{STS}-{learner}", "healthy": True, "learner": True, "reachable": True})
    if unstarted:
        members.append({"name": "", "healthy": False, "learner": True, "reachable": False})
    return {"has_quorum": quorum, "members": members}


def test_scale_out_adds_the_next_ordinal_as_a_learner_with_exactly_the_members_and_itself():
    step = es.next_step(STS, 3, 1, health(1), url)
    assert (step.action, step.member, step.peer_url, step.replicas) == ("add", f"{STS}-1", url(f"{STS}-1"), 2)
    assert step.bootstrap == {"ETCD_INITIAL_CLUSTER_STATE": "existing",
                              "ETCD_INITIAL_CLUSTER": f"{STS}-0={url(STS + '-0')},{STS}-1={url(STS + '-1')}"}


def test_a_joiner_is_waited_for_then_promoted_before_the_next_is_added():
    assert es.next_step(STS, 3, 2, health(1, unstarted=True), url).action == "wait"
    step = es.next_step(STS, 3, 2, health(1, learner=1), url)
    assert (step.action, step.member) == ("promote", f"{STS}-1")
    assert es.next_step(STS, 3, 2, health(2), url).member == f"{STS}-2"


def test_scale_in_removes_the_highest_ordinal_first():
    step = es.next_step(STS, 3, 5, health(5), url)
    assert (step.action, step.member, step.replicas) == ("remove", f"{STS}-4", 4)


@pytest.mark.parametrize("desired, replicas, h, action, why", [
    (1, 3, health(3, unhealthy=(1,)), "refuse", "not removing karmada-etcd-2 while karmada-etcd-1 is unhealthy"),
    (4, 3, health(3), "refuse", "1, 3, 5 or 7"),
    (5, 3, health(3, unhealthy=(0,)), "wait", "not adding a member while karmada-etcd-0 is unhealthy"),
    (5, 3, health(3, quorum=False), "wait", "no quorum"),
    (5, 2, health(3), "replicas", "the StatefulSet has 2 pods for 3 members"),
    (3, 3, health(3), "done", "3 members, every one healthy"),
    (5, 4, health(2, learner=3), "wait", "a learner that is not the newest pod"),
])
def test_refusals_and_waits(desired, replicas, h, action, why):
    step = es.next_step(STS, desired, replicas, h, url)
    assert step.action == action and why in step.reason, step


def test_a_down_member_at_the_highest_ordinal_may_go():
    """Removing the member that is down leaves only healthy members: allowed."""
    assert es.next_step(STS, 1, 3, health(3, unhealthy=(2,)), url).action == "remove"


def test_a_learner_added_but_never_given_a_pod_is_added_again_with_its_pod():
    """A pass that stopped between adding the learner and raising the StatefulSet: the add is
    repeated (idempotent in etcd) and the StatefulSet raised, not waited for forever."""
    step = es.next_step(STS, 3, 1, health(1, unstarted=True), url)
    assert (step.action, step.member, step.replicas, step.in_flight) == ("add", f"{STS}-1", 2, True)
    assert step.bootstrap["ETCD_INITIAL_CLUSTER"] == f"{STS}-0={url(STS + '-0')},{STS}-1={url(STS + '-1')}"
    assert es.next_step(STS, 3, 2, health(1, unstarted=True), url).in_flight


def test_a_removed_members_pod_still_asked_for_is_scaled_away_before_anything_else():
    """A pass that stopped between removing the member and lowering the StatefulSet."""
    for desired in (1, 3, 5):
        step = es.next_step(STS, desired, 4, health(3), url)
        assert (step.action, step.replicas, step.in_flight) == ("replicas", 3, True)


def test_an_unhealthy_member_at_the_wanted_size_is_not_the_scalers_to_wait_for():
    step = es.next_step(STS, 3, 3, health(3, unhealthy=(1,)), url)
    assert step.action == "done" and "karmada-etcd-1 unhealthy" in step.reason


def test_new_changes_are_not_in_flight_but_finishing_ones_are():
    assert not es.next_step(STS, 5, 3, health(3), url).in_flight
    assert not es.next_step(STS, 1, 3, health(3), url).in_flight
    assert es.next_step(STS, 3, 2, health(1, learner=1), url).in_flight


def test_a_stray_unstarted_member_with_another_peer_url_is_not_taken_for_the_joiner():
    h = health(2)
    h["members"].append({"name": "", "healthy": False, "learner": True, "reachable": False,
                         "peer_urls": [url(f"{STS}-5")]})
    assert "stray" in es.next_step(STS, 3, 2, h, url).reason


@pytest.mark.parametrize("action, in_flight, refused", [
    ("add", False, True), ("remove", False, True), ("add", True, False), ("promote", True, False),
    ("replicas", True, False),
])
def test_hostpath_storage_refuses_new_members_and_removals(action, in_flight, refused):
    step = es.ScaleStep(action, "why", in_flight=in_flight)
    assert bool(es.storage_refusal(step, "HostPath")) == refused
    assert es.storage_refusal(step, "PersistentVolumeClaim") == ""


def test_an_existing_statefulsets_claim_templates_are_applied_back_as_created():
    """The API server refuses any change to volumeClaimTemplates: a spec.globals label added after
    the install must not reach them (it made every apply fail with Forbidden)."""
    live = {"spec": {"volumeClaimTemplates": [
        {"apiVersion": "v1", "kind": "PersistentVolumeClaim",
         "metadata": {"name": "data", "labels": {"app.kubernetes.io/name": "etcd"}, "creationTimestamp": None},
         "spec": {"accessModes": ["ReadWriteOnce"], "storageClassName": "standard", "volumeMode": "Filesystem",
                  "resources": {"requests": {"storage": "1Gi"}}},
         "status": {"phase": "Pending"}}]}}
    # what the operator renders, not what the API server defaulted (volumeMode): no ownership change
    assert es.claim_templates(live) == [
        {"metadata": {"name": "data", "labels": {"app.kubernetes.io/name": "etcd"}},
         "spec": {"accessModes": ["ReadWriteOnce"], "storageClassName": "standard",
                  "resources": {"requests": {"storage": "1Gi"}}}}]
    assert es.claim_templates(None) == [] and es.claim_templates({"spec": {}}) == []


# The operation (plan/operations.py): its step, its status record.

NOW = datetime(2026, 12, 6, 3, 0, tzinfo=UTC)


def test_the_operation_is_a_step_after_etcd_before_the_quorum_gate_on_a_local_etcd_only():
    from karmada_operator.plan import operations
    from karmada_operator.plan.pass_plan import control_plane_steps

    op = operations.OPERATIONS[es.NAME]
    assert op.after == "etcd"
    assert op.steps({"etcd": {"mode": "external"}}, {}) == []
    assert op.steps({"etcd": {"mode": "local"}}, {"upgrade": {"toVersion": "v9"}}) == [
        {"name": "etcd-scaling", "file": "operation", "operation": "etcdScaling", "reason": "EtcdNotReady",
         "condition": "EtcdReady"}]
    # etcd's own operations in the order they run: scaled before its space and fragmentation are looked at
    assert [n for n in operations.OPERATIONS if n.startswith("etcd")] == [
        "etcdScaling", "etcdSpace", "etcdDefragmentation"]
    after = {"etcd": op.steps({"etcd": {"mode": "local"}}, {})}
    names = [s["name"] for s in control_plane_steps({}, False, {}, after)]
    assert names[names.index("etcd"):names.index("etcd") + 3] == ["etcd", "etcd-scaling", "etcd-quorum"]
    assert op.under_way({"status": {es.NAME: {"members": 1, "replicas": 3}}}) == ""


def test_an_idle_pass_writes_the_record_the_last_one_wrote():
    result = es.ScaleResult(members=[f"{STS}-{i}" for i in range(3)], replicas=3)
    first = es.record(result, 3, 3, {}, NOW)
    assert first == {"members": 3, "replicas": 3}
    moved = es.ScaleResult(members=[f"{STS}-{i}" for i in range(5)], replicas=5, steps=[
        {"action": "add", "member": f"{STS}-3", "reason": "3 of 5"},
        {"action": "promote", "member": f"{STS}-3", "reason": "caught up"},
        {"action": "delete-claim", "member": f"{STS}-4", "reason": f"data-{STS}-4"}])
    changed = es.record(moved, 5, 3, first, NOW)
    assert changed["lastChange"] == {"at": "2026-12-06T03:00:00Z", "from": 3, "to": 5, "steps": [
        {"action": "add", "member": f"{STS}-3", "reason": "3 of 5"},
        {"action": "promote", "member": f"{STS}-3", "reason": "caught up"}]}
    later = NOW.replace(hour=4)
    idle = es.ScaleResult(members=[f"{STS}-{i}" for i in range(5)], replicas=5)
    assert es.record(idle, 5, 5, changed, later) == changed  # nothing moved: the same record, no new time
    replaced = es.ScaleResult(members=[f"{STS}-{i}" for i in range(5)], replicas=5,
                              last_replacement=f"etcd member {STS}-1 replaced: its claim was replaced")
    kept = es.record(replaced, 5, 5, changed, later)
    assert kept["lastReplacement"].startswith(f"etcd member {STS}-1 replaced")
    assert es.record(idle, 5, 5, kept, later) == kept

