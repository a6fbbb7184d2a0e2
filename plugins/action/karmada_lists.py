"""karmada_lists in the controller process (module_utils/action_adapter.py).

Options: plugins/modules/karmada_lists.py.
"""

from __future__ import annotations

import sys
from pathlib import Path

_MODULE_UTILS = str(Path(__file__).resolve().parent.parent / "module_utils")
if _MODULE_UTILS not in sys.path:
    sys.path.append(_MODULE_UTILS)

import lists_task  # noqa: E402
from action_adapter import in_process_action  # noqa: E402

ActionModule = in_process_action(lists_task.ARGUMENT_SPEC, lists_task.run, supports_check_mode=True)
