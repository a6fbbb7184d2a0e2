"""karmada_operation: one day-2 operation's share of a pass (plugins/modules/karmada_operation.py).

The one task behind every operation that runs as a step (plan/operations.py: ``run``): it gives
the operation its Context (the plan, the custom resource, the API server, an Event poster, the
step's timeout) and returns the operation's report, which the status step merges into the
Running status. Nothing here knows any one operation. An operation whose failure must stop the
pass raises ModuleFailed (``step_reason``: the reason status shows, as etcd scaling's refusals).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from typing import Any

from karmada_operator.kube.client import Kube, KubeConfigError, KubeError
from karmada_operator.plan import operations
from karmada_operator.runtime.status_writer import event_object
from karmada_operator.task import ModuleFailed

ARGUMENT_SPEC: dict[str, Any] = {
    "name": {"type": "str", "required": True},
    "plan": {"type": "dict", "required": True},
    "owner": {"type": "dict", "required": True},
    "timeout": {"type": "float", "default": 600.0},
    "poll": {"type": "float", "default": 2.0},
    "stuck_after": {"type": "float", "default": 60.0},
    "kubeconfig": {"type": "path"},
    # the operator's kubeconfig for karmada-apiserver (apiserver_connect.yml), when the pass made it
    "karmada_kubeconfig": {"type": "path"},
}
SUPPORTS_CHECK_MODE = False


def run(params: dict[str, Any], check_mode: bool = False, warn: Callable[[str], None] = print) -> dict[str, Any]:
    try:
        # Events through the runtime's proxy, as kubernetes.core would; reads and locks on the API
        # server itself (the proxy's cache lags behind)
        kube = Kube.default(params["kubeconfig"])
        live = Kube.default(params["kubeconfig"], in_cluster_first=True)
    except KubeConfigError as exc:
        raise ModuleFailed(str(exc)) from exc
    owner = params["owner"]

    def event(what: Mapping[str, str]) -> None:
        kube.create(event_object(owner, what, datetime.now(UTC)))

    with kube, live:
        try:
            # its record as the last pass wrote it: the runtime may start a pass from a cached copy
            # older than the last status write
            meta = owner["metadata"]
            current = live.get(owner["apiVersion"], owner["kind"], meta["name"], meta["namespace"]) or owner
        except KubeError as exc:
            raise ModuleFailed(f"{exc.status} {exc.reason}: {exc.message}") from exc
        try:
            karmada = Kube.from_file(params["karmada_kubeconfig"]) if params.get("karmada_kubeconfig") else None
        except KubeConfigError as exc:
            raise ModuleFailed(str(exc)) from exc
        ctx = operations.Context(plan=params["plan"], owner=current, live=live, event=event,
                                 timeout=float(params["timeout"]), poll=float(params["poll"]),
                                 stuck_after=float(params["stuck_after"]), karmada=karmada)
        try:
            report = operations.run(params["name"], ctx)
        except ValueError as exc:
            raise ModuleFailed(str(exc), error="InvalidInput") from exc
        except KubeError as exc:
            raise ModuleFailed(f"{exc.status} {exc.reason}: {exc.message}") from exc
        finally:
            if karmada is not None:
                karmada.close()
    return {"changed": bool(report.pop("changed", False)), "report": report}
