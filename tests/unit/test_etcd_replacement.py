"""Replacing a lost etcd member: which member lost its data (and which never did), which volume
holds a removed member's data, the records, and the steps next_step takes from there."""

import pytest

from karmada_operator.etcd import replacement as er
from karmada_operator.etcd import scaling as es

STS = "karmada-etcd"
PANIC = ('{"level":"panic","ts":"2026-12-02T10:45:38.762155Z","logger":"raft","caller":"v3@v3.6.0/log.go:324",'
         '"msg":"tocommit(208) is out of range [lastIndex(0)]. Was the raft log corrupted, truncated, or lost?"}\n'
         "panic: tocommit(208) is out of range [lastIndex(0)]. Was the raft log corrupted, truncated, or lost?\n\n"
         "goroutine 133 [running]:\n")
REMOVED = ('{"level":"fatal","msg":"failed to start etcd","error":'
           '"the member has been permanently removed from the cluster"}\n')


def url(name):
    return f"https://{name}.karmada-etcd.karmada-system.svc.cluster.local:2380"


def mid(i):
    return f"{i + 10:x}abc"


def health(n, unhealthy=(), absent=(), learner=None, quorum=True):
    members = [{"name": f"{STS}-{i}", "id": mid(i), "healthy": i not in unhealthy, "learner": False,
                "reachable": i not in unhealthy} for i in range(n) if i not in absent]
    if learner is not None:
        members.append({"name": f"{STS}-{learner}", "id": "99", "healthy": True, "learner": True, "reachable": True})
    return {"has_quorum": quorum, "members": members}


def pod(i, ready=True, restarts=0, exit_code=0, uid=None):
    status = {"conditions": [{"type": "Ready", "status": "True" if ready else "False"}],
              "containerStatuses": [{"name": "etcd", "restartCount": restarts,
                                     "lastState": {"terminated": {"exitCode": exit_code}} if restarts else {}}]}
    return {"metadata": {"name": f"{STS}-{i}", "uid": uid or f"pod-{i}"}, "status": status}


def pods(n, **changes):
    out = {f"{STS}-{i}": pod(i) for i in range(n)}
    out.update({f"{STS}-{i}": p for i, p in changes.items()})
    return out


def volumes(n, **uids):
    return {f"{STS}-{i}": er.Volume(uids.get(f"v{i}", f"claim-{i}")) for i in range(n)}


def records(n):
    return {f"{STS}-{i}": {"id": mid(i), "volume": f"claim-{i}"} for i in range(n)}


def no_log(name):
    raise AssertionError(f"the log of {name} was read: only a crash-looping pod's is")


def test_a_member_whose_claim_was_replaced_is_lost():
    lost, stale = er.assess(STS, health(3, unhealthy=(1,)), pods(3, **{"1": pod(1, ready=False)}),
                            volumes(3, v1="claim-1-new"), records(3), no_log)
    assert list(lost) == [f"{STS}-1"] and "volume was replaced" in lost[f"{STS}-1"] and not stale


@pytest.mark.parametrize("case, h, v, log", [
    ("healthy, with a new claim (it caught up from a snapshot)", health(3), volumes(3, v1="claim-1-new"), ""),
    ("unhealthy, same claim (slow or restarting)", health(3, unhealthy=(1,)), volumes(3), ""),
    ("new claim still being deleted", health(3, unhealthy=(1,)), {**volumes(3),
                                                                 f"{STS}-1": er.Volume("claim-1-new", True)}, ""),
])
def test_no_signal_without_a_replaced_volume_or_a_data_error(case, h, v, log):
    lost, _ = er.assess(STS, h, pods(3), v, records(3), lambda n: log)
    assert not lost, case


def test_a_record_of_another_member_id_says_nothing():
    """The member was replaced since (new ID): its old record does not make the new claim a loss."""
    rec = records(3)
    rec[f"{STS}-1"]["id"] = "deadbeef"
    lost, _ = er.assess(STS, health(3, unhealthy=(1,)), pods(3), volumes(3, v1="claim-1-new"), rec, no_log)
    assert not lost


def test_a_member_crash_looping_on_a_data_error_is_lost():
    p = pods(3, **{"2": pod(2, ready=False, restarts=3, exit_code=2)})
    lost, _ = er.assess(STS, health(3, unhealthy=(2,)), p, volumes(3), records(3), lambda n: PANIC)
    assert list(lost) == [f"{STS}-2"]
    assert "raft log is lost" in lost[f"{STS}-2"] and "tocommit(208) is out of range" in lost[f"{STS}-2"]


