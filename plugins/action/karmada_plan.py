"""karmada_plan in the controller process (module_utils/karmada_operator/runtime/adapter.py).

Options: plugins/modules/karmada_plan.py.
"""

from __future__ import annotations

from karmada_operator.plan import plan as karmada_plan
from karmada_operator.runtime.adapter import in_process_action

# Pure computation: no cluster, so no Kubernetes client to import.
ActionModule = in_process_action(karmada_plan.ARGUMENT_SPEC, karmada_plan.run, supports_check_mode=True,
                                 kubernetes=False)
