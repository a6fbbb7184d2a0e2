"""The pass plan (plan/pass_plan.py): what one pass does, decided in Python beside the plan.

Its steps are the task files the role runs, in order; these tests read the order as the role
would run it and check each decision the YAML used to make in Jinja: the mode, the rollback's
reverse order, the pre-upgrade backup, the Dropping phase's client-CA trim, the refusals.
"""

from __future__ import annotations

import copy
from datetime import UTC, datetime
from pathlib import Path

import pytest
import yaml

from karmada_operator.plan import operations
from karmada_operator.plan import pass_plan as pp
from karmada_operator.plan import plan as kp
from karmada_operator.task import ModuleFailed
from karmada_operator.tasks import karmada_plan as task

ROOT = Path(__file__).resolve().parents[2]
TASKS = ROOT / "roles" / "karmada_deployment" / "tasks"
NOW = datetime(2026, 12, 5, tzinfo=UTC)


def running(version: str = "v1.16.0", **status) -> dict:
    cr = yaml.safe_load((ROOT / "config/samples/operator_v1alpha1_karmadadeployment.yaml").read_text())
    cr["metadata"].update({"namespace": "karmada-system", "generation": 3, "uid": "u1"})
    cr["spec"]["karmadaVersion"] = version
    plan = kp.build_plan(cr)
    cr["status"] = {"phase": "Running", "karmadaVersion": version, "observedGeneration": 3,
                    "controlPlaneHash": plan["controlPlaneHash"],
                    "conditions": [{"type": "Ready", "status": "True", "reason": "Running", "message": "ok",
                                    "lastTransitionTime": "t"},
                                   {"type": "EtcdReady", "status": "True", "reason": "QuorumReady", "message": "3/3"},
                                   {"type": "MembersReady", "status": "True", "reason": "AllReady", "message": "2/2"}],
                    **status}
    return cr


def names(this_pass: dict) -> list[str]:
    return [s["name"] for s in this_pass["steps"]]


def passes(cr: dict, **kw) -> dict:
    return pp.plan_pass(cr, kp.build_plan(cr), now=NOW, **kw)


def test_a_plain_full_pass_runs_every_step_forward_and_each_names_a_task_file():
    this_pass = passes(running())
    assert this_pass["mode"] == "full"
    # etcd scaling follows etcd on a local etcd, before the quorum gate; etcd's space and
    # defragmentation follow the gate (plan/operations.py); an upgrade's or a CA rotation's pass
    # leaves the defragmentation out (the rollback below); the encryption rewrite follows the
    # whole control plane, in every full pass
    assert names(this_pass) == ["ownership", "pki", "etcd", "etcd-scaling", "etcd-quorum", "etcd-space",
                                "etcd-defragmentation", "apiserver", "aggregated",
                                "resources", "components", "apiserver-last", "encryption-rewrite", "status"]
    for step in this_pass["steps"]:
        assert (TASKS / f"{step['file']}.yml").is_file(), step
    assert this_pass["upgrade"] == {} and this_pass["reverse"] is False and this_pass["caRotation"] == {}


def test_an_upgrade_backs_up_first_and_a_rollback_runs_the_steps_backwards():
    up = running("v1.16.0")
    up["spec"]["karmadaVersion"] = "v1.17.0"
    forward = passes(up)
    assert forward["upgrade"]["toVersion"] == "v1.17.0" and forward["reverse"] is False
    assert names(forward)[:7] == ["ownership", "pre-upgrade-backup", "pki", "etcd", "etcd-scaling", "etcd-quorum",
                                  "etcd-space"]
    assert names(forward).index("apiserver") < names(forward).index("aggregated") < names(forward).index("components")

    back = running("v1.17.0", upgrade={"phase": "InProgress", "fromVersion": "v1.16.0", "toVersion": "v1.17.0"})
    back["spec"]["karmadaVersion"] = "v1.16.0"
    rollback = passes(back)
    assert rollback["reverse"] is True
    assert names(rollback) == ["ownership", "pre-upgrade-backup", "pki", "etcd", "etcd-scaling", "etcd-quorum",
                               "etcd-space", "apiserver-connect", "components",
                               "aggregated", "resources", "apiserver", "encryption-rewrite", "status"]
    assert all(s.get("reverse") for s in rollback["steps"] if s["file"] == "components")


