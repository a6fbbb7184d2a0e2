"""etcd's automatic defragmentation (etcd/defragmentation.py): the decision each pass makes, the
status it reports, and its place among the day-2 operations (plan/operations.py). The run
against real etcd members is proven end to end (tests/e2e/test_etcd_scaling.py)."""

from __future__ import annotations

import copy
from datetime import UTC, datetime
from pathlib import Path

import pytest
import yaml

from karmada_operator.etcd import defragmentation as defrag
from karmada_operator.kube.observed import merge_reports
from karmada_operator.plan import converged, operations
from karmada_operator.plan import pass_plan as pp
from karmada_operator.plan import plan as kp

ROOT = Path(__file__).resolve().parents[2]
NOW = datetime(2026, 12, 5, 12, 0, tzinfo=UTC)
MiB = 2**20
DEFAULT = defrag.policy(None)
POLICY = DEFAULT


def member(name, size_mib, used_mib, leader=False, healthy=True, learner=False):
    return {"name": name, "db_size": size_mib * MiB, "db_size_in_use": used_mib * MiB, "leader": leader,
            "healthy": healthy, "learner": learner, "reachable": healthy, "endpoint": f"https://{name}:2379",
            "error": "" if healthy else "connection refused"}


def health(*members):
    return {"members": list(members)}


def fragmented():
    """Three members, every one 80 % free pages on 500 MiB; etcd-1 leads."""
    return health(member("etcd-0", 500, 100), member("etcd-1", 500, 100, leader=True), member("etcd-2", 500, 100))


def test_the_defaults_are_openshifts_45_percent_on_100_mb_and_auto():
    assert defrag.policy({}) == {"policy": "Auto", "fragmentationPercent": 45, "minDbSize": "100Mi",
                                 "minDbSizeBytes": 100 * MiB, "schedule": "", "timeZone": ""}
    assert defrag.policy({"minDbSize": "1Gi", "fragmentationPercent": 30})["minDbSizeBytes"] == 2**30
    assert defrag.policy({"minDbSize": 4096})["minDbSizeBytes"] == 4096


@pytest.mark.parametrize(("given", "field"), [
    ({"policy": "Sometimes"}, "spec.etcd.local.defragmentation.policy"),
    ({"fragmentationPercent": 100}, "spec.etcd.local.defragmentation.fragmentationPercent"),
    ({"minDbSize": "lots"}, "spec.etcd.local.defragmentation.minDbSize"),
])
def test_a_setting_the_operator_cannot_use_names_its_field(given, field):
    with pytest.raises(defrag.PolicyError) as err:
        defrag.policy(given)
    assert err.value.field == field and str(err.value).startswith(field)
    cr = sample()
    cr["spec"]["etcd"] = {"local": {"defragmentation": given}}
    with pytest.raises(kp.PlanError) as plan_err:
        kp.build_plan(cr)
    assert plan_err.value.field == field


def test_due_at_the_threshold_and_the_size_not_below_either():
    assert defrag.is_due(member("a", 200, 110), POLICY)  # 45 % free exactly
    assert not defrag.is_due(member("a", 200, 111), POLICY)  # 44.5 %
    assert not defrag.is_due(member("a", 99, 1), POLICY)  # 99 % free but under 100 MiB
    assert not defrag.is_due({"name": "a", "db_size": 0, "db_size_in_use": 0}, POLICY)
    assert defrag.fragmentation(member("a", 500, 100)) == 80


def test_followers_first_by_name_the_leader_last_one_member_per_pass():
    h = health(member("etcd-10", 500, 100), member("etcd-2", 500, 100, leader=True), member("etcd-0", 500, 100))
    first = defrag.decide(POLICY, h, {}, 3, NOW)
    assert (first.action, first.member) == ("defragment", "etcd-0")
    assert first.record["round"]["members"] == ["etcd-0", "etcd-10", "etcd-2"]

    order = []
    record, current = {}, copy.deepcopy(h)
    for _ in range(5):
        d = defrag.decide(POLICY, current, record, 3, NOW)
        if d.action != "defragment":
            break
        order.append(d.member)
        for m in current["members"]:  # the member is defragmented: no free pages left
            if m["name"] == d.member:
                m["db_size"] = m["db_size_in_use"]
        record = defrag.after_member(d, {"name": d.member, "dbSizeAfter": 100 * MiB}, current, POLICY, NOW)
        assert record["phase"] in ("InProgress", "Idle")
    assert order == ["etcd-0", "etcd-10", "etcd-2"]
    assert record["phase"] == "Idle"
    assert [d["name"] for d in record["lastRound"]["done"]] == order
    assert record["lastRound"]["finishedAt"] == "2026-12-05T12:00:00Z"
    assert defrag.condition(record)["status"] == "True"


