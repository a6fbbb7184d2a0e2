"""karmada_plan: the plan of a KarmadaDeployment and what this pass does (plugins/modules/karmada_plan.py).

Pure computation, no cluster: the plan (plan/plan.py: names, images, flags, pod settings) and,
beside it, the pass (plan/pass_plan.py: its mode, its ordered steps, the version change, the
CA-rotation phase). A spec the operator cannot act on fails naming ``field``; a pass that cannot
start (an unsupported version change, a failed preflight) fails with ``step_reason`` for status.
"""

from __future__ import annotations

from typing import Any

from karmada_operator.plan.pass_plan import PassRefused, plan_pass
from karmada_operator.plan.plan import PlanError, build_plan
from karmada_operator.task import ModuleFailed

ARGUMENT_SPEC: dict[str, Any] = {
    "resource": {"type": "dict", "required": True},
    # the fast-path check found the control plane as the last full pass left it (only members to retry)
    "converged_control_plane": {"type": "bool", "default": False},
    # the finalizer's pass: only the names are needed, nothing is refused
    "deleting": {"type": "bool", "default": False},
}
SUPPORTS_CHECK_MODE = True


def run(p: dict[str, Any], check_mode: bool = False, warn: Any = None) -> dict[str, Any]:
    try:
        plan = build_plan(p["resource"])
    except PlanError as exc:
        raise ModuleFailed(str(exc), field=exc.field) from None
    try:
        this_pass = plan_pass(p["resource"], plan, converged_control_plane=p["converged_control_plane"],
                              deleting=p["deleting"])
    except PassRefused as exc:
        raise ModuleFailed(str(exc), field=exc.field, step_reason=exc.reason) from None
    return {"changed": False, "plan": plan, "pass": this_pass}
