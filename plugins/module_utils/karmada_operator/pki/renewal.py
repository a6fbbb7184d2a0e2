"""Leaf renewal as a day-2 operation (plan/operations.py): its trigger.

A leaf certificate is renewed by the certificates step (pki/pki.py) in the first full pass after
it enters its renewal window (spec.certificates.renewBefore before its notAfter), and its pods
roll in that same pass (pass_plan.pki_hashes): there are no phases to record. What the operation
holds is when that pass must come: the soonest window, ``status.converged.renewAt``, which the
last full pass recorded (plan/converged.py). From then on the fast path takes the full pass, and
the runtime is asked to come back at that time when it comes before the next periodic reconcile
(plan/requeue.py).
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

NAME = "leafRenewal"


def _time(text: Any) -> datetime | None:
    try:
        return datetime.fromisoformat(str(text).replace("Z", "+00:00"))
    except ValueError:
        return None


class LeafRenewal:
    name = NAME

    def admit(self, cr: Mapping[str, Any], plan: Mapping[str, Any], now: datetime) -> dict[str, Any]:
        return {}  # the certificates step decides leaf by leaf; nothing to refuse before

    def under_way(self, cr: Mapping[str, Any]) -> str:
        return ""

    def wake_at(self, cr: Mapping[str, Any]) -> tuple[datetime, str] | None:
        renew_at = str(((cr.get("status") or {}).get("converged") or {}).get("renewAt") or "")
        at = _time(renew_at) if renew_at else None
        return (at, f"a certificate is due for renewal since {renew_at}") if at else None
