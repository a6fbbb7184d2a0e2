"""Version changes of a running Karmada: whether one is allowed, and status.upgrade.

A version change is ``spec.karmadaVersion`` differing from ``status.karmadaVersion`` (the
version the plane last converged to) on a plane that was installed (has a status version).
The preflight allows one minor version up at a time, any patch change within a minor, and a
downgrade only back to the version an unfinished (running or stopped) upgrade started from (a
rollback) or when ``spec.upgrade.allowDowngrade`` is set. What runs is the same reconcile as an install: every
step gated, components one at a time in the registry's order (karmada_rollout).

status.upgrade records the last version change: fromVersion, toVersion, phase (InProgress,
Succeeded, Stopped), the component it stopped at, start and end times, and the components
rolled so far with the version their ready pods run.
"""

from __future__ import annotations

import copy
import hashlib
import re
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from karmada_operator.kube import ownership

# On the EtcdBackup an upgrade takes: "<from> to <to>". The backup controller lets it run while
# the KarmadaDeployment's new generation is not applied yet (the upgrade waits for it before
# it changes anything).
PRE_UPGRADE_ANNOTATION = "operator.karmada.io/pre-upgrade"
_API_VERSION = "operator.karmada.io/v1alpha1"
_SEMVER = re.compile(r"^v(\d+)\.(\d+)\.(\d+)(?:-([0-9A-Za-z.-]+))?$")


class UpgradeRefused(Exception):
    """The version change is not supported (reason ``UnsupportedUpgrade``)."""

    reason = "UnsupportedUpgrade"


class PreflightFailed(UpgradeRefused):
    """The plane is not healthy enough to start a version change."""

    reason = "UpgradePreflightFailed"


def _parse(version: str) -> tuple[int, int, int, str]:
    m = _SEMVER.match(version or "")
    if not m:
        raise UpgradeRefused(f"{version!r} is not a version like v1.18.2")
    return int(m.group(1)), int(m.group(2)), int(m.group(3)), m.group(4) or ""


def _rfc3339(when: datetime) -> str:
    return when.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def version_change(cr: Mapping[str, Any], target: str) -> tuple[str, str] | None:
    """(from, to) when the spec asks for another version than the plane runs, else None.
    ``from`` is the running version, or the start of an upgrade that has not finished."""
    status = cr.get("status") or {}
    running = str(status.get("karmadaVersion") or "")
    if not running:
        return None  # not installed yet: an install, not an upgrade
    last = status.get("upgrade") or {}
    unfinished = last.get("phase") in ("InProgress", "Stopped")
    if unfinished and last.get("toVersion") == target:
        return str(last.get("fromVersion") or running), target
    if unfinished and last.get("fromVersion") == target and last.get("toVersion"):
        # the old version set back on an unfinished upgrade: the components it already moved
        # roll back (in reverse order), from the version it was going to
        return str(last["toVersion"]), target
    if running == target:
        return None
    return running, target


def preflight(cr: Mapping[str, Any], target: str) -> None:
    """UpgradeRefused unless moving from the running version to ``target`` is supported."""
    change = version_change(cr, target)
    if change is None:
        return
    running = str((cr.get("status") or {}).get("karmadaVersion") or "")
    old, new = _parse(running), _parse(target)
    spec_upgrade = (cr.get("spec") or {}).get("upgrade") or {}
    last = (cr.get("status") or {}).get("upgrade") or {}
    if new[:3] < old[:3]:
        # Going back without the flag is a rollback of an upgrade that has not finished (running
        # or stopped). Once it has completed, the plane runs the new version with its data in the
        # new shape: going back is a downgrade like any other and needs the flag.
        unfinished = last.get("phase") in ("InProgress", "Stopped")
        rollback = unfinished and last.get("fromVersion") == target and last.get("toVersion") == running
        if not (rollback or spec_upgrade.get("allowDowngrade")):
            done = (f"the upgrade {last.get('fromVersion')} -> {last.get('toVersion')} has completed"
                    if last.get("phase") == "Succeeded" and last.get("toVersion") == running else
                    "no upgrade to roll back is running or stopped")
            raise UpgradeRefused(
                f"spec.karmadaVersion {target} is older than the running {running} and {done}: a downgrade needs "
                "spec.upgrade.allowDowngrade: true (without it, only a running or stopped upgrade can be set back "
                "to the version it started from)")
        if old[0] != new[0] or old[1] - new[1] > 1:
            raise UpgradeRefused(f"spec.karmadaVersion {target}: a downgrade moves one minor version at a time "
                                 f"(running {running})")
        return
    if new[0] != old[0] or new[1] - old[1] > 1:
        raise UpgradeRefused(f"spec.karmadaVersion {target}: Karmada upgrades one minor version at a time "
                             f"(running {running}); go to v{old[0]}.{old[1] + 1}.x first")
    _healthy(cr, running)


