"""karmada_rollout: apply the control-plane components one at a time, each gated on its rollout
(plugins/modules/karmada_rollout.py)."""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from karmada_operator.controlplane.rollout import RolloutStopped, Step, StepResult, remove, rollout
from karmada_operator.kube.client import Kube, KubeConfigError, KubeError
from karmada_operator.runtime import templates as role_templates
from karmada_operator.runtime.status_writer import event_object
from karmada_operator.task import ModuleFailed

ARGUMENT_SPEC: dict[str, Any] = {
    "namespace": {"type": "str", "required": True},
    "steps": {"type": "list", "elements": "dict", "default": []},
    # instead of steps: the components of one step of the plan, rendered here (component.yaml.j2,
    # runtime/templates.py) with the certificates step's hashes; those switched off are removed
    "components": {"type": "dict", "options": {
        "plan": {"type": "dict", "required": True},
        "step": {"type": "str", "required": True},
        "hashes": {"type": "dict", "required": True},
        "reverse": {"type": "bool", "default": False},
    }},
    "timeout": {"type": "int", "default": 300},
    "poll": {"type": "int", "default": 2},
    "stuck_after": {"type": "int", "default": 60},
    "owner": {"type": "dict"},
    "kubeconfig": {"type": "path"},
    "karmada_kubeconfig": {"type": "path"},
    "absent": {"type": "list", "elements": "dict", "default": []},
}
SUPPORTS_CHECK_MODE = False


def component_steps(components: dict[str, Any]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The rollout steps of one step's enabled components (the registry's order, backwards for a
    rollback) and the objects of its components switched off (Deployment, PDB, then Service)."""
    plan = components["plan"]
    now = [c for c in plan["components"] if c["step"] == components["step"]]
    steps = role_templates.component_steps(now, plan, {"hashes": components["hashes"]})
    absent = role_templates.render_objects("karmada_deployment", ["components-absent.yaml.j2"],
                                           {"karmada_deployment_plan": plan, "karmada_deployment_components_now": now})
    return (list(reversed(steps)) if components["reverse"] else steps), absent


def run(params: dict[str, Any], check_mode: bool = False, warn: Callable[[str], None] = print) -> dict[str, Any]:
    p = dict(params)
    if p.get("components"):
        try:
            p["steps"], p["absent"] = component_steps(p["components"])
        except KeyError as exc:
            raise ModuleFailed(f"components: {exc.args[0]}") from exc
    try:
        steps = [Step(name=s["name"], objects=list(s["objects"]), deployment=s["deployment"],
                      container=s["container"], selector=s["selector"], replicas=int(s["replicas"]),
                      lease=str(s.get("lease") or ""), admission=dict(s.get("admission") or {}))
                 for s in p["steps"]]
    except (KeyError, TypeError, ValueError) as exc:
        raise ModuleFailed(msg=f"steps: each needs name, objects, deployment, container, selector, replicas "
                               f"({exc})") from exc
    owner = p["owner"]
    try:
        # Applies through the runtime's proxy when it runs us (dependent watches), as
        # kubernetes.core would; the gates read the API server itself (the proxy's cache lags).
        kube = Kube.default(p["kubeconfig"])
        live = Kube.default(p["kubeconfig"], in_cluster_first=True)
        karmada = Kube.from_file(p["karmada_kubeconfig"]) if p["karmada_kubeconfig"] else None
    except KubeConfigError as exc:
        raise ModuleFailed(msg=str(exc)) from exc

    def tell(result: StepResult) -> None:
        if owner and result.changed:
            message = (f"{result.name} rolled out: {result.version or 'no ready pod'} on "
                       f"{len(result.pods)} pod(s) in {result.seconds:.0f} s")
            kube.create(event_object(owner, {"type": "Normal", "reason": "ComponentRolledOut",
                                             "message": message}, datetime.now(UTC)))

    with kube, live, (karmada or contextlib.nullcontext()):
        try:
            results = rollout(kube, steps, p["namespace"], timeout=float(p["timeout"]), poll=float(p["poll"]),
                              stuck_after=float(p["stuck_after"]), reader=live, karmada=karmada, owner=owner,
                              on_step=tell)
            deleted = remove(kube, p["absent"])
        except RolloutStopped as exc:
            if owner:
                kube.create(event_object(owner, {"type": "Warning", "reason": "RolloutStopped",
                                                 "message": str(exc)}, datetime.now(UTC)))
            raise ModuleFailed(msg=str(exc), reason=exc.reason, component=exc.component,
                             done=[r.as_dict() for r in exc.done], changed=any(r.changed for r in exc.done)) from exc
        except KubeError as exc:
            raise ModuleFailed(msg=f"{exc.status} {exc.reason}: {exc.message}") from exc
    return {"changed": any(r.changed for r in results) or bool(deleted), "steps": [r.as_dict() for r in results],
            "deleted": deleted}