def test_a_round_ends_once_each_member_was_done_even_if_still_due():
    h = fragmented()
    record = {"phase": "InProgress", "round": {"startedAt": "t", "members": ["etcd-0", "etcd-2", "etcd-1"],
                                                "done": [{"name": n} for n in ("etcd-0", "etcd-2", "etcd-1")]}}
    d = defrag.decide(POLICY, h, record, 3, NOW)
    assert d.action == "report" and d.record["phase"] == "Idle"  # no member twice in one round: no loop
    assert defrag.Defragmentation().under_way({"status": {defrag.NAME: d.record}}) == ""


@pytest.mark.parametrize(("change", "why"), [
    (lambda h: h["members"][2].update(healthy=False, reachable=False), "etcd-2 is not healthy"),
    (lambda h: h["members"][2].update(learner=True), "etcd-2 is a learner"),
    (lambda h: h["members"].pop(), "etcd has 2 members, the plan 3"),
])
def test_nothing_while_a_member_is_unhealthy_a_learner_or_a_scale_is_under_way(change, why):
    h = fragmented()
    change(h)
    d = defrag.decide(POLICY, h, {}, 3, NOW)
    assert d.action == "report" and d.record["phase"] == "Waiting"
    assert why in d.record["message"]
    assert defrag.condition(d.record) == {"type": "EtcdDefragmented", "status": "False", "reason": "Waiting",
                                          "message": d.record["message"]}
    # waiting does not hold the fast path off: a full pass comes back at the recheck period
    assert defrag.Defragmentation().under_way({"status": {defrag.NAME: d.record}}) == ""


def test_off_and_nothing_due_report_true_with_the_reason():
    off = defrag.decide({**POLICY, "policy": "Off"}, fragmented(), {}, 3, NOW)
    assert off.action == "report" and defrag.condition(off.record)["reason"] == "Disabled"
    idle = defrag.decide(POLICY, health(member("etcd-0", 500, 400), member("etcd-1", 50, 1, leader=True)), {}, 2, NOW)
    assert idle.action == "report"
    assert defrag.condition(idle.record) == {
        "type": "EtcdDefragmented", "status": "True", "reason": "NotNeeded",
        "message": "no member at or above 45 % fragmentation on a database of at least 100Mi "
                   "(sizes: status.etcd.members)"}


def test_the_report_carries_the_sizes_etcd_gave_and_merges_into_running_status():
    h = fragmented()
    h["members"].append({"name": "etcd-3", "reachable": False})
    rep = defrag.report({"phase": "Idle", "message": "m"}, h)
    assert rep["fields"]["etcd"]["members"] == [{"name": n, "dbSize": 500 * MiB, "dbSizeInUse": 100 * MiB}
                                                for n in ("etcd-0", "etcd-1", "etcd-2")]
    status = {"phase": "Running", "event": {}, "fields": {"etcd": {"endpoints": ["e"], "members": [
        {"name": "etcd-0", "healthy": True, "dbSize": 1}, {"name": "etcd-9", "healthy": True}]}},
        "conditions": [{"type": "EtcdReady"}, {"type": "Ready"}]}
    merged = merge_reports(status, [rep])
    assert merged["fields"]["etcd"] == {"endpoints": ["e"], "members": [
        {"name": "etcd-0", "healthy": True, "dbSize": 500 * MiB, "dbSizeInUse": 100 * MiB},
        {"name": "etcd-9", "healthy": True}]}
    assert merged["fields"][defrag.NAME] == {"phase": "Idle", "message": "m"}
    assert [c["type"] for c in merged["conditions"]] == ["EtcdReady", "EtcdDefragmented", "Ready"]
    assert status["fields"]["etcd"]["members"][0]["dbSize"] == 1  # the input is left alone