# What must not be False when a version change starts (a resumed or rolled-back one is exempt:
# the plane is mid-change by design). Ready itself is not checked: a refused version change
# turns it False with nothing wrong in the plane.
HEALTH_CONDITIONS = ("EtcdReady", "ControlPlaneReady")


def _healthy(cr: Mapping[str, Any], running: str) -> None:
    status = cr.get("status") or {}
    if (status.get("upgrade") or {}).get("phase") in ("InProgress", "Stopped"):
        return
    for cond in status.get("conditions") or []:
        if cond.get("type") in HEALTH_CONDITIONS and cond.get("status") == "False":
            raise PreflightFailed(
                f"{cond['type']} is False ({cond.get('reason', '')}: {cond.get('message', '')}): a version change "
                f"starts only on a healthy plane; fix it, or set spec.karmadaVersion back to {running}")


def refusal(cr: Mapping[str, Any], target: str) -> dict[str, str]:
    """{} when the version change (if any) may start, else its reason and message."""
    try:
        preflight(cr, target)
    except UpgradeRefused as err:
        return {"reason": err.reason, "message": str(err)}
    return {}


def started(cr: Mapping[str, Any], target: str, now: datetime) -> dict[str, Any]:
    """status.upgrade as an upgrade (re)starts: an unfinished record for the same target keeps
    its start time and the components it already rolled; {} when no version changes."""
    change = version_change(cr, target)
    if change is None:
        return {}
    last = (cr.get("status") or {}).get("upgrade") or {}
    same = last.get("phase") in ("InProgress", "Stopped") and last.get("toVersion") == target
    return {"fromVersion": change[0], "toVersion": target, "phase": "InProgress",
            "startTime": last.get("startTime") if same and last.get("startTime") else _rfc3339(now),
            "components": list(last.get("components") or []) if same else []}


def is_rollback(record: Mapping[str, Any]) -> bool:
    """Whether the version change in ``record`` (status.upgrade as a pass starts) goes down:
    then the steps run in reverse order, the optional components first and karmada-apiserver
    last, so a component never runs against a newer one it was not built for."""
    if not record or record.get("phase") != "InProgress":
        return False
    try:
        return _parse(str(record.get("toVersion")))[:3] < _parse(str(record.get("fromVersion")))[:3]
    except UpgradeRefused:
        return False