def test_a_refused_version_change_fails_the_plan_with_its_reason_and_field():
    cr = running("v1.16.0")
    cr["spec"]["karmadaVersion"] = "v1.18.2"
    with pytest.raises(pp.PassRefused) as err:
        passes(cr)
    assert err.value.reason == "UnsupportedUpgrade" and err.value.field == "spec.karmadaVersion"
    assert "one minor version at a time" in str(err.value)
    with pytest.raises(ModuleFailed) as failed:
        task.run({"resource": cr, "converged_control_plane": False, "deleting": False})
    assert failed.value.extra == {"field": "spec.karmadaVersion", "step_reason": "UnsupportedUpgrade"}


def test_an_unhealthy_plane_refuses_to_start_a_version_change():
    cr = running("v1.16.0")
    cr["status"]["conditions"][1]["status"] = "False"
    cr["spec"]["karmadaVersion"] = "v1.17.0"
    with pytest.raises(pp.PassRefused) as err:
        passes(cr)
    assert err.value.reason == "UpgradePreflightFailed"


def test_deleting_refuses_nothing_and_runs_no_control_plane_step():
    cr = running("v1.16.0")
    cr["spec"]["karmadaVersion"] = "v1.18.2"
    out = task.run({"resource": cr, "converged_control_plane": False, "deleting": True})
    assert out["pass"]["mode"] == "delete" and out["pass"]["steps"] == []
    assert out["plan"] == kp.build_plan(cr)


def test_a_spec_edit_that_leaves_the_control_plane_alone_is_a_members_only_pass():
    cr = running()
    cr["metadata"]["generation"] = 4  # a new generation, same control-plane hash
    this_pass = passes(cr)
    assert this_pass["mode"] == "members" and this_pass["steps"] == []
    # the control plane's conditions, written again without MembersReady and without times
    assert this_pass["conditions"] == [
        {"type": "Ready", "status": "True", "reason": "Running", "message": "ok"},
        {"type": "EtcdReady", "status": "True", "reason": "QuorumReady", "message": "3/3"}]


@pytest.mark.parametrize("change", ["same generation", "control plane changed", "not Ready", "not Running"])
def test_anything_else_is_a_full_pass(change):
    cr = running()
    cr["metadata"]["generation"] = 4
    if change == "same generation":
        cr["metadata"]["generation"] = 3
    elif change == "control plane changed":
        cr["spec"].setdefault("components", {})["search"] = {"enabled": True}
    elif change == "not Ready":
        cr["status"]["conditions"][0]["status"] = "False"
    else:
        cr["status"]["phase"] = "Degraded"
    assert passes(cr)["mode"] == "full"


def test_a_converged_control_plane_retries_only_the_members_unless_a_ca_rotation_is_due():
    cr = running()
    assert passes(cr, converged_control_plane=True)["mode"] == "members"
    cr["spec"].setdefault("certificates", {})["caRotation"] = {"ca": "karmada", "requestedAt": "2026-12-01T00:00:00Z"}
    rotating = passes(cr, converged_control_plane=True)
    assert rotating["mode"] == "full"
    assert rotating["caRotation"]["phase"] == "Trusting" and rotating["caRotation"]["ca"] == "karmada"


@pytest.mark.parametrize(("ca", "trims"), [("karmada", True), ("front-proxy", True), ("etcd", False)])
def test_only_a_client_ca_s_dropping_phase_trims_kube_apiserver_s_client_cas(ca, trims):
    cr = running(caRotation={"ca": ca, "phase": "Dropping", "requestedAt": "2026-12-01T00:00:00Z"})
    steps = names(passes(cr))
    assert ("ca-dropping" in steps) is trims
    if trims:
        assert steps[-3:] == ["ca-dropping", "encryption-rewrite", "status"]
    reissuing = running(caRotation={"ca": ca, "phase": "Reissuing", "requestedAt": "2026-12-01T00:00:00Z"})
    assert "ca-dropping" not in names(passes(reissuing))


def test_a_ca_rotation_the_operator_cannot_do_fails_as_invalid_spec_naming_the_field():
    cr = running()
    cr["spec"]["etcd"] = {"external": {"endpoints": ["https://e1:2379"], "tlsSecretRef": {"name": "ext"}}}
    cr["spec"].setdefault("certificates", {})["caRotation"] = {"ca": "etcd", "requestedAt": "2026-12-01T00:00:00Z"}
    with pytest.raises(pp.PassRefused) as err:
        passes(cr)
    assert err.value.reason == "InvalidSpec" and err.value.field.startswith("spec.certificates.caRotation")


