"""When a run asks the runtime to come back before the reconcile period: a certificate due sooner."""

from datetime import UTC, datetime

import pytest

from karmada_operator.plan import requeue as kr
from support.karmada_e2e import ROOT

NOW = datetime(2026, 12, 4, 12, 0, tzinfo=UTC)


@pytest.mark.parametrize("text, seconds", [("10m", 600), ("30s", 30), ("1h30m", 5400), ("1.5s", 1.5),
                                           ("500ms", 0.5), ("0", 0), ("2h0m0s", 7200)])
def test_go_durations_parse_as_the_runtime_parses_them(text, seconds):
    assert kr.parse_duration(text) == pytest.approx(seconds)


@pytest.mark.parametrize("text", ["10", "m", "10 m", "1x", "-5s"])
def test_a_duration_the_runtime_would_refuse_is_refused(text):
    with pytest.raises(ValueError):
        kr.parse_duration(text)


def test_the_period_comes_from_watches_yaml():
    assert kr.watches_period(ROOT) == 600  # reconcilePeriod: 10m
    assert kr.watches_period(ROOT, "EtcdRestore") == 30


def cr(annotations=None):
    return {"metadata": {"annotations": annotations or {}}}


def test_a_renewal_due_before_the_next_periodic_reconcile_is_requeued_for():
    assert kr.requeue_after(cr(), "2026-12-04T12:04:30Z", 600, NOW) == "270s"
    assert kr.requeue_after(cr(), "2026-12-04T12:09:59Z", 600, NOW) == "599s"


def test_a_renewal_after_the_next_periodic_reconcile_asks_nothing():
    assert kr.requeue_after(cr(), "2026-12-04T12:10:00Z", 600, NOW) == ""
    assert kr.requeue_after(cr(), "2027-11-04T12:00:00Z", 600, NOW) == ""
    assert kr.requeue_after(cr(), "", 600, NOW) == ""  # no certificates listed


def test_a_renewal_already_due_comes_back_after_the_minimum_not_in_a_loop():
    assert kr.requeue_after(cr(), "2026-12-04T11:00:00Z", 600, NOW) == f"{kr.MIN_SECONDS}s"


def test_the_objects_own_period_wins_as_in_the_runtime():
    short = cr({kr.PERIOD_ANNOTATION: "30s"})
    assert kr.requeue_after(short, "2026-12-04T12:04:30Z", 600, NOW) == ""  # the 30 s period comes first
    assert kr.requeue_after(short, "2026-12-04T12:00:20Z", 600, NOW) == "20s"
    long = cr({kr.PERIOD_ANNOTATION: "1h"})
    assert kr.requeue_after(long, "2026-12-04T12:30:00Z", 600, NOW) == "1800s"
    # an annotation the runtime cannot parse: the watches.yaml period stands
    assert kr.requeue_after(cr({kr.PERIOD_ANNOTATION: "soon"}), "2026-12-04T12:30:00Z", 600, NOW) == ""


def test_the_converged_task_reads_its_own_operator_s_period_and_build():
    from karmada_operator.plan.converged import build_id
    from karmada_operator.runtime import converged_task

    assert converged_task.OPERATOR_ROOT == ROOT
    assert converged_task.own_build() == build_id(str(ROOT))
    now = datetime(2026, 12, 5, 12, 0, tzinfo=UTC)

    def cr(renew_at="", tick=""):
        status = {"converged": {"renewAt": renew_at}} if renew_at else {}
        if tick:
            status["etcdDefragmentation"] = {"phase": "Idle", "schedule": {"cron": "0 3 * * *", "nextTick": tick}}
        return {"metadata": {"name": "k"}, "status": status}

    assert converged_task.requeue(cr("2026-12-05T12:05:00Z"), now) == "300s"  # before the 10m period
    assert converged_task.requeue(cr("2026-12-05T13:00:00Z"), now) == ""
    assert converged_task.requeue(cr(), now) == ""
    # a scheduled defragmentation's tick is a time of its own: the soonest of the two
    assert converged_task.requeue(cr("2026-12-05T12:05:00Z", "2026-12-05T12:02:00Z"), now) == "120s"
    assert converged_task.requeue(cr("", "2026-12-05T12:07:30Z"), now) == "450s"