@pytest.mark.parametrize("case, p, h, log", [
    ("one exit only (a restart)", pod(2, ready=False, restarts=1, exit_code=2), health(3, unhealthy=(2,)), PANIC),
    ("crash-looping for another reason", pod(2, ready=False, restarts=5, exit_code=1), health(3, unhealthy=(2,)),
     '{"level":"fatal","msg":"listen tcp 0.0.0.0:2379: bind: address already in use"}'),
    ("healthy again after the crashes", pod(2, ready=True, restarts=5, exit_code=2), health(3), PANIC),
    ("killed, not failed (exit 0 recorded)", pod(2, ready=False, restarts=3, exit_code=0), health(3, unhealthy=(2,)),
     PANIC),
])
def test_crash_loops_that_are_not_lost_data(case, p, h, log):
    lost, _ = er.assess(STS, h, pods(3, **{"2": p}), volumes(3), records(3), lambda n: log)
    assert not lost, case


def test_nothing_is_decided_without_quorum():
    p = pods(3, **{"2": pod(2, ready=False, restarts=3, exit_code=2)})
    assert er.assess(STS, health(3, unhealthy=(1, 2), quorum=False), p, volumes(3), records(3),
                     lambda n: PANIC) == ({}, {})


@pytest.mark.parametrize("log, label", [
    (PANIC, "raft log is lost"),
    ('{"level":"fatal","msg":"failed to open WAL","error":"walpb: crc mismatch"}', "write-ahead log"),
    ('{"level":"panic","msg":"failed to recover v3 backend from snapshot","error":"failed to find database '
     'snapshot file (snap: snapshot file doesn\'t exist)"}', "does not match"),
    ('{"level":"panic","msg":"failed to open database","error":"invalid database"}', "database file is corrupt"),
    ('{"level":"fatal","msg":"listen tcp: bind: address already in use"}', ""),
    ("", ""),
])
def test_data_errors_are_etcds_own_words(log, label):
    why = er.data_error(log)
    assert (label in why) if label else why == ""


def test_a_removed_members_volume_is_stale_until_it_is_a_new_one():
    rec = records(3)
    rec[f"{STS}-1"] = {"id": "", "volume": "claim-1", "why": "x", "since": "1"}
    h = health(3, absent=(1,))
    _, stale = er.assess(STS, h, pods(3), volumes(3), rec, no_log)
    assert list(stale) == [f"{STS}-1"]
    _, stale = er.assess(STS, h, pods(3), volumes(3, v1="claim-1-new"), rec, no_log)
    assert not stale


def test_a_missing_member_without_a_record_has_unknown_data_but_a_scale_out_joiner_does_not():
    _, stale = er.assess(STS, health(3, absent=(1,)), pods(3), volumes(3), {}, no_log)
    assert "no record" in stale[f"{STS}-1"]
    _, stale = er.assess(STS, health(2), pods(3), volumes(3), records(2), no_log)
    assert not stale


def test_a_pod_that_exits_as_a_removed_member_is_stale():
    p = pods(3, **{"1": pod(1, ready=False, restarts=1, exit_code=1)})
    _, stale = er.assess(STS, health(3, absent=(1,)), p, volumes(3, v1="claim-1-new"),
                         {**records(3), f"{STS}-1": {"id": "", "volume": "old"}}, lambda n: REMOVED)
    assert "permanently removed" in stale[f"{STS}-1"]


def test_records_follow_healthy_members_and_keep_the_rest():
    rec = {f"{STS}-0": {"id": mid(0), "volume": "claim-0"},
           f"{STS}-1": {"id": mid(1), "volume": "claim-1"},
           f"{STS}-2": {"id": "", "volume": "claim-2", "why": "x", "since": "1"},
           f"{STS}-5": {"id": "77", "volume": "claim-5"}}
    out = er.updated_records(STS, health(2, unhealthy=(1,)), volumes(3, v0="claim-0-b", v1="claim-1-b"), rec)
    assert out == {f"{STS}-0": {"id": mid(0), "volume": "claim-0-b"},  # healthy: recorded as it is now
                   f"{STS}-1": rec[f"{STS}-1"],  # unhealthy: the record a replaced volume is told from
                   f"{STS}-2": rec[f"{STS}-2"]}  # a replacement in progress; 5 was removed
    assert er.updated_records(STS, health(3, quorum=False), volumes(3), rec) == rec
    assert er.parse_records(er.dump_records(out)) == out and er.parse_records("not json") == {}