def test_sizes_move_in_status_only_by_a_step_or_after_a_defragmentation():
    """A full pass that changes nothing writes nothing: etcd's sizes move with every write."""
    written = [{"name": "etcd-0", "dbSize": 500 * MiB, "dbSizeInUse": 100 * MiB},
               {"name": "etcd-1", "dbSize": 500 * MiB, "dbSizeInUse": 100 * MiB}]
    h = health(member("etcd-0", 520, 104), member("etcd-1", 560, 100), member("etcd-2", 3, 2))
    assert defrag.sizes(h, written) == [
        {"name": "etcd-0", "dbSize": 500 * MiB, "dbSizeInUse": 100 * MiB},  # within 10 %: as written
        {"name": "etcd-1", "dbSize": 560 * MiB, "dbSizeInUse": 100 * MiB},  # 12 % more: the new sizes
        {"name": "etcd-2", "dbSize": 3 * MiB, "dbSizeInUse": 2 * MiB}]  # never written: written now
    small = [{"name": "etcd-2", "dbSize": 3 * MiB, "dbSizeInUse": 2 * MiB}]
    assert defrag.sizes(health(member("etcd-2", 6, 1)), small) == small  # under 8 MiB of change
    assert defrag.sizes(health(member("etcd-0", 520, 104)), written, fresh=["etcd-0"]) == [
        {"name": "etcd-0", "dbSize": 520 * MiB, "dbSizeInUse": 104 * MiB}]  # just defragmented


def sample() -> dict:
    cr = yaml.safe_load((ROOT / "config/samples/operator_v1alpha1_karmadadeployment.yaml").read_text())
    cr["metadata"].update({"namespace": "karmada-system", "generation": 3, "uid": "u1"})
    return cr


def test_its_step_follows_the_quorum_gate_on_a_local_etcd_only_and_not_beside_another_operation():
    cr = sample()
    plan = kp.build_plan(cr)
    assert plan["etcd"]["defragmentation"] == POLICY
    op = operations.OPERATIONS[defrag.NAME]
    assert op.steps(plan, {"upgrade": {}, "caRotation": {}}) == [
        {"name": "etcd-defragmentation", "file": "operation", "operation": "etcdDefragmentation",
         "reason": "EtcdDefragmentationFailed", "condition": "EtcdDefragmented"}]
    assert op.steps(plan, {"upgrade": {"toVersion": "v9"}, "caRotation": {}}) == []
    assert op.steps(plan, {"upgrade": {}, "caRotation": {"phase": "Trusting"}}) == []
    external = {**plan, "etcd": {"mode": "external"}}
    assert operations.steps_after("etcd", external, {}) == operations.steps_after("etcd-quorum", external, {}) == []
    assert (ROOT / "roles/karmada_deployment/tasks/operation.yml").is_file()


def test_a_spec_edit_of_the_policy_takes_a_full_pass():
    cr = sample()
    before = kp.build_plan(cr)["controlPlaneHash"]
    cr["spec"].setdefault("etcd", {}).setdefault("local", {})["defragmentation"] = {"minDbSize": "1Mi"}
    assert kp.build_plan(cr)["controlPlaneHash"] != before  # members_only() sees a control-plane change


def test_a_round_in_progress_keeps_the_fast_path_off_so_the_next_member_gets_its_pass():
    cr = sample()
    cr["status"] = {defrag.NAME: {"phase": "InProgress", "message": "etcd-0 defragmented; next: etcd-2"}}
    assert operations.under_way(cr) == "etcd defragmentation under way (etcd-0 defragmented; next: etcd-2)"
    record = {"fingerprint": "f", "generation": 3, "at": "2026-12-05T11:59:00Z"}
    cr["status"].update(observedGeneration=3, converged=record,
                        conditions=[{"type": "Ready", "status": "True", "reason": "Running"}])
    decision = converged.decide(cr, [], "build", NOW, 3600)
    assert not decision.converged and "defragmentation under way" in decision.reason


def test_only_operations_that_run_as_steps_can_be_run():
    with pytest.raises(ValueError, match="no day-2 operation 'upgrade' runs as a step"):
        operations.run("upgrade", None)
    assert pp.step("x")["file"] == "x"


# The schedule (spec.etcd.local.defragmentation.schedule): every member at each tick.

def clean():
    """Three members with no free pages: nothing is due by the threshold."""
    return health(member("etcd-0", 200, 200), member("etcd-1", 200, 200, leader=True), member("etcd-2", 200, 200))


