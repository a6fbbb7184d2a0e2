"""The one status writer: every status the operator writes, of every kind, goes through
:func:`write_status` (a merge patch of the status subresource that makes each key it is given
exactly its new value, and the Events that tell the story).

Its callers: the k8s_status task (the KarmadaDeployment's role: conditions merged here,
Kubernetes-style; plugins/modules/k8s_status.py documents the options, plugins/action/k8s_status.py
runs it in the controller process), the Python-driven kinds' passes (runtime/cr_pass.py:
EtcdBackup, EtcdRestore) and the record of a converged full pass (runtime/converged_task.py).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from datetime import UTC, datetime
from typing import Any

from karmada_operator.kube.client import Kube, KubeConfigError, KubeError
from karmada_operator.kube.conditions import ConditionError, status_patch
from karmada_operator.task import ModuleFailed

API_VERSION = "operator.karmada.io/v1alpha1"

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


def event_object(obj: Mapping[str, Any], event: Mapping[str, str], now: datetime) -> dict[str, Any]:
    """A core/v1 Event about ``obj`` (what `kubectl describe` shows)."""
    meta = obj["metadata"]
    stamp = now.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    return {"apiVersion": "v1", "kind": "Event",
            "metadata": {"generateName": f"{meta['name']}.", "namespace": meta["namespace"]},
            "involvedObject": {"apiVersion": obj.get("apiVersion") or API_VERSION, "kind": obj["kind"],
                               "name": meta["name"], "namespace": meta["namespace"], "uid": meta.get("uid", "")},
            "type": event["type"], "reason": event["reason"], "message": event["message"][:1000],
            "source": {"component": "karmada-operator"}, "firstTimestamp": stamp, "lastTimestamp": stamp,
            "count": 1}


def write_status(kube: Kube, obj: Mapping[str, Any], changes: Mapping[str, Any],
                 events: Iterable[Mapping[str, str]] = (), now: datetime | None = None,
                 warn: Callable[[str], None] | None = None) -> list[str]:
    """Write ``changes`` (status key -> its new value; None drops the key) into ``obj``'s status
    subresource and create ``events`` about it; the names of the Events made.

    One merge patch: a key of a nested object the new value no longer has goes as null (a merge
    patch merges objects key by key, so status.upgrade would otherwise keep the stoppedAt of an
    earlier stop); keys not in ``changes`` are left as they are. ``obj`` is the object as the
    caller read it (its status is what the patch is made against). A failed Event is reported to
    ``warn`` when given (the status is written; a lost Event is not worth a failed run), else raised.
    """
    meta = obj["metadata"]
    current = obj.get("status") or {}
    if changes:
        patch = {k: (None if v is None else replacing_patch(current.get(k), v)) for k, v in changes.items()}
        kube.merge_patch(obj.get("apiVersion") or API_VERSION, obj["kind"], meta["name"], {"status": patch},
                         meta.get("namespace"), subresource="status")
    made = []
    for event in events:
        try:
            out = kube.create(event_object(obj, event, now or datetime.now(UTC)))
        except KubeError as exc:
            if warn is None:
                raise
            warn(f"status of {obj['kind']} {meta['name']} written, but its Event was not: {exc.status} {exc.message}")
        else:
            made.append((out.get("metadata") or {}).get("name", ""))
    return made


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
        event = p.get("event") or {}
        events = [{"type": event.get("type") or "Normal", "reason": str(event["reason"]),
                   "message": str(event.get("message") or "")}] if event.get("reason") else []
        try:
            made = write_status(kube, {**obj, "apiVersion": p["api_version"]},
                                {k: new[k] for k in changed_fields}, events, warn=warn)
        except KubeError as exc:
            if exc.status == 404:
                return {"changed": False, "status": {}, "changed_fields": [], "msg": "object not found"}
            raise ModuleFailed(f"writing status of {what}: {exc.status} {exc.reason}: {exc.message}") from None
        if made:
            out["event"] = made[0]
        return out
