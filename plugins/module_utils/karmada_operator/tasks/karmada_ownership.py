"""karmada_ownership: touch only what this KarmadaDeployment made (plugins/modules/karmada_ownership.py).

``state: present`` is the first step of every full pass: every object the pass makes
(plan.host_objects) is read; when one of them exists and is not this KarmadaDeployment's
(kube/ownership.py), the step fails with reason ``NameConflict`` naming them, before anything is
written. ``state: absent`` is the finalizer's removal: the workloads (waited for until gone), the
etcd volumes and the Secrets (or, with deletionPolicy Retain, the Secrets' ownerReference to it
dropped), each only when it is this KarmadaDeployment's; what is someone else's stays and is named
in the result. Reads and writes go to the API server itself, not the runtime's cache.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from karmada_operator.kube import ownership
from karmada_operator.kube.client import Kube, KubeConfigError, KubeError
from karmada_operator.plan.plan import host_objects
from karmada_operator.task import ModuleFailed

ARGUMENT_SPEC: dict[str, Any] = {
    "state": {"type": "str", "choices": ["present", "absent"], "default": "present"},
    "plan": {"type": "dict", "required": True},
    "owner": {"type": "dict", "required": True},
    "timeout": {"type": "float", "default": 300.0},
    "poll": {"type": "float", "default": 1.0},
    "kubeconfig": {"type": "path"},
}
SUPPORTS_CHECK_MODE = True
# the Secrets a Retain deletion keeps (and a Delete removes)
KEPT_SECRETS = ("pkiSecret", "etcdPkiSecret", "kubeconfigSecret", "adminKubeconfigSecret")


def check(kube: Kube, plan: dict[str, Any], name: str, uid: str) -> list[str]:
    """The objects of this plan that exist and are someone else's, described."""
    ns = plan["namespace"]
    found = [kube.get(o["apiVersion"], o["kind"], o["name"], ns) for o in host_objects(plan)]
    return [ownership.describe(obj, uid) for obj in ownership.conflicts(found, name, uid)]


def remove(kube: Kube, plan: dict[str, Any], name: str, uid: str, timeout: float, poll: float,
           check_mode: bool = False) -> dict[str, list[str]]:
    """The finalizer's removal of what this KarmadaDeployment made (the module's docstring)."""
    ns, names = plan["namespace"], plan["names"]
    done: dict[str, list[str]] = {"deleted": [], "released": [], "left": []}

    def label(obj: dict[str, Any]) -> str:
        return f"{obj['kind']} {obj['metadata']['name']}"

    def mine(obj: dict[str, Any] | None) -> bool:
        if obj is None:
            return False
        if ownership.ours(obj, name, uid):
            return True
        done["left"].append(ownership.describe(obj, uid))
        return False

    def delete(api_version: str, obj: dict[str, Any]) -> None:
        if not check_mode:
            kube.delete(api_version, obj["kind"], obj["metadata"]["name"], ns, uid=obj["metadata"]["uid"])
        done["deleted"].append(label(obj))

    delete_all = plan.get("deletionPolicy", "Delete") == "Delete"
    if delete_all:
        gone = []
        for w in plan["workloads"]:
            obj = kube.get("apps/v1", w["kind"], w["name"], ns)
            if mine(obj):
                delete("apps/v1", {"kind": w["kind"], **obj})
                gone.append((w["kind"], w["name"], obj["metadata"]["uid"]))
        deadline = time.monotonic() + timeout
        while gone and not check_mode:
            gone = [(k, n, u) for k, n, u in gone
                    if ((kube.get("apps/v1", k, n, ns) or {}).get("metadata") or {}).get("uid") == u]
            if gone and time.monotonic() > deadline:
                raise ModuleFailed(f"still there after {timeout:.0f} s: "
                                   + ", ".join(f"{k} {n}" for k, n, _ in gone))
            if gone:
                time.sleep(poll)
        selector = f"{ownership.INSTANCE_LABEL}={name},app.kubernetes.io/name=etcd"
        for pvc in kube.list("v1", "PersistentVolumeClaim", namespace=ns, label_selector=selector):
            pvc = {"kind": "PersistentVolumeClaim", **pvc}
            if mine(pvc):
                delete("v1", pvc)
    for key in KEPT_SECRETS:
        secret = kube.get("v1", "Secret", names[key], ns)
        if not mine(secret):
            continue
        if delete_all:
            delete("v1", secret)
            continue
        # Retain: garbage collection keeps it once our reference is off (the UID label stays:
        # a later KarmadaDeployment of this name reports it as a NameConflict until it is handed over)
        refs = secret["metadata"].get("ownerReferences") or []
        if any(r.get("uid") == uid for r in refs):
            keep = [r for r in refs if r.get("uid") != uid]
            if not check_mode:
                kube.merge_patch("v1", "Secret", names[key], {"metadata": {"ownerReferences": keep or None}}, ns)
            done["released"].append(label(secret))
    return done


def run(params: dict[str, Any], check_mode: bool = False, warn: Callable[[str], None] = print) -> dict[str, Any]:
    plan, owner = params["plan"], params["owner"]
    meta = owner.get("metadata") or {}
    name, uid = str(meta.get("name") or ""), str(meta.get("uid") or "")
    if not uid:
        raise ModuleFailed("owner: the KarmadaDeployment as read (metadata.uid is needed)")
    try:
        kube = Kube.default(params.get("kubeconfig"), in_cluster_first=True)
    except KubeConfigError as exc:
        raise ModuleFailed(str(exc)) from exc
    with kube:
        try:
            if params["state"] == "present":
                conflicts = check(kube, plan, name, uid)
                if conflicts:
                    raise ModuleFailed(
                        f"{len(conflicts)} of the names this KarmadaDeployment needs belong to someone else; "
                        "nothing was changed: " + "; ".join(conflicts),
                        step_reason="NameConflict", conflicts=conflicts)
                return {"changed": False, "checked": len(host_objects(plan))}
            done = remove(kube, plan, name, uid, float(params["timeout"]), float(params["poll"]), check_mode)
        except KubeError as exc:
            raise ModuleFailed(f"{exc.status} {exc.reason}: {exc.message}") from exc
    for what in done["left"]:
        warn(f"left in place, not this KarmadaDeployment's: {what}")
    return {"changed": bool(done["deleted"] or done["released"]), **done}
