"""The EtcdBackup status after a run or a failure (:func:`status_after`). Controller side."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

from karmada_operator.backup.plan import rfc3339
from karmada_operator.etcd.gateway import EtcdError
from karmada_operator.etcd.snapshots import (
    EtcdSnapshotError,
)
from karmada_operator.kube import conditions as k8s_conditions
from karmada_operator.kube.schedule import next_run

CONDITION_READY = "Ready"
CONDITION_RETENTION = "RetentionApplied"

# --------------------------------------------------------------------------- status


def _snapshot_item(item: Mapping[str, Any]) -> dict[str, Any]:
    keys = ("name", "location", "sizeBytes", "sha256", "revision", "etcdVersion", "karmadaVersion", "takenAt",
            "durationSeconds")
    return {k: item[k] for k in keys if k in item and item[k] not in (None, "")}


def status_after(status: Mapping[str, Any] | None, result: Mapping[str, Any] | None, now: datetime, *,
                 generation: int | None = None, schedule: str = "", time_zone: str = "", suspend: bool = False,
                 scheduled_time: datetime | None = None, error: Exception | Mapping[str, Any] | None = None,
                 running: bool = False) -> dict[str, Any]:
    """The EtcdBackup status after a run.

    ``result`` is the Job's result line (:meth:`BackupResult.as_dict`) on success; ``error``
    an exception (BackupPlanError, BackupFailed, StoreError: anything with ``reason``) or the
    Job's failure line ``{"reason", "message"}``; ``running`` while the Job runs. Always sets
    nextScheduleTime from the schedule (None when there is none or it is suspended) and
    lastScheduleTime to ``scheduled_time`` when given.
    """
    out = dict(status or {})
    stamp = rfc3339(now)
    conds: list[dict[str, Any]] = []
    if scheduled_time is not None:
        out["lastScheduleTime"] = rfc3339(scheduled_time)
    if running:
        out["phase"] = "Running"
        tick = f" for {rfc3339(scheduled_time)}" if scheduled_time is not None else ""
        conds.append({"type": CONDITION_READY, "status": "Unknown", "reason": "BackupRunning",
                      "message": f"a backup{tick} is running"})
    elif error is not None:
        reason, message = _reason_message(error)
        out["phase"] = "Failed"
        conds.append({"type": CONDITION_READY, "status": "False", "reason": reason, "message": message})
    elif result is not None:
        snap = _snapshot_item(result.get("snapshot") or {})
        out["phase"] = "Succeeded"
        out["lastSuccessfulTime"] = stamp
        out["lastSuccessfulBackup"] = {**snap, "endpoint": (result.get("snapshot") or {}).get("endpoint", "")}
        if not out["lastSuccessfulBackup"]["endpoint"]:
            del out["lastSuccessfulBackup"]["endpoint"]
        kept = [_snapshot_item(k) for k in result.get("kept") or []]
        for item in kept:  # the one just taken carries its duration
            if item.get("name") == snap.get("name") and "durationSeconds" in snap:
                item["durationSeconds"] = snap["durationSeconds"]
        kept.sort(key=lambda s: (s.get("takenAt", ""), s.get("name", "")), reverse=True)
        out["snapshots"] = kept
        msg = (f"snapshot {snap.get('name')} ({snap.get('sizeBytes')} bytes, revision {snap.get('revision')}) "
               f"stored at {snap.get('location')}")
        if result.get("deleted"):
            msg += f"; retention deleted {', '.join(result['deleted'])}"
        conds.append({"type": CONDITION_READY, "status": "True", "reason": "BackupSucceeded", "message": msg})
        if result.get("retentionError"):
            conds.append({"type": CONDITION_RETENTION, "status": "False",
                          "reason": result.get("retentionReason") or "RetentionFailed",
                          "message": str(result["retentionError"])})
        else:
            conds.append({"type": CONDITION_RETENTION, "status": "True", "reason": "RetentionApplied",
                          "message": f"{len(kept)} snapshot(s) kept"})
    if schedule and not suspend:
        try:
            nxt = next_run(schedule, time_zone or None, now)
        except ValueError:
            nxt = None
        if nxt is not None:
            out["nextScheduleTime"] = rfc3339(nxt)
        else:
            out.pop("nextScheduleTime", None)
    else:
        out.pop("nextScheduleTime", None)
    if generation is not None:
        out["observedGeneration"] = int(generation)
    if conds:
        out["conditions"] = k8s_conditions.merge(out.get("conditions"), conds, generation, stamp)
    return out


def _reason_message(error: Exception | Mapping[str, Any]) -> tuple[str, str]:
    if isinstance(error, Mapping):
        return str(error.get("reason") or "BackupFailed"), str(error.get("message") or "backup failed")
    reason = getattr(error, "reason", "") or "BackupFailed"
    if isinstance(error, EtcdError) and not isinstance(error, EtcdSnapshotError):
        reason = "EtcdUnavailable"
    return reason, str(error)
