"""Polling helpers shared by the integration and end-to-end tests and the benchmarks."""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable
from typing import Any

# Every wait that ended, in order: (the test running it, what, seconds). The run's summary lists
# the longest (tests/conftest.py), so a CI log says where a module's time went without -s.
WAITS: list[tuple[str, str, float]] = []


def wait_for(predicate: Callable[[], Any], timeout: float, what: str,
             log: Callable[[], str] | None = None, interval: float = 1.0) -> Any:
    """Poll ``predicate`` until it returns something truthy and return that; fail with
    ``what`` and the tail of ``log`` (e.g. the operator's log) after ``timeout`` seconds."""
    start = time.monotonic()
    deadline = start + timeout
    while True:
        value = predicate()
        if value:
            # shown with -s, or with a failing test's captured output: where a test's time goes
            waited = time.monotonic() - start
            print(f"[waited {waited:.1f}s for {what}]", flush=True)
            test = os.environ.get("PYTEST_CURRENT_TEST", "").rsplit(" ", 1)[0]
            WAITS.append((test, what, waited))
            return value
        if time.monotonic() >= deadline:
            detail = f"\n{log()}" if log else ""
            raise AssertionError(f"timed out after {timeout:.0f}s waiting for {what}{detail}")
        time.sleep(interval)


def condition(obj: dict | None, ctype: str) -> dict:
    """The condition of type ``ctype`` in ``obj.status.conditions`` ({} when absent)."""
    for cond in ((obj or {}).get("status") or {}).get("conditions") or []:
        if cond.get("type") == ctype:
            return cond
    return {}


def crds_established(kubectl: Callable[..., Any], names: list[str] | None = None, timeout: float = 60) -> None:
    """Wait until the named CRDs (all CRDs when ``names`` is None) are Established.

    ``kubectl wait --for=condition=Established`` fails at once, instead of waiting, when it
    reads a CRD whose status has no conditions yet (seen right after ``kubectl apply``), so
    poll the objects instead. ``kubectl`` is a callable running kubectl with the given
    arguments and returning a CompletedProcess (``check`` keyword accepted)."""

    def established() -> bool:
        proc = kubectl("get", "crd", *(names or []), "-o", "json", check=False)
        if proc.returncode != 0:
            return False
        doc = json.loads(proc.stdout)
        items = doc.get("items", [doc]) if doc.get("kind") == "List" or "items" in doc else [doc]
        return bool(items) and all(condition(i, "Established").get("status") == "True" for i in items)

    wait_for(established, timeout, f"CRDs {names or 'all'} to be Established", interval=0.5)
