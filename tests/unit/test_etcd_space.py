"""etcd's space (etcd/space.py): the quota and its defaults, the low mark, what the fast path
decides from etcd's alarms and sizes, and the NOSPACE runbook's order against a recording fake
client. The recovery against real etcd members under karmada-apiserver is proven end to end
(tests/e2e/test_etcd_scaling.py)."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from karmada_operator.etcd import space
from karmada_operator.etcd.gateway import EtcdAPIError
from karmada_operator.plan import plan as kp
from support.sample_plans import crs

MiB, GiB = 2**20, 2**30
PVC = {"type": "PersistentVolumeClaim", "size": "8Gi"}


def test_the_quota_defaults_to_half_the_claim_at_most_4gi_and_etcds_own_elsewhere():
    assert space.settings({}, PVC) == {"quota": "4Gi", "quotaBytes": 4 * GiB, "lowPercent": 80}
    assert space.settings({}, {"type": "PersistentVolumeClaim", "size": "2Gi"})["quotaBytes"] == GiB
    assert space.settings({}, {"type": "PersistentVolumeClaim", "size": "20Gi"})["quotaBytes"] == 4 * GiB
    assert space.settings({}, {"type": "EmptyDir"})["quotaBytes"] == 2 * GiB
    assert space.settings({"quotaBackendBytes": "64Mi"}, PVC)["quotaBytes"] == 64 * MiB
    assert space.settings({"quotaBackendBytes": 100 * MiB}, PVC)["quotaBytes"] == 100 * MiB


@pytest.mark.parametrize(("quota", "storage", "says"), [
    ("1Mi", PVC, "between 16Mi and 8Gi"),
    ("9Gi", {"type": "EmptyDir"}, "between 16Mi and 8Gi"),
    ("5Gi", PVC, "more than half of spec.etcd.local.storage.size"),
    ("lots", PVC, "not a quantity"),
])
def test_a_quota_the_operator_cannot_use_names_its_field(quota, storage, says):
    with pytest.raises(space.QuotaError) as err:
        space.settings({"quotaBackendBytes": quota}, storage)
    assert says in str(err.value) and str(err.value).startswith("spec.etcd.local.quotaBackendBytes")


def test_the_plan_passes_the_quota_to_etcd_and_refuses_extra_args_for_it():
    cr = crs()["sample"]
    cr["spec"]["etcd"]["local"]["quotaBackendBytes"] = "1Gi"
    etcd = kp.build_plan(cr)["etcd"]
    assert f"--quota-backend-bytes={GiB}" in etcd["args"] and etcd["space"]["quota"] == "1Gi"
    cr["spec"]["etcd"]["local"]["extraArgs"] = {"quota-backend-bytes": "1"}
    with pytest.raises(kp.PlanError) as err:
        kp.build_plan(cr)
    assert "quota-backend-bytes" in str(err.value)


SPACE = space.settings({"quotaBackendBytes": "100Mi"}, PVC)


def low_condition(status):
    return {"conditions": [{"type": space.CONDITION, "status": status}]}


def test_the_fast_path_takes_the_full_pass_on_nospace_and_on_a_newly_low_database():
    ok = {"alarms": [], "sizes": {"a": (50 * MiB, 40 * MiB)}}
    high = {"alarms": [], "sizes": {"a": (85 * MiB, 40 * MiB), "b": (20 * MiB, 10 * MiB)}}
    full = {"alarms": ["NOSPACE"], "sizes": {"a": (100 * MiB, 99 * MiB)}}
    assert space.fast_path_verdict(SPACE, ok, {}) == ""
    assert "85 % of its quota" in space.fast_path_verdict(SPACE, high, low_condition("False"))
    assert space.fast_path_verdict(SPACE, high, low_condition("True")) == ""  # already reported
    assert "NOSPACE" in space.fast_path_verdict(SPACE, full, low_condition("True"))
    assert space.low(SPACE, high) and not space.low(SPACE, ok)


def member(name, size, used, leader=False, revision=100):
    return {"name": name, "reachable": True, "db_size": size, "db_size_in_use": used, "leader": leader,
            "revision": revision, "endpoint": f"https://{name}:2379"}


def test_the_record_says_low_and_quota_exceeded_in_steps_of_five():
    ok = space.assess(SPACE, {"members": [member("e-0", 30 * MiB, 20 * MiB)]}, {})
    assert (ok["phase"], ok["percentUsed"], space.condition(ok)["status"]) == ("Ok", 30, "False")
    low = space.assess(SPACE, {"members": [member("e-0", 87 * MiB, 20 * MiB)]}, {"lastRecovery": {"at": "x"}})
    assert (low["phase"], low["percentUsed"], low["lastRecovery"]) == ("Low", 85, {"at": "x"})
    assert space.condition(low)["reason"] == "SpaceLow" and "85 %" in low["message"]
    full = space.assess(SPACE, {"members": [member("e-0", 95 * MiB, 90 * MiB)]}, {})
    assert full["phase"] == "QuotaExceeded" and "raise spec.etcd.local.quotaBackendBytes" in full["message"]
    assert space.assess(SPACE, {"members": []}, {})["phase"] == "Unknown"


@dataclass
class Status:
    db_size: int


class FakeEtcd:
    """Records the runbook's calls."""

    def __init__(self, compacted=False):
        self.calls = []
        self.compacted = compacted

    def call(self, path, body=None, endpoint=None, timeout=None):
        self.calls.append(("compact", body["revision"]))
        if self.compacted:
            raise EtcdAPIError("etcdserver: mvcc: required revision has been compacted", 11, "", "")
        return {}

    def defragment(self, endpoint, timeout=300.0):
        self.calls.append(("defragment", endpoint))

    def status(self, endpoint):
        return Status(10 * MiB)

    def alarms(self):
        return [{"member_id": "a1", "alarm": "NOSPACE"}, {"member_id": "b2", "alarm": "NOSPACE"}]

    def alarm_disarm(self, member_id, alarm):
        self.calls.append(("disarm", member_id, alarm))


