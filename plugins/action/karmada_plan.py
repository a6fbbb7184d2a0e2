"""karmada_plan, run in the controller process (no module process, no AnsiballZ packing).

The plan is pure computation over the KarmadaDeployment (plugins/modules/karmada_plan.py keeps
the documentation and the same code as a module). Every reconcile computes it once, so it is
run here rather than in a forked Python that re-imports the module_utils each time: about 0.6 s
less per run on the 2-core test bed (docs/performance.md).
"""

from __future__ import annotations

import sys
from pathlib import Path

from ansible.plugins.action import ActionBase

# Controller-side plugins load module_utils as plain Python (as plugins/filter/karmada.py does).
_MODULE_UTILS = str(Path(__file__).resolve().parent.parent / "module_utils")
if _MODULE_UTILS not in sys.path:
    sys.path.append(_MODULE_UTILS)

from karmada_plan import PlanError, build_plan  # noqa: E402


class ActionModule(ActionBase):
    TRANSFERS_FILES = False
    _requires_connection = False

    def run(self, tmp=None, task_vars=None):
        result = super().run(tmp, task_vars)
        _, args = self.validate_argument_spec(argument_spec={"resource": {"type": "dict", "required": True}})
        try:
            plan = build_plan(args["resource"])
        except PlanError as exc:
            result.update(failed=True, msg=str(exc), field=exc.field)
            return result
        result.update(changed=False, plan=plan)
        return result
