"""Status conditions in Kubernetes convention, as plain functions.

A condition is ``{type, status, reason, message, observedGeneration, lastTransitionTime}``.
``lastTransitionTime`` moves only when ``status`` changes, so a reconcile that finds the
same state writes nothing (and a status patch with no difference is skipped).
"""

from __future__ import annotations

import re
from datetime import UTC, datetime
from typing import Any

Condition = dict[str, Any]

_REASON = re.compile(r"^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$")
_STATUSES = ("True", "False", "Unknown")


class ConditionError(ValueError):
    """A condition that breaks the Kubernetes convention."""


def now_rfc3339() -> str:
    return datetime.now(UTC).replace(microsecond=0).strftime("%Y-%m-%dT%H:%M:%SZ")


def normalize(cond: Condition, generation: int | None) -> Condition:
    """Check one desired condition and fill observedGeneration; raise ConditionError when malformed."""
    ctype = cond.get("type")
    if not ctype or not isinstance(ctype, str):
        raise ConditionError(f"condition without a type: {cond!r}")
    status = cond.get("status")
    if isinstance(status, bool):
        status = "True" if status else "False"
    if status not in _STATUSES:
        raise ConditionError(f"condition {ctype}: status must be one of {_STATUSES}, got {status!r}")
    reason = cond.get("reason") or ("AsExpected" if status == "True" else "Unknown")
    if not _REASON.match(reason):
        raise ConditionError(f"condition {ctype}: reason must be CamelCase, got {reason!r}")
    out: Condition = {"type": ctype, "status": status, "reason": reason, "message": str(cond.get("message", ""))}
    gen = cond.get("observedGeneration", generation)
    if gen is not None:
        out["observedGeneration"] = int(gen)
    return out


def merge(current: list[Condition] | None, desired: list[Condition], generation: int | None = None,
          now: str | None = None) -> list[Condition]:
    """Conditions after applying ``desired`` onto ``current`` (other types are kept as they are)."""
    stamp = now or now_rfc3339()
    by_type = {c["type"]: dict(c) for c in (current or []) if isinstance(c, dict) and c.get("type")}
    order = [c["type"] for c in (current or []) if isinstance(c, dict) and c.get("type")]
    for raw in desired:
        cond = normalize(raw, generation)
        old = by_type.get(cond["type"])
        if old and old.get("status") == cond["status"] and old.get("lastTransitionTime"):
            cond["lastTransitionTime"] = old["lastTransitionTime"]
        else:
            cond["lastTransitionTime"] = stamp
        if cond["type"] not in by_type:
            order.append(cond["type"])
        by_type[cond["type"]] = cond
    return [by_type[t] for t in order]


def get(conditions: list[Condition] | None, ctype: str) -> Condition | None:
    for cond in conditions or []:
        if cond.get("type") == ctype:
            return cond
    return None


def is_true(conditions: list[Condition] | None, ctype: str) -> bool:
    cond = get(conditions, ctype)
    return bool(cond and cond.get("status") == "True")


def status_patch(current_status: dict[str, Any] | None, fields: dict[str, Any],
                 conditions: list[Condition] | None, generation: int | None,
                 now: str | None = None) -> dict[str, Any] | None:
    """The new status, or None when writing it would change nothing."""
    current = dict(current_status or {})
    new = dict(current)
    new.update(fields or {})
    if conditions:
        new["conditions"] = merge(current.get("conditions"), conditions, generation, now)
    if generation is not None and "observedGeneration" not in (fields or {}):
        new["observedGeneration"] = int(generation)
    return None if new == current else new
