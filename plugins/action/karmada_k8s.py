"""kubernetes.core.k8s, run in the task's worker (module_utils/action_adapter.py).

The same module code, options and result as `kubernetes.core.k8s`, without a new Python per
task (its start and the Kubernetes client's import took 1-2 s of every call on the 2-core test
bed). Options: kubernetes.core.k8s's (plugins/modules/karmada_k8s.py).
"""

from __future__ import annotations

import sys
from pathlib import Path

_MODULE_UTILS = str(Path(__file__).resolve().parent.parent / "module_utils")
if _MODULE_UTILS not in sys.path:
    sys.path.append(_MODULE_UTILS)

from action_adapter import module_in_process_action  # noqa: E402

ActionModule = module_in_process_action("ansible_collections.kubernetes.core.plugins.modules.k8s")
