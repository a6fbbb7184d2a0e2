"""Version changes of a running Karmada: the preflight and status.upgrade."""

from datetime import UTC, datetime

import pytest

from karmada_operator.plan import upgrade as ku

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
    for phase in ("Stopped", "InProgress"):
        last = {"fromVersion": "v1.17.1", "toVersion": "v1.18.2", "phase": phase}
        ku.preflight(cr("v1.18.2", upgrade=last), "v1.17.1")
    ku.preflight(cr("v1.18.2", allow=True), "v1.17.1")
    with pytest.raises(ku.UpgradeRefused, match="one minor version at a time"):
        ku.preflight(cr("v1.18.2", allow=True), "v1.16.0")


def test_going_back_after_a_completed_upgrade_needs_allow_downgrade():
    """A completed upgrade is not rolled back by setting the old version: the plane converged on
    the new one (its CRDs, its objects in the new shape). That is a downgrade, and needs the flag."""
    done = {"fromVersion": "v1.17.1", "toVersion": "v1.18.2", "phase": "Succeeded"}
    with pytest.raises(ku.UpgradeRefused, match="has completed.*allowDowngrade") as err:
        ku.preflight(cr("v1.18.2", upgrade=done), "v1.17.1")
    assert err.value.reason == "UnsupportedUpgrade"
    assert ku.refusal(cr("v1.18.2", upgrade=done), "v1.17.1")["reason"] == "UnsupportedUpgrade"
    ku.preflight(cr("v1.18.2", upgrade=done, allow=True), "v1.17.1")
    # a record of another upgrade does not make this one a rollback either
    other = {"fromVersion": "v1.18.0", "toVersion": "v1.18.2", "phase": "Stopped"}
    with pytest.raises(ku.UpgradeRefused, match="allowDowngrade"):
        ku.preflight(cr("v1.18.2", upgrade=other), "v1.17.1")


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


def test_a_version_going_down_is_a_rollback_run_in_reverse_order():
    done = {"fromVersion": "v1.17.1", "toVersion": "v1.18.2", "phase": "Succeeded"}
    back = ku.started(cr("v1.18.2", upgrade=done), "v1.17.1", NOW)
    assert (back["fromVersion"], back["toVersion"], ku.is_rollback(back)) == ("v1.18.2", "v1.17.1", True)
    assert not ku.is_rollback(ku.started(cr("v1.17.1"), "v1.18.2", NOW))
    assert not ku.is_rollback({}) and not ku.is_rollback({**back, "phase": "Succeeded"})


def test_setting_the_old_version_back_on_a_stopped_upgrade_rolls_back_what_it_moved():
    """The plane still reports the old version (it never converged on the new one), but the
    components the upgrade moved run the new one: they roll back, in reverse order."""
    stopped = {"fromVersion": "v1.17.1", "toVersion": "v1.18.2", "phase": "Stopped",
               "stoppedAt": "karmada-scheduler", "components": [{"name": "karmada-aggregated-apiserver"}]}
    ku.preflight(cr("v1.17.1", upgrade=stopped), "v1.17.1")
    back = ku.started(cr("v1.17.1", upgrade=stopped), "v1.17.1", NOW)
    assert (back["fromVersion"], back["toVersion"], back["components"]) == ("v1.18.2", "v1.17.1", [])
    assert ku.is_rollback(back)
    # converged on it: nothing more to do
    assert ku.started(cr("v1.17.1", upgrade={**back, "phase": "Succeeded"}), "v1.17.1", NOW) == {}


def _backup(name, karmada="karmada", schedule=None, annotations=None, storage=None):
    spec = {"karmadaDeploymentRef": {"name": karmada}, "storage": storage or {"pvc": {"claimName": "b"}}}
    if schedule:
        spec["schedule"] = schedule
    return {"metadata": {"name": name, "namespace": "ks", "annotations": annotations or {}}, "spec": spec}