def _merge_steps(record: Mapping[str, Any], steps: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The record's components plus the steps that rolled now (a component rolled again replaces its entry)."""
    out = {c["name"]: dict(c) for c in record.get("components") or []}
    for step in steps:
        if step.get("changed"):
            out[step["name"]] = {"name": step["name"], "version": step.get("version", ""),
                                 "startTime": step.get("started", ""), "endTime": step.get("finished", "")}
    return sorted(out.values(), key=lambda c: (c.get("endTime") or "", c["name"]))


def finished(record: Mapping[str, Any], steps: Sequence[Mapping[str, Any]], now: datetime) -> dict[str, Any]:
    """status.upgrade when the plane converged on the new version."""
    if not record:
        return {}
    return {**record, "phase": "Succeeded", "components": _merge_steps(record, steps), "endTime": _rfc3339(now)}


def stopped(record: Mapping[str, Any], steps: Sequence[Mapping[str, Any]], component: str, message: str,
            now: datetime) -> dict[str, Any]:
    """status.upgrade when a step failed: where it stopped and why; the components that
    passed their gate stay recorded (they keep the new version)."""
    if not record:
        return {}
    return {**record, "phase": "Stopped", "stoppedAt": component or "", "message": message[:1000],
            "components": _merge_steps(record, steps), "endTime": _rfc3339(now)}


def condition(record: Mapping[str, Any]) -> dict[str, str]:
    """The Upgrading condition for status.upgrade (none when no upgrade was ever recorded)."""
    if not record:
        return {}
    what = f"{record.get('fromVersion')} to {record.get('toVersion')}"
    if record.get("phase") == "InProgress":
        return {"type": "Upgrading", "status": "True", "reason": "Upgrading", "message": f"upgrading from {what}"}
    if record.get("phase") == "Stopped":
        return {"type": "Upgrading", "status": "False", "reason": "UpgradeStopped",
                "message": f"upgrade from {what} stopped at {record.get('stoppedAt') or 'a step'}: "
                           f"{record.get('message', '')}"[:1000]}
    return {"type": "Upgrading", "status": "False", "reason": "UpgradeSucceeded",
            "message": f"upgraded from {what} ({len(record.get('components') or [])} components rolled)"}


def pre_upgrade_backup_name(karmada: str, version: str, start: str) -> str:
    """<karmada>-pre-upgrade-<version, dots as dashes>-<start, e.g. 20261202t0730>: one per
    version change (a resumed one keeps its start time, so its backup), shortened with a digest
    past 63 characters."""
    stamp = re.sub(r"[^0-9t]", "", start.lower())[:13]
    name = f"{karmada}-pre-upgrade-{version.replace('.', '-')}-{stamp}".lower().rstrip("-")
    if len(name) <= 63:
        return name
    digest = hashlib.sha256(name.encode()).hexdigest()[:8]
    return f"{name[:54].rstrip('-.')}-{digest}"


def pre_upgrade_backup(cr: Mapping[str, Any], backups: Sequence[Mapping[str, Any]],
                       record: Mapping[str, Any]) -> dict[str, Any]:
    """The EtcdBackup to take before the version change ``record`` starts (status.upgrade as
    the pass starts), or {}: none when nothing changes version, when
    spec.upgrade.preUpgradeBackup is Skip, or when no EtcdBackup of ``backups`` backs up this
    KarmadaDeployment (no store configured). The store is that EtcdBackup's (a scheduled one
    first, then by name); the new one is a single backup, no schedule, no retention."""
    if not record or record.get("phase") != "InProgress":
        return {}
    spec = cr.get("spec") or {}
    if ((spec.get("upgrade") or {}).get("preUpgradeBackup") or "Auto") == "Skip":
        return {}
    meta = cr.get("metadata") or {}
    name, namespace = meta.get("name"), meta.get("namespace")
    sources = [b for b in backups
               if ((b.get("spec") or {}).get("karmadaDeploymentRef") or {}).get("name") == name
               and (b.get("metadata") or {}).get("namespace", namespace) == namespace
               and PRE_UPGRADE_ANNOTATION not in ((b.get("metadata") or {}).get("annotations") or {})
               and (b.get("spec") or {}).get("storage")]
    if not sources:
        return {}
    source = sorted(sources, key=lambda b: (not (b.get("spec") or {}).get("schedule"), b["metadata"]["name"]))[0]
    backup_spec = {"karmadaDeploymentRef": {"name": name}, "storage": copy.deepcopy(source["spec"]["storage"])}
    if source["spec"].get("jobResources"):
        backup_spec["jobResources"] = copy.deepcopy(source["spec"]["jobResources"])
    return {"apiVersion": _API_VERSION, "kind": "EtcdBackup",
            "metadata": {"name": pre_upgrade_backup_name(str(name), str(record.get("toVersion")),
                                                         str(record.get("startTime") or "")),
                         "namespace": namespace,
                         "labels": {"app.kubernetes.io/instance": name,
                                    ownership.MANAGED_BY_LABEL: ownership.MANAGED_BY},
                         "annotations": {PRE_UPGRADE_ANNOTATION: f"{record.get('fromVersion')} to "
                                                                 f"{record.get('toVersion')}",
                                         "operator.karmada.io/store-from": source["metadata"]["name"]}},
            "spec": backup_spec}


def pre_upgrade_backup_state(backup: Mapping[str, Any] | None) -> tuple[str, str]:
    """(state, message) of the pre-upgrade EtcdBackup: Succeeded, Failed or Waiting."""
    status = (backup or {}).get("status") or {}
    phase = status.get("phase")
    if phase == "Succeeded" and status.get("lastSuccessfulBackup"):
        last = status["lastSuccessfulBackup"]
        return "Succeeded", f"{last.get('location', '')}"
    if phase == "Failed":
        cond = next((c for c in status.get("conditions") or [] if c.get("status") == "False"), {})
        why = f"{cond.get('reason', '')}: {cond.get('message', '')}".strip(": ")
        return "Failed", f"the pre-upgrade backup {(backup or {}).get('metadata', {}).get('name')} failed" + \
            (f": {why}" if why else "")
    cond = next((c for c in status.get("conditions") or [] if c.get("type") == "Ready"), {})
    return "Waiting", str(cond.get("message") or phase or "not started yet")
