"""requeue_after: the runtime requeues the object after ``period`` (plugins/modules/requeue_after.py)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

ARGUMENT_SPEC: dict[str, Any] = {"period": {"type": "str", "required": True}}
SUPPORTS_CHECK_MODE = True


def run(params: dict[str, Any], check_mode: bool = False, warn: Callable[[str], None] = print) -> dict[str, Any]:
    return {"changed": False, "period": params["period"]}
