"""One reconcile pass of a kind whose controller is Python (EtcdBackup, EtcdRestore): read the
object, let a reconciler decide, write its status and its Events (runtime/status_writer.py, the
one status writer; dropped keys go as null). The modules in plugins/modules are argument specs around :func:`run`."""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from karmada_operator.kube.client import Kube, KubeConfigError, KubeError
from karmada_operator.runtime.status_writer import API_VERSION, write_status
from karmada_operator.task import ModuleFailed

# a Job runs, or what the object waits for may appear: a reconciler with ``follow`` may wait for it
FOLLOW_ACTIONS = ("started", "running", "waiting")
IMAGE_ENV = "KARMADA_OPERATOR_IMAGE"  # the operator's own image, for the Jobs (config/manager sets it)

COMMON_ARGS: dict[str, Any] = {
    "name": {"type": "str", "required": True},
    "namespace": {"type": "str", "required": True},
    "image": {"type": "str"},
    "image_pull_policy": {"type": "str", "default": "IfNotPresent", "choices": ["Always", "IfNotPresent", "Never"]},
    "kubeconfig": {"type": "path"},
}


@dataclass
class Outcome:
    """What one reconcile pass did: the status to write, Events, and a summary (``action``)."""

    status: dict[str, Any]
    events: list[dict[str, str]] = field(default_factory=list)
    action: str = "none"
    changed: bool = False


def _one_pass(live: Kube, creator: Kube | None, obj: dict[str, Any], image: str, p: Mapping[str, Any],
              make: Callable[..., Any]) -> tuple[Any, Outcome, bool]:
    """Reconcile ``obj`` once; write its status (when it differs) and Events."""
    rec = make(live, obj, image, pull_policy=p["image_pull_policy"], creator=creator)
    outcome = rec.reconcile()
    current = obj.get("status") or {}
    new = outcome.status
    changes = {} if outcome.action == "deleting" else {
        k: new.get(k) for k in current.keys() | new.keys() if new.get(k) != current.get(k)}
    write_status(live, obj, changes, outcome.events, rec.now)
    return rec, outcome, bool(changes)


def run(p: Mapping[str, Any], kind: str, make: Callable[..., Any]) -> dict[str, Any]:
    """One pass over the ``kind`` object ``p["name"]`` (the task's params): the task's result, or
    ModuleFailed. ``make(live, obj, image, pull_policy=, creator=)`` returns a reconciler (an
    empty image: it says so in status when it needs one) whose ``reconcile()`` gives an Outcome
    (status, events, action, changed) and which has ``now``."""
    image = p.get("image") or os.environ.get(IMAGE_ENV, "")
    try:
        # Live reads and status writes; Jobs through the runtime's proxy (when it runs us), which
        # adds the owner reference and watches them, so a Job's end triggers a pass.
        live = Kube.default(p.get("kubeconfig"), in_cluster_first=True)
        proxy = Kube.default(p.get("kubeconfig"))
    except KubeConfigError as exc:
        raise ModuleFailed(str(exc)) from None
    via_proxy = bool(os.environ.get("K8S_AUTH_KUBECONFIG")) and not p.get("kubeconfig")
    where = f"{kind} {p['namespace']}/{p['name']}"
    with live, proxy:
        try:
            obj = live.get(API_VERSION, kind, p["name"], p["namespace"])
            if obj is None:
                return {"changed": False, "action": "none", "phase": "", "msg": f"{kind} not found"}
            rec, outcome, wrote = _one_pass(live, proxy if via_proxy else None, obj, image, p, make)
            # A reconciler that can wait for its Job (``follow``) records a short one in this
            # pass, up to follow_seconds; the pass ends when the Job does or the time is up.
            # What it waits for: ``following(outcome)`` when it says (a restore's Jobs), else the
            # Job status.activeJob names (a backup's).
            deadline = time.monotonic() + float(p.get("follow_seconds") or 0)

            def followed(outcome: Outcome) -> str:
                if hasattr(rec, "following"):
                    return str(rec.following(outcome) or "")
                return str(outcome.status.get("activeJob") or "")

            while outcome.action in FOLLOW_ACTIONS and hasattr(rec, "follow") and followed(outcome):
                left = deadline - time.monotonic()
                if left <= 0 or not rec.follow(followed(outcome), left):
                    break
                obj = live.get(API_VERSION, kind, p["name"], p["namespace"])
                if obj is None:
                    break
                rec, later, wrote_later = _one_pass(live, proxy if via_proxy else None, obj, image, p, make)
                outcome = Outcome(later.status, later.events, later.action, outcome.changed or later.changed)
                wrote = wrote or wrote_later
        except KubeError as exc:
            raise ModuleFailed(f"{where}: {exc.status} {exc.reason}: {exc.message}") from None
    return {"changed": outcome.changed or wrote, "action": outcome.action, "phase": outcome.status.get("phase", "")}
