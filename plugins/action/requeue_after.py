"""requeue_after in the task's worker (module_utils/action_adapter.py): the module's own code,
options and result (plugins/modules/requeue_after.py), without a new Python per task."""

from __future__ import annotations

import sys
from pathlib import Path

_MODULE_UTILS = str(Path(__file__).resolve().parent.parent / "module_utils")
if _MODULE_UTILS not in sys.path:
    sys.path.append(_MODULE_UTILS)

from action_adapter import module_in_process_action  # noqa: E402

ActionModule = module_in_process_action("requeue_after", kubernetes=False)
