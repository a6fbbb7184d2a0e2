"""The karmada_lists task: several lists read in one call, and which definitions need applying.

A loop of k8s_info tasks costs one task (templating, a worker, a client) per kind; a full pass
reads seven kinds back to decide whether Karmada's system objects need an apply. This reads
them all over one client. plugins/modules/karmada_lists.py documents the options;
plugins/action/karmada_lists.py runs this in the controller process (karmada_operator/runtime/adapter.py)."""

from __future__ import annotations

from typing import Any

from karmada_operator.kube.applied import kinds, unapplied
from karmada_operator.kube.client import Kube, KubeConfigError, KubeError, root_cause
from karmada_operator.task import ModuleFailed

ARGUMENT_SPEC: dict[str, Any] = {
    "kubeconfig": {"type": "path"},
    "lists": {
        "type": "list", "elements": "dict", "default": [],
        "options": {
            "api_version": {"type": "str", "required": True},
            "kind": {"type": "str", "required": True},
            "namespace": {"type": "str", "default": ""},
            "label_selectors": {"type": "list", "elements": "str", "default": []},
        },
    },
    "definitions": {"type": "list", "elements": "dict", "default": []},
}


def read_lists(kube: Kube, lists: list[dict[str, Any]]) -> list[list[dict[str, Any]]]:
    """Each list's objects, each carrying its apiVersion and kind (a list's items do not).
    A kind the server does not serve reads as no objects."""
    out = []
    for spec in lists:
        try:
            items = kube.list(spec["api_version"], spec["kind"], namespace=spec.get("namespace") or None,
                              label_selector=",".join(spec.get("label_selectors") or []))
        except KubeError as exc:
            if exc.status != 404:
                raise
            items = []
        out.append([{"apiVersion": spec["api_version"], "kind": spec["kind"], **obj} for obj in items])
    return out


def run(p: dict[str, Any], check_mode: bool = False, warn=lambda msg: None) -> dict[str, Any]:
    definitions = p.get("definitions") or []
    lists = [dict(spec) for spec in p.get("lists") or []]
    lists += [{"api_version": k["apiVersion"], "kind": k["kind"], "namespace": k["namespace"]}
              for k in kinds(definitions)]
    try:
        with Kube.default(p.get("kubeconfig")) as kube:
            read = read_lists(kube, lists)
    except (KubeError, KubeConfigError, OSError) as exc:
        raise ModuleFailed(f"reading {', '.join(sorted({s['kind'] for s in lists}))}: {root_cause(exc)}") from None
    asked = read[:len(p.get("lists") or [])]
    resources = [obj for objs in read for obj in objs]
    result: dict[str, Any] = {"changed": False, "lists": asked, "resources": resources}
    if definitions:
        result["unapplied"] = unapplied(definitions, [obj for objs in read[len(asked):] for obj in objs])
    return result