def test_a_schedule_counts_its_ticks_from_when_it_was_first_seen_and_waits_for_the_first():
    pol = defrag.policy({"schedule": "0 3 * * *"})
    first = defrag.decide(pol, clean(), {}, 3, NOW)  # noon: the next tick is tomorrow 03:00, not today's
    assert first.action == "report" and first.record["phase"] == "Idle"
    assert first.record["schedule"] == {"cron": "0 3 * * *", "timeZone": "", "since": "2026-12-05T12:00:00Z",
                                        "nextTick": "2026-12-06T03:00:00Z"}
    assert "next scheduled round at 2026-12-06T03:00:00Z" in first.record["message"]
    again = defrag.decide(pol, clean(), first.record, 3, NOW.replace(hour=20))
    assert again.record == first.record  # an idle pass writes the same record
    op = defrag.Defragmentation()
    status = {"status": {defrag.NAME: first.record}}
    assert op.wake_at(status)[0] == datetime(2026, 12, 6, 3, 0, tzinfo=UTC)
    assert operations.wake_at(status) == datetime(2026, 12, 6, 3, 0, tzinfo=UTC)
    assert operations.under_way(status, NOW.replace(hour=20)) == ""
    assert operations.under_way(status, datetime(2026, 12, 6, 3, 0, 1, tzinfo=UTC)) == (
        "a scheduled etcd defragmentation is due since 2026-12-06T03:00:00Z")
    # a new schedule counts from when it is seen
    moved = defrag.decide(defrag.policy({"schedule": "30 * * * *", "timeZone": "Europe/Berlin"}), clean(),
                          first.record, 3, NOW.replace(hour=20))
    assert moved.record["schedule"]["since"] == "2026-12-05T20:00:00Z"
    assert moved.record["schedule"]["nextTick"] == "2026-12-05T20:30:00Z"


def test_each_tick_defragments_every_member_followers_first_the_leader_last_once():
    pol = defrag.policy({"schedule": "0 3 * * *", "policy": "Off"})  # the schedule runs whatever policy says
    record = defrag.decide(pol, clean(), {}, 3, NOW).record
    assert record["phase"] == "Disabled" and "scheduled rounds at 0 3 * * *" in record["message"]
    at = datetime(2026, 12, 6, 3, 0, 5, tzinfo=UTC)
    order = []
    for _ in range(5):
        d = defrag.decide(pol, clean(), record, 3, at)
        if d.action != "defragment":
            record = d.record
            break
        assert d.record["round"]["trigger"] == "Schedule"
        order.append(d.member)
        record = defrag.after_member(d, {"name": d.member}, clean(), pol, at)
    assert order == ["etcd-0", "etcd-2", "etcd-1"]
    assert record["lastRound"]["trigger"] == "Schedule" and record["schedule"]["lastTick"] == "2026-12-06T03:00:00Z"
    assert record["schedule"]["nextTick"] == "2026-12-07T03:00:00Z"
    # the tick was used: a later pass the same day starts nothing
    assert defrag.decide(pol, clean(), record, 3, at.replace(hour=9)).action == "report"
    # a member down at a tick: the round waits (the tick is not lost), then runs
    down = clean()
    down["members"][0].update(healthy=False, reachable=False)
    nxt = datetime(2026, 12, 7, 3, 0, 5, tzinfo=UTC)
    waiting = defrag.decide(pol, down, record, 3, nxt)
    assert waiting.action == "report" and waiting.record["phase"] == "Waiting"
    assert defrag.decide(pol, clean(), waiting.record, 3, nxt).member == "etcd-0"


def test_a_bad_schedule_or_zone_is_refused_naming_the_field():
    with pytest.raises(defrag.PolicyError) as bad:
        defrag.policy({"schedule": "every night"})
    assert bad.value.field == "spec.etcd.local.defragmentation.schedule"
    with pytest.raises(defrag.PolicyError) as zone:
        defrag.policy({"schedule": "@daily", "timeZone": "Mars/Olympus"})
    assert zone.value.field == "spec.etcd.local.defragmentation.timeZone"


def test_leaf_renewal_is_an_operation_whose_time_is_the_soonest_renewal_window():
    cr = {"status": {"converged": {"renewAt": "2026-12-05T12:30:00Z"}}}
    assert operations.OPERATIONS["leafRenewal"].wake_at(cr)[0] == datetime(2026, 12, 5, 12, 30, tzinfo=UTC)
    assert operations.under_way(cr, NOW) == ""
    assert operations.under_way(cr, NOW.replace(hour=13)) == (
        "a certificate is due for renewal since 2026-12-05T12:30:00Z")
