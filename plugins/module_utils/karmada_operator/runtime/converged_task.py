"""The karmada_converged task: the fast-path check of a reconcile, or the record of what a full
pass converged (the rules are in karmada_operator/plan/converged.py). plugins/modules/karmada_converged.py
documents the options; plugins/action/karmada_converged.py runs this in the controller process
(karmada_operator/runtime/adapter.py)."""

from __future__ import annotations

import base64
import functools
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from karmada_operator.etcd import space as etcd_space
from karmada_operator.etcd.client_secret import etcd_client, pod_addresses
from karmada_operator.etcd.gateway import EtcdError
from karmada_operator.kube.client import Kube, KubeConfigError, KubeError, root_cause
from karmada_operator.pki.pki import PkiInputError, renewal_window
from karmada_operator.plan import operations
from karmada_operator.plan.converged import OWNED_KINDS, build_id, decide, iso, record, unready_members
from karmada_operator.plan.requeue import requeue_after, watches_period
from karmada_operator.runtime.status_writer import write_status
from karmada_operator.task import ModuleFailed

# The operator's directory (watches.yaml, playbooks/, roles/, plugins/): this file is
# plugins/module_utils/karmada_operator/runtime/converged_task.py under it.
OPERATOR_ROOT = Path(__file__).resolve().parents[4]


@functools.cache
def own_build() -> str:
    """This operator's build (its code under OPERATOR_ROOT), computed once per process."""
    return build_id(str(OPERATOR_ROOT))


def requeue(cr: dict[str, Any], now: datetime) -> str:
    """The requeue period ("<n>s") when a day-2 operation's time (operations.wake_at: the next
    certificate renewal, a scheduled defragmentation) comes before the next periodic reconcile,
    else "" (plan/requeue.py): the runtime is asked to come back then."""
    at = operations.wake_at(cr)
    return requeue_after(cr, iso(at) if at else "", watches_period(OPERATOR_ROOT), now)


ARGUMENT_SPEC: dict[str, Any] = {
    "mode": {"type": "str", "choices": ["check", "record"], "required": True},
    "cr": {"type": "dict", "required": True},
    "namespace": {"type": "str", "required": True},
    "selector": {"type": "str", "required": True},
    # a digest of the operator's code (plan/converged.build_id); default: this operator's own
    "build": {"type": "str"},
    "recheck_after": {"type": "int", "default": 3600},
    "admin_kubeconfig_secret": {"type": "str"},
    # the certificates step's metadata (name and notAfter are kept)
    "certificates": {"type": "list", "elements": "dict", "default": []},
    "server": {"type": "str", "default": ""},
    "tls_server_name": {"type": "str", "default": ""},
    "kubeconfig": {"type": "path"},
}


def owned(kube: Kube, namespace: str, selector: str) -> list[dict]:
    objects = []
    for api_version, kind in OWNED_KINDS:
        for obj in kube.list(api_version, kind, namespace=namespace, label_selector=selector):
            objects.append({"kind": kind, **obj})
    return objects


def service_ips(objects: list[dict]) -> dict[str, str]:
    return {o["metadata"]["name"]: (o.get("spec") or {}).get("clusterIP") or ""
            for o in objects if o["kind"] == "Service"}


def members_check(kube: Kube, cr: dict, secret_name: str) -> str:
    """Empty when every member's Cluster is Ready, else why not."""
    converged = (cr.get("status") or {}).get("converged") or {}
    secret = kube.get("v1", "Secret", secret_name, cr["metadata"]["namespace"])
    text = base64.b64decode(((secret or {}).get("data") or {}).get("kubeconfig") or "").decode()
    if not text:
        return f"no admin kubeconfig in Secret {secret_name}"
    try:
        with Kube.from_kubeconfig(text, server=converged.get("server") or "",
                                  tls_server_name=converged.get("tlsServerName") or "", timeout=10,
                                  where=f"Secret {secret_name}") as karmada:
            clusters = karmada.list("cluster.karmada.io/v1alpha1", "Cluster")
    except (KubeError, KubeConfigError, OSError) as exc:
        return f"karmada-apiserver not read: {root_cause(exc)}"
    missing = unready_members(cr, clusters)
    return f"members not Ready in karmada-apiserver: {', '.join(missing)}" if missing else ""


