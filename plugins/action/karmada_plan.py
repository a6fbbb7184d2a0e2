"""karmada_plan in the controller process (module_utils/karmada_operator/runtime/adapter.py).

Options and code: plugins/module_utils/karmada_operator/tasks/karmada_plan.py (documented in
plugins/modules/karmada_plan.py).
"""

from __future__ import annotations

from karmada_operator.runtime.adapter import in_process_action
from karmada_operator.tasks import karmada_plan as task

# Pure computation: no cluster, so no Kubernetes client to import.
ActionModule = in_process_action(task.ARGUMENT_SPEC, task.run, supports_check_mode=task.SUPPORTS_CHECK_MODE,
                                 kubernetes=False)
