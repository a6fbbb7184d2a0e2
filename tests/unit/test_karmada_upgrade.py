"""Version changes of a running Karmada: the preflight and status.upgrade."""

from datetime import UTC, datetime

import karmada_upgrade as ku
import pytest

NOW = datetime(2026, 12, 2, 4, 0, tzinfo=UTC)


def cr(running="v1.17.1", upgrade=None, allow=False):
    status = {"karmadaVersion": running} if running else {}
    if upgrade:
        status["upgrade"] = upgrade
    return {"spec": {"upgrade": {"allowDowngrade": allow}}, "status": status}


@pytest.mark.parametrize("running, target", [
    ("v1.17.1", "v1.18.2"),  # one minor up
    ("v1.18.0", "v1.18.2"),  # a patch
    ("v1.18.2", "v1.18.2"),  # nothing changes
    ("", "v1.18.2"),  # an install
])
def test_supported_changes_pass_the_preflight(running, target):
    ku.preflight(cr(running), target)


@pytest.mark.parametrize("running, target, words", [
    ("v1.16.0", "v1.18.2", "one minor version at a time"),
    ("v1.18.2", "v2.0.0", "one minor version at a time"),
    ("v1.18.2", "v1.17.1", "allowDowngrade"),
    ("v1.18.2", "v1.18.1", "allowDowngrade"),
])
def test_unsupported_changes_are_refused_with_the_reason(running, target, words):
    with pytest.raises(ku.UpgradeRefused, match=words) as err:
        ku.preflight(cr(running), target)
    assert err.value.reason == "UnsupportedUpgrade"


def test_a_rollback_to_where_the_last_upgrade_started_is_allowed_and_so_is_an_allowed_downgrade():
    last = {"fromVersion": "v1.17.1", "toVersion": "v1.18.2", "phase": "Stopped"}
    ku.preflight(cr("v1.18.2", upgrade=last), "v1.17.1")
    ku.preflight(cr("v1.18.2", allow=True), "v1.17.1")
    with pytest.raises(ku.UpgradeRefused, match="one minor version at a time"):
        ku.preflight(cr("v1.18.2", allow=True), "v1.16.0")


def test_an_upgrade_starts_and_a_stopped_one_resumes_with_its_record():
    assert ku.started(cr("v1.18.2"), "v1.18.2", NOW) == {}
    assert ku.started(cr(""), "v1.18.2", NOW) == {}
    first = ku.started(cr("v1.17.1"), "v1.18.2", NOW)
    assert first == {"fromVersion": "v1.17.1", "toVersion": "v1.18.2", "phase": "InProgress",
                     "startTime": "2026-12-02T04:00:00Z", "components": []}
    steps = [{"name": "karmada-aggregated-apiserver", "changed": True, "version": "v1.18.2",
              "started": "2026-12-02T04:01:00Z", "finished": "2026-12-02T04:01:30Z"},
             {"name": "karmada-kube-controller-manager", "changed": False, "version": "v1.34.12"}]
    stop = ku.stopped(first, steps, "karmada-controller-manager", "ImagePullBackOff pulling x", NOW)
    assert (stop["phase"], stop["stoppedAt"]) == ("Stopped", "karmada-controller-manager")
    assert [c["name"] for c in stop["components"]] == ["karmada-aggregated-apiserver"]  # only what rolled
    cond = ku.condition(stop)
    assert (cond["status"], cond["reason"]) == ("False", "UpgradeStopped")
    assert "karmada-controller-manager" in cond["message"] and "ImagePullBackOff" in cond["message"]
    # the spec is fixed: the running version is still the old one (status.karmadaVersion moves on success)
    later = datetime(2026, 12, 2, 4, 10, tzinfo=UTC)
    resumed = ku.started(cr("v1.17.1", upgrade=stop), "v1.18.2", later)
    assert resumed["startTime"] == "2026-12-02T04:00:00Z" and resumed["phase"] == "InProgress"
    assert [c["name"] for c in resumed["components"]] == ["karmada-aggregated-apiserver"]
    done = ku.finished(resumed, [{"name": "karmada-controller-manager", "changed": True, "version": "v1.18.2",
                                  "started": "2026-12-02T04:10:05Z", "finished": "2026-12-02T04:10:40Z"}], later)
    assert done["phase"] == "Succeeded" and done["endTime"] == "2026-12-02T04:10:00Z"
    assert [c["name"] for c in done["components"]] == ["karmada-aggregated-apiserver", "karmada-controller-manager"]
    assert ku.condition(done)["reason"] == "UpgradeSucceeded"
    assert ku.finished({}, [], later) == {} and ku.condition({}) == {}