def space_check(kube: Kube, cr: dict) -> tuple[str, bool]:
    """etcd's space, asked of etcd itself (etcd/space.py): why the run must take the full pass
    ("" when it need not), and whether a database is over the low mark (come back sooner). A local
    etcd the fast path cannot read is left to the full pass's own checks."""
    from karmada_operator.plan.plan import PlanError, build_plan

    try:
        etcd = build_plan(cr)["etcd"]
    except PlanError:
        return "", False
    if etcd["mode"] != "local":
        return "", False
    try:
        if not pod_addresses(kube, etcd):
            return "", False
        with etcd_client(kube, etcd, timeout=3.0, prefix="etcd-space-probe-") as client:
            found = etcd_space.probe(client, etcd["memberEndpoints"])
    except (EtcdError, KubeError, ValueError, OSError):
        return "", False
    return etcd_space.fast_path_verdict(etcd["space"], found, cr.get("status") or {}), \
        etcd_space.low(etcd["space"], found)


def run(p: dict[str, Any], check_mode: bool = False, warn=lambda msg: None) -> dict[str, Any]:
    cr = p["cr"]
    now = datetime.now(UTC)
    try:
        # The API server itself, not the runtime's cache: what the last pass applied must show.
        with Kube.default(p.get("kubeconfig"), in_cluster_first=True) as kube:
            objects = owned(kube, p["namespace"], p["selector"])
            if p["mode"] == "check":
                decision = decide(cr, objects, p.get("build") or own_build(), now, float(p["recheck_after"]))
                reason = decision.reason
                if decision.converged and p.get("admin_kubeconfig_secret") and (cr.get("spec") or {}).get("members"):
                    reason = members_check(kube, cr, p["admin_kubeconfig_secret"]) or reason
                low, control_plane = False, decision.control_plane
                if decision.converged and reason == decision.reason:
                    space, low = space_check(kube, cr)
                    reason = space or reason
                    # etcd's space is the control plane's: the full pass, not the members' alone
                    control_plane = control_plane and not space
                converged = decision.converged and reason == decision.reason
                again = requeue(cr, now) if converged else ""
                if converged and low:  # a database over the low mark: look again soon (etcd/space.py)
                    soon = etcd_space.LOW_RECHECK_SECONDS
                    again = f"{min(int(again[:-1]), soon) if again else soon}s"
                return {"changed": False, "converged": converged,
                        "control_plane": control_plane, "reason": reason,
                        "service_ips": service_ips(objects), "requeue_after": again}
            try:
                window = renewal_window((cr.get("spec") or {}).get("certificates") or {})
            except PkiInputError as exc:
                raise ModuleFailed(str(exc)) from None
            previous = ((cr.get("status") or {}).get("converged") or {}).get("fingerprint")
            certificates = [{k: c[k] for k in ("name", "notAfter") if k in c} for c in p.get("certificates") or []]
            converged = record(cr, objects, p.get("build") or own_build(), now, certificates, window,
                               p.get("server") or "", p.get("tls_server_name") or "")
            write_status(kube, cr, {"converged": converged})
    except (KubeError, KubeConfigError) as exc:
        raise ModuleFailed(str(exc)) from None
    return {"changed": converged["fingerprint"] != previous, "converged": True,
            "reason": f"recorded the full pass at {converged['at']}", "renew_at": converged.get("renewAt", ""),
            "requeue_after": requeue({**cr, "status": {**(cr.get("status") or {}), "converged": converged}}, now)}
