"""The k8s_status task: write the status subresource of a custom resource (Kubernetes-style
conditions), and an Event when it changed. plugins/modules/k8s_status.py documents the options;
plugins/action/k8s_status.py runs this in the controller process (karmada_operator/runtime/adapter.py)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from karmada_operator.kube.client import Kube, KubeConfigError, KubeError
from karmada_operator.kube.conditions import ConditionError, status_patch
from karmada_operator.runtime.cr_pass import event_object
from karmada_operator.task import ModuleFailed

ARGUMENT_SPEC: dict[str, Any] = {
    "api_version": {"type": "str", "required": True},
    "kind": {"type": "str", "required": True},
    "name": {"type": "str", "required": True},
    "namespace": {"type": "str"},
    "status": {"type": "dict", "default": {}},
    "conditions": {"type": "list", "elements": "dict", "default": []},
    "kubeconfig": {"type": "path"},
    "observed_generation": {"type": "int"},
    "event": {"type": "dict"},
}


def replacing_patch(current: Any, new: Any) -> Any:
    """A JSON merge patch (RFC 7386) turning ``current`` into ``new``: objects key by key, with
    null for each key ``new`` no longer has; anything else (lists too) replaced whole."""
    if not isinstance(current, dict) or not isinstance(new, dict):
        return new
    out: dict[str, Any] = {k: None for k in current if k not in new}
    for key, value in new.items():
        out[key] = replacing_patch(current[key], value) if key in current else value
    return out


def run(p: dict[str, Any], check_mode: bool = False, warn=lambda msg: None) -> dict[str, Any]:
    what = f"{p['kind']} {p['name']}"
    try:
        # In the operator pod: the API server itself, not the runtime's caching proxy.
        kube = Kube.default(p.get("kubeconfig"), in_cluster_first=True)
    except KubeConfigError as exc:
        raise ModuleFailed(str(exc)) from None
    with kube:
        try:
            obj = kube.get(p["api_version"], p["kind"], p["name"], p.get("namespace"))
        except KubeError as exc:
            raise ModuleFailed(f"reading {what}: {exc.status} {exc.reason}: {exc.message}") from None
        if obj is None:
            # The object is gone (deleted mid-reconcile): nothing to report on.
            return {"changed": False, "status": {}, "changed_fields": [], "msg": "object not found"}
        current = obj.get("status") or {}
        generation = p.get("observed_generation")
        if generation is None:
            generation = obj["metadata"].get("generation")
        try:
            new = status_patch(current, p.get("status") or {}, p.get("conditions") or [], generation)
        except ConditionError as exc:
            raise ModuleFailed(str(exc)) from None
        if new is None:
            return {"changed": False, "status": current, "changed_fields": []}
        changed_fields = sorted(k for k in new if new.get(k) != current.get(k))
        out: dict[str, Any] = {"changed": True, "status": new, "changed_fields": changed_fields}
        if check_mode:
            return out
        try:
            # A merge patch of the status subresource that makes it exactly ``new``: a key a
            # nested object lost is sent as null (a merge patch merges objects key by key, so
            # status.upgrade would otherwise keep the stoppedAt of an earlier stop).
            kube.merge_patch(p["api_version"], p["kind"], p["name"], {"status": replacing_patch(current, new)},
                             p.get("namespace"), subresource="status")
        except KubeError as exc:
            if exc.status == 404:
                return {"changed": False, "status": {}, "changed_fields": [], "msg": "object not found"}
            raise ModuleFailed(f"writing status of {what}: {exc.status} {exc.reason}: {exc.message}") from None
        event = p.get("event") or {}
        if event.get("reason"):
            about = {**obj, "apiVersion": p["api_version"]}
            want = {"type": event.get("type") or "Normal", "reason": str(event["reason"]),
                    "message": str(event.get("message") or "")}
            try:
                made = kube.create(event_object(about, want, datetime.now(UTC)))
            except KubeError as exc:  # the status is written; a lost Event is not worth a failed run
                warn(f"status of {what} written, but its Event was not: {exc.status} {exc.message}")
            else:
                out["event"] = (made.get("metadata") or {}).get("name", "")
        return out