def test_the_pki_hashes_restart_only_what_reads_the_changed_keys():
    plan = kp.build_plan(running())
    groups = {"pki": {}, "etcd": {}, "kubeconfig": {}}
    for mounts in [c["mounts"] for c in plan["components"]] + [plan["apiserver"]["restartMounts"],
                                                               plan["pki"]["etcd_restart_mounts"]]:
        for group, keys in mounts.items():
            for key in keys:
                groups[group][key] = key
    before = pp.pki_hashes(plan, groups, {}, {})
    renewed = copy.deepcopy(groups)
    renewed["kubeconfig"]["karmada-scheduler.conf"] = "renewed"
    after = pp.pki_hashes(plan, renewed, {}, {})
    changed = {k for k, v in after["components"].items() if before["components"][k] != v}
    assert changed == {"karmada-scheduler"}
    assert (after["etcd"], after["apiserver"], after["apiserverSpec"]) == (
        before["etcd"], before["apiserver"], before["apiserverSpec"])
    new_etcd_ca = copy.deepcopy(groups)
    new_etcd_ca["etcd"]["ca.crt"] = "another CA"
    moved = pp.pki_hashes(plan, new_etcd_ca, {}, {})
    assert moved["etcd"] != before["etcd"] and moved["apiserverSpec"] != before["apiserverSpec"]


# ---------------------------------------------------------------- day-2 operations (plan/operations.py)

def test_every_operation_reports_its_transitions_as_status_takes_them():
    record = {"fromVersion": "v1.16.0", "toVersion": "v1.17.0", "phase": "InProgress", "startTime": "t0",
              "components": []}
    rolled = [{"name": "karmada-apiserver", "version": "v1.17.0", "changed": True}]
    stopped = operations.report(record, "upgrade", "stopped", rolled, "karmada-scheduler", "0/1 ready",
                                now=lambda: NOW)
    assert stopped["fields"]["upgrade"]["phase"] == "Stopped"
    assert stopped["fields"]["upgrade"]["stoppedAt"] == "karmada-scheduler"
    assert stopped["conditions"] == [{"type": "Upgrading", "status": "False", "reason": "UpgradeStopped",
                                      "message": "upgrade from v1.16.0 to v1.17.0 stopped at karmada-scheduler: "
                                                 "0/1 ready"}]
    assert stopped["event"] == {}
    done = operations.report(record, "upgrade", "finished", rolled, now=lambda: NOW)
    assert done["fields"]["upgrade"]["phase"] == "Succeeded" and done["fields"]["upgrade"]["endTime"]
    assert done["event"] == {"reason": "UpgradeSucceeded", "message": done["conditions"][0]["message"]}

    doing = {"ca": "karmada", "phase": "Reissuing", "requestedAt": "r", "oldSerial": "01", "newSerial": "02",
             "message": "Reissuing: every leaf"}
    report = operations.report(doing, "caRotation", "doing", now=lambda: NOW)
    assert report["fields"] == {"caRotation": doing}
    assert report["conditions"][0]["type"] == "CARotated" and report["conditions"][0]["status"] == "False"
    assert report["event"] == {"type": "Normal", "reason": "CARotationReissuing",
                               "message": "karmada CA (serial 01 -> 02): Reissuing: every leaf"}
    moved = operations.report(doing, "caRotation", "advanced", True, "2/2 Ready", now=lambda: NOW)
    assert moved["fields"]["caRotation"]["phase"] == "Dropping" and moved["event"]["type"] == "Normal"
    kept = operations.report(doing, "caRotation", "advanced", False, "member1 not Ready", now=lambda: NOW)
    assert kept["fields"]["caRotation"]["phase"] == "Reissuing" and kept["event"]["type"] == "Warning"
    assert "member1 not Ready" in kept["fields"]["caRotation"]["message"]


def test_an_unknown_operation_or_transition_is_an_error():
    with pytest.raises(ValueError, match="no day-2 operation"):
        operations.report({}, "defrag", "doing")
    with pytest.raises(ValueError, match="no transition"):
        operations.report({"phase": "InProgress"}, "upgrade", "paused")
