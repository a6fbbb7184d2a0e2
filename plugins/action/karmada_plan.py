"""karmada_plan in the controller process (module_utils/action_adapter.py).

Options: plugins/modules/karmada_plan.py.
"""

from __future__ import annotations

import sys
from pathlib import Path

_MODULE_UTILS = str(Path(__file__).resolve().parent.parent / "module_utils")
if _MODULE_UTILS not in sys.path:
    sys.path.append(_MODULE_UTILS)

import karmada_plan  # noqa: E402
from action_adapter import in_process_action  # noqa: E402

# Pure computation: no cluster, so no Kubernetes client to import.
ActionModule = in_process_action(karmada_plan.ARGUMENT_SPEC, karmada_plan.run, supports_check_mode=True,
                                 kubernetes=False)