def test_an_upgrade_backs_up_etcd_first_to_the_store_of_an_etcdbackup_of_this_karmada():
    kd = {"metadata": {"name": "karmada", "namespace": "ks"}, "spec": {"upgrade": {}}, "status": {}}
    record = {"fromVersion": "v1.17.1", "toVersion": "v1.18.2", "phase": "InProgress",
              "startTime": "2026-12-02T07:30:05Z"}
    s3 = {"s3": {"bucket": "b", "endpoint": "https://s3"}}
    backups = [_backup("adhoc"), _backup("nightly", schedule="0 2 * * *", storage=s3),
               _backup("other", karmada="another"),
               _backup("karmada-pre-upgrade-v1-17-1", annotations={ku.PRE_UPGRADE_ANNOTATION: "x"})]
    got = ku.pre_upgrade_backup(kd, backups, record)
    assert got["metadata"]["name"] == "karmada-pre-upgrade-v1-18-2-20261202t0730"  # one per version change
    assert got["metadata"]["annotations"][ku.PRE_UPGRADE_ANNOTATION] == "v1.17.1 to v1.18.2"
    assert got["spec"] == {"karmadaDeploymentRef": {"name": "karmada"}, "storage": s3}  # the scheduled one's store
    assert "schedule" not in got["spec"] and "retention" not in got["spec"]
    # nothing to take: no version change, no store for this Karmada, or Skip
    assert ku.pre_upgrade_backup(kd, backups, {}) == {}
    assert ku.pre_upgrade_backup(kd, backups[2:], record) == {}
    skip = {**kd, "spec": {"upgrade": {"preUpgradeBackup": "Skip"}}}
    assert ku.pre_upgrade_backup(skip, backups, record) == {}
    assert len(ku.pre_upgrade_backup_name("k" * 60, "v1.18.2", "2026-12-02T07:30:05Z")) == 63


def test_the_upgrade_waits_for_its_backup_and_stops_when_it_fails():
    assert ku.pre_upgrade_backup_state({})[0] == "Waiting"
    running = {"status": {"phase": "Running", "conditions": [
        {"type": "Ready", "status": "False", "reason": "Running", "message": "snapshot in progress"}]}}
    assert ku.pre_upgrade_backup_state(running) == ("Waiting", "snapshot in progress")
    done = {"status": {"phase": "Succeeded", "lastSuccessfulBackup": {"location": "pvc://b/k/x.db"}}}
    assert ku.pre_upgrade_backup_state(done) == ("Succeeded", "pvc://b/k/x.db")
    failed = {"metadata": {"name": "k-pre"}, "status": {"phase": "Failed", "conditions": [
        {"type": "Ready", "status": "False", "reason": "StoreUnreachable", "message": "s3: connection refused"}]}}
    assert ku.pre_upgrade_backup_state(failed) == (
        "Failed", "the pre-upgrade backup k-pre failed: StoreUnreachable: s3: connection refused")


def test_a_version_change_starts_only_on_a_healthy_plane():
    def with_conditions(*conds, upgrade=None):
        obj = cr("v1.17.1", upgrade=upgrade)
        obj["status"]["conditions"] = [{"type": t, "status": v, "reason": r, "message": m} for t, v, r, m in conds]
        return obj
    sick = with_conditions(("Ready", "False", "ComponentsNotReady", "x"),
                           ("ControlPlaneReady", "False", "ComponentsNotReady", "karmada-scheduler: CrashLoopBackOff"))
    assert ku.refusal(sick, "v1.18.2") == {
        "reason": "UpgradePreflightFailed",
        "message": "ControlPlaneReady is False (ComponentsNotReady: karmada-scheduler: CrashLoopBackOff): a version "
                   "change starts only on a healthy plane; fix it, or set spec.karmadaVersion back to v1.17.1"}
    assert ku.refusal(sick, "v1.17.1") == {}  # no version change: the reconcile goes on as usual
    etcd = with_conditions(("EtcdReady", "False", "EtcdNotReady", "1/3 members healthy"))
    assert ku.refusal(etcd, "v1.18.2")["reason"] == "UpgradePreflightFailed"
    # a refused change leaves Ready False with nothing wrong: that does not block the next one
    refused = with_conditions(("Ready", "False", "UnsupportedUpgrade", "one minor version at a time"),
                              ("ControlPlaneReady", "True", "Ready", ""))
    assert ku.refusal(refused, "v1.18.2") == {}
    # resuming a stopped upgrade: the plane is mid-change by design
    stopped = {"fromVersion": "v1.17.1", "toVersion": "v1.18.2", "phase": "Stopped"}
    assert ku.refusal(with_conditions(("ControlPlaneReady", "False", "ComponentsNotReady", "x"), upgrade=stopped),
                      "v1.18.2") == {}
    assert ku.refusal(cr("v1.16.0"), "v1.18.2")["reason"] == "UnsupportedUpgrade"
