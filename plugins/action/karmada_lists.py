"""karmada_lists in the controller process (module_utils/karmada_operator/runtime/adapter.py).

Options: plugins/modules/karmada_lists.py.
"""

from __future__ import annotations

from karmada_operator.runtime import lists_task
from karmada_operator.runtime.adapter import in_process_action

ActionModule = in_process_action(lists_task.ARGUMENT_SPEC, lists_task.run, supports_check_mode=True)
