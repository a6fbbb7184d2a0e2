"""etcd_scale: scale the local etcd one member at a time, through learners (plugins/modules/etcd_scale.py)."""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from karmada_operator.etcd.gateway import EtcdClient, EtcdError, missing_tls, tls_files
from karmada_operator.etcd.rollout import resolve_map
from karmada_operator.etcd.scaling import EtcdScaleStopped, KubeScaleSource, claim_templates, prepare, scale
from karmada_operator.kube.client import Kube, KubeConfigError, KubeError
from karmada_operator.runtime.status_writer import event_object
from karmada_operator.task import ModuleFailed

ARGUMENT_SPEC: dict[str, Any] = {
    "phase": {"type": "str", "choices": ["prepare", "settle", "scale"], "default": "scale"},
    "namespace": {"type": "str", "required": True},
    "statefulset": {"type": "str", "required": True},
    "selector": {"type": "str", "required": True},
    "replicas": {"type": "int", "required": True},
    "member_domain": {"type": "str", "required": True},
    "bootstrap_configmap": {"type": "str", "required": True},
    "labels": {"type": "dict", "default": {}},
    "storage_type": {"type": "str", "default": "PersistentVolumeClaim"},
    "delete_claims": {"type": "bool", "default": True},
    "tls": {"type": "dict", "no_log": True},
    "timeout": {"type": "int", "default": 600},
    "poll": {"type": "int", "default": 2},
    "stuck_after": {"type": "int", "default": 60},
    "owner": {"type": "dict"},
    "kubeconfig": {"type": "path"},
}
SUPPORTS_CHECK_MODE = False

EVENT_REASONS = {"add": "EtcdMemberAdded", "promote": "EtcdMemberPromoted", "remove": "EtcdMemberRemoved",
                 "replicas": "EtcdReplicasCorrected", "replace": "EtcdMemberReplacing",
                 "reset": "EtcdMemberReplacing"}


def run(params: dict[str, Any], check_mode: bool = False, warn: Callable[[str], None] = print) -> dict[str, Any]:
    p = params
    owner = p["owner"]
    domain = p["member_domain"]

    def peer_url(name: str) -> str:
        return f"https://{name}.{domain}:2380"

    try:
        kube = Kube.default(p["kubeconfig"])
        live = Kube.default(p["kubeconfig"], in_cluster_first=True)
    except KubeConfigError as exc:
        raise ModuleFailed(msg=str(exc)) from exc
    with kube, live:
        source = KubeScaleSource(live, p["namespace"], p["statefulset"], p["selector"], p["bootstrap_configmap"],
                                 p["labels"], owner)
        if p["phase"] == "prepare":
            try:
                replicas = prepare(source, statefulset=p["statefulset"], desired=p["replicas"], peer_url=peer_url)
                claims = claim_templates(source.statefulset())
            except KubeError as exc:
                raise ModuleFailed(msg=f"{exc.status} {exc.reason}: {exc.message}") from exc
            return {"changed": source.wrote, "replicas": replicas, "volume_claim_templates": claims, "steps": []}
        missing = missing_tls(p["tls"])
        if missing:
            raise ModuleFailed(msg=f"tls: {', '.join(missing)} missing")
        certs = contextlib.ExitStack()
        try:
            files = certs.enter_context(tls_files(p["tls"], prefix="etcd-scale-"))

            def etcd_for(pods):
                names = sorted(n for n, pod in pods.items() if pod.ip and not pod.terminating) or [
                    f"{p['statefulset']}-0"]
                return EtcdClient([f"https://{n}.{domain}:2379" for n in names], cert=files["cert"],
                                  key=files["key"], ca=files["ca"], timeout=5.0,
                                  resolve=resolve_map(pods, domain))

            def tell(step) -> None:
                if owner:
                    what = (f"etcd member {step.member}" if step.action in ("replace", "reset")
                            else f"etcd scaling to {p['replicas']} members")
                    kube.create(event_object(owner, {"type": "Normal", "reason": EVENT_REASONS[step.action],
                                                     "message": f"{what}: {step.reason}"}, datetime.now(UTC)))

            def replaced(member: str, message: str) -> None:
                if owner:
                    kube.create(event_object(owner, {"type": "Normal", "reason": "EtcdMemberReplaced",
                                                     "message": message}, datetime.now(UTC)))

            try:
                result = scale(source, etcd_for, statefulset=p["statefulset"], desired=p["replicas"],
                               peer_url=peer_url, timeout=float(p["timeout"]), start=p["phase"] == "scale",
                               storage_type=p["storage_type"], delete_claims=p["delete_claims"],
                               poll=float(p["poll"]), stuck_after=float(p["stuck_after"]), on_step=tell,
                               on_replaced=replaced)
            except EtcdScaleStopped as exc:
                if owner:
                    kube.create(event_object(owner, {"type": "Warning", "reason": exc.reason,
                                                     "message": str(exc)}, datetime.now(UTC)))
                raise ModuleFailed(msg=str(exc), reason=exc.reason, step_reason=exc.reason, steps=exc.done,
                                 changed=bool(exc.done)) from exc
            except (KubeError, EtcdError) as exc:
                raise ModuleFailed(msg=f"etcd scaling stopped: {exc}", reason="EtcdNotReady") from exc
        finally:
            certs.close()
    return result.as_dict()