@pytest.mark.parametrize("compacted", [False, True])
def test_the_runbook_compacts_then_defragments_followers_first_the_leader_last_then_disarms(compacted):
    etcd = FakeEtcd(compacted)
    health = {"members": [member("e-1", 100 * MiB, 99 * MiB, leader=True, revision=120),
                          member("e-0", 100 * MiB, 99 * MiB, revision=118), member("e-2", 100 * MiB, 99 * MiB)]}
    done = space.recover(etcd, health, timeout=5, poll=0)
    assert etcd.calls == [("compact", "120"), ("defragment", "https://e-0:2379"), ("defragment", "https://e-2:2379"),
                          ("defragment", "https://e-1:2379"), ("disarm", "a1", "NOSPACE"), ("disarm", "b2", "NOSPACE")]
    assert done["compactedRevision"] == 120 and [m["name"] for m in done["members"]] == ["e-0", "e-2", "e-1"]
    assert done["members"][-1] == {"name": "e-1", "leader": True, "dbSizeBefore": 100 * MiB, "dbSizeAfter": 10 * MiB}


def test_the_operation_runs_after_the_quorum_gate_on_a_local_etcd_only():
    op = space.EtcdSpace()
    assert op.after == "etcd-quorum"
    assert op.steps({"etcd": {"mode": "external"}}, {}) == []
    assert op.steps({"etcd": {"mode": "local"}}, {"upgrade": {"phase": "InProgress"}})[0]["operation"] == space.NAME


class Ctx:
    def __init__(self):
        self.events = []
        self.timeout, self.poll = 5, 0

    def event(self, what):
        self.events.append(what)

    def now(self):
        from datetime import UTC, datetime
        return datetime(2026, 12, 5, tzinfo=UTC)


def test_a_nospace_alarm_is_recovered_though_the_health_report_calls_every_member_unhealthy(monkeypatch):
    # cluster_health marks members with an alarm unhealthy and so reports no quorum; the
    # recovery must go ahead on the members that answer
    health = {"has_quorum": False, "alarms": [{"member_id": "a1", "alarm": "NOSPACE"}],
              "members": [member("e-0", 100 * MiB, 2 * MiB, leader=True)]}
    monkeypatch.setattr(space, "cluster_health", lambda client: {"members": [member("e-0", 10 * MiB, 2 * MiB)]})
    ctx = Ctx()
    out = space.EtcdSpace()._recover(ctx, FakeEtcd(), health, SPACE, {})
    assert [e["reason"] for e in ctx.events] == ["EtcdSpaceExhausted", "EtcdSpaceRecovered"]
    assert out["fields"][space.NAME]["phase"] == "Ok" and out["changed"]
    assert out["fields"][space.NAME]["lastRecovery"]["members"][0]["name"] == "e-0"
