"""Condition merging follows the Kubernetes convention."""

import pytest

from karmada_operator.kube import conditions as kc

T0, T1 = "2026-01-01T00:00:00Z", "2026-01-02T00:00:00Z"


def test_new_condition_gets_transition_time_and_generation():
    out = kc.merge([], [{"type": "Ready", "status": "False", "reason": "Installing", "message": "etcd"}], 3, T0)
    assert out == [{"type": "Ready", "status": "False", "reason": "Installing", "message": "etcd",
                    "observedGeneration": 3, "lastTransitionTime": T0}]


def test_same_status_keeps_transition_time_new_status_moves_it():
    first = kc.merge([], [{"type": "Ready", "status": "False", "reason": "Installing"}], 1, T0)
    same = kc.merge(first, [{"type": "Ready", "status": "False", "reason": "StillInstalling"}], 2, T1)
    assert same[0]["lastTransitionTime"] == T0 and same[0]["reason"] == "StillInstalling"
    flipped = kc.merge(same, [{"type": "Ready", "status": "True"}], 2, T1)
    assert flipped[0]["lastTransitionTime"] == T1 and flipped[0]["reason"] == "AsExpected"


def test_other_conditions_are_kept_in_order():
    cur = kc.merge([], [{"type": "EtcdReady", "status": True}, {"type": "Ready", "status": False}], 1, T0)
    out = kc.merge(cur, [{"type": "Ready", "status": True}], 1, T1)
    assert [c["type"] for c in out] == ["EtcdReady", "Ready"]
    assert out[0] == cur[0]


def test_status_patch_is_none_when_nothing_changes():
    status = kc.status_patch({}, {"phase": "Running"}, [{"type": "Ready", "status": "True"}], 4, T0)
    assert status["observedGeneration"] == 4
    assert kc.status_patch(status, {"phase": "Running"}, [{"type": "Ready", "status": "True"}], 4, T1) is None


@pytest.mark.parametrize("bad,needle", [
    ({"status": "True"}, "without a type"),
    ({"type": "Ready", "status": "yes"}, "status must be one of"),
    ({"type": "Ready", "status": "True", "reason": "not camel case"}, "CamelCase"),
])
def test_malformed_conditions_are_refused(bad, needle):
    with pytest.raises(kc.ConditionError, match=needle):
        kc.merge([], [bad])
