"""When the next reconcile must come sooner than the periodic one: certificates due for renewal.

The ansible-operator runtime reconciles a KarmadaDeployment every reconcile period (watches.yaml,
10 minutes, or the per-object annotation ``ansible.sdk.operatorframework.io/reconcile-period``).
A certificate enters its renewal window at ``renewAt`` (status.converged, the soonest one): when
that comes before the next periodic reconcile, the run ends with a ``requeue_after`` task and
the runtime comes back at ``renewAt`` instead (it replaces the period for that one requeue), so
renewal never waits for the period. Otherwise nothing is asked and the period applies.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

PERIOD_ANNOTATION = "ansible.sdk.operatorframework.io/reconcile-period"
MIN_SECONDS = 5  # never a busy loop: the runtime's own retry interval after a failure
_UNITS = {"h": 3600.0, "m": 60.0, "s": 1.0, "ms": 0.001, "us": 1e-6, "µs": 1e-6, "ns": 1e-9}
_PART = re.compile(r"(\d+(?:\.\d*)?|\.\d+)(h|ms|us|µs|ns|m|s)")


def parse_duration(text: str) -> float:
    """Seconds of a Go duration (``10m``, ``1h30m``, ``45s``, ``0.5s``), as the runtime parses it."""
    text = str(text or "").strip()
    if text in ("0", ""):
        return 0.0
    pos, total = 0, 0.0
    for m in _PART.finditer(text):
        if m.start() != pos:
            break
        total += float(m.group(1)) * _UNITS[m.group(2)]
        pos = m.end()
    if pos != len(text):
        raise ValueError(f"{text!r} is not a duration like 10m or 1h30m")
    return total


def watches_period(root: str | Path, kind: str = "KarmadaDeployment") -> float:
    """The reconcilePeriod watches.yaml gives ``kind`` (the operator's directory, the parent of
    playbooks/); 0 when it sets none."""
    for entry in yaml.safe_load((Path(root) / "watches.yaml").read_text()) or []:
        if entry.get("kind") == kind:
            return parse_duration(entry.get("reconcilePeriod") or "0")
    return 0.0


def _time(text: str) -> dt.datetime | None:
    try:
        return dt.datetime.fromisoformat(str(text).replace("Z", "+00:00"))
    except ValueError:
        return None


def requeue_after(cr: Mapping[str, Any], renew_at: str, period: float, now: dt.datetime) -> str:
    """``"<n>s"`` when ``renew_at`` comes before the next periodic reconcile, else ``""``.
    ``period``: watches.yaml's; the object's annotation wins, as it does in the runtime."""
    annotations = (cr.get("metadata") or {}).get("annotations") or {}
    if PERIOD_ANNOTATION in annotations:
        with contextlib.suppress(ValueError):  # the runtime refuses it too, and says so
            period = parse_duration(annotations[PERIOD_ANNOTATION])
    due = _time(renew_at) if renew_at else None
    if due is None:
        return ""
    wait = max((due - now).total_seconds(), MIN_SECONDS)
    if period and wait >= period:
        return ""
    return f"{int(wait + 0.999)}s"
