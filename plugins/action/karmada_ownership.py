"""karmada_ownership in the task's worker (plugins/module_utils/karmada_operator/runtime/adapter.py).

Options and code: plugins/module_utils/karmada_operator/tasks/karmada_ownership.py (documented in
plugins/modules/karmada_ownership.py).
"""

from __future__ import annotations

from karmada_operator.runtime.adapter import in_process_action
from karmada_operator.tasks import karmada_ownership as task

ActionModule = in_process_action(task.ARGUMENT_SPEC, task.run, supports_check_mode=task.SUPPORTS_CHECK_MODE,
                                 kubernetes=True)