def test_emptydir_volumes_are_the_pods():
    v = er.member_volumes(STS, "EmptyDir", pods(2), {})
    assert v == {f"{STS}-0": er.Volume("pod-0"), f"{STS}-1": er.Volume("pod-1")}
    assert er.member_volumes(STS, "HostPath", pods(2), {}) == {}
    assert er.member_volumes(STS, "PersistentVolumeClaim", pods(2), {f"data-{STS}-0": er.Volume("c0"),
                                                                     "other": er.Volume("x")}) == {
        f"{STS}-0": er.Volume("c0")}


# next_step from there

def test_a_lost_member_is_replaced_before_anything_else_and_keeps_the_size():
    lost = {f"{STS}-1": "its volume was replaced"}
    for desired in (1, 3, 5):
        step = es.next_step(STS, desired, 3, health(3, unhealthy=(1,)), url, lost=lost)
        assert (step.action, step.member, step.replicas, step.in_flight) == ("replace", f"{STS}-1", 3, True), desired


def test_one_at_a_time_the_lowest_ordinal_first():
    lost = {f"{STS}-3": "a", f"{STS}-1": "b"}
    step = es.next_step(STS, 5, 5, health(5, unhealthy=(1, 3)), url, lost=lost)
    assert (step.action, step.member) == ("replace", f"{STS}-1")


def test_a_healthy_member_is_never_replaced():
    step = es.next_step(STS, 3, 3, health(3), url, lost={f"{STS}-1": "stale signal"})
    assert step.action == "done"


def test_a_replacement_that_would_break_the_quorum_is_refused():
    """With a quorum, removing a member that is down never costs it; the check stands on its own
    anyway (a health read that still claims a quorum), and without a quorum nothing is removed."""
    lost = {f"{STS}-1": "its raft log is lost"}
    step = es.next_step(STS, 5, 5, health(5, unhealthy=(1, 2, 3)), url, lost=lost)
    assert (step.action, step.refusal) == ("refuse", "EtcdReplaceRefused")
    assert f"not replacing {STS}-1" in step.reason and "2 of 4 members healthy, below the quorum of 3" in step.reason
    assert es.next_step(STS, 5, 5, health(5, unhealthy=(1, 2, 3), quorum=False), url, lost=lost).action == "wait"
    # 5 members, two down: removing one leaves 4 with 3 healthy, a quorum
    assert es.next_step(STS, 5, 5, health(5, unhealthy=(1, 2)), url, lost=lost).action == "replace"


def test_the_removed_member_comes_back_as_a_learner_under_its_name_once_its_volume_is_new():
    h = health(3, absent=(1,))
    step = es.next_step(STS, 3, 3, h, url, stale={f"{STS}-1": "holds the removed member's data"})
    assert (step.action, step.member, step.in_flight) == ("reset", f"{STS}-1", True)
    step = es.next_step(STS, 3, 3, h, url)
    assert (step.action, step.member, step.replicas, step.in_flight) == ("add", f"{STS}-1", 3, True)
    assert step.bootstrap == es.bootstrap([(f"{STS}-{i}", url(f"{STS}-{i}")) for i in range(3)], "existing")
    # the learner starts, then is promoted; the StatefulSet keeps its 3 pods throughout
    unstarted = {**h, "members": [*h["members"], {"name": "", "learner": True, "reachable": False,
                                                  "peer_urls": [url(f"{STS}-1")]}]}
    assert (es.next_step(STS, 3, 3, unstarted, url).action, es.next_step(STS, 3, 3, unstarted, url).member) == (
        "wait", f"{STS}-1")
    step = es.next_step(STS, 3, 3, health(3, absent=(1,), learner=1), url)
    assert (step.action, step.member, step.replicas) == ("promote", f"{STS}-1", 3)


def test_a_learner_stuck_on_a_removed_members_data_gets_its_volume_reset():
    h = health(3, absent=(1,))
    h["members"].append({"name": "", "learner": True, "reachable": False, "peer_urls": [url(f"{STS}-1")]})
    step = es.next_step(STS, 3, 3, h, url, stale={f"{STS}-1": "permanently removed"})
    assert (step.action, step.member, step.in_flight) == ("reset", f"{STS}-1", True)


def test_a_scale_out_joiner_is_still_the_next_ordinal():
    step = es.next_step(STS, 5, 3, health(3), url)
    assert (step.action, step.member, step.replicas) == ("add", f"{STS}-3", 4)


@pytest.mark.parametrize("action, refused", [("replace", True), ("reset", True), ("add", False)])
def test_hostpath_members_are_not_replaced(action, refused):
    step = es.ScaleStep(action, "why", in_flight=True)
    assert bool(es.storage_refusal(step, "HostPath")) == refused
    assert es.storage_refusal(step, "EmptyDir") == ""
