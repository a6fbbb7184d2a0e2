"""karmada_converged in the controller process (module_utils/karmada_operator/runtime/adapter.py).

Options: plugins/modules/karmada_converged.py.
"""

from __future__ import annotations

from karmada_operator.runtime import converged_task
from karmada_operator.runtime.adapter import in_process_action

ActionModule = in_process_action(converged_task.ARGUMENT_SPEC, converged_task.run)
