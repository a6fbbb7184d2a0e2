"""etcd_scale: scale the local etcd one member at a time, through learners (plugins/modules/etcd_scale.py)."""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from karmada_operator.etcd.client_secret import step_client_tls
from karmada_operator.etcd.gateway import EtcdClient, EtcdError, tls_files
from karmada_operator.etcd.rollout import resolve_map
from karmada_operator.etcd.scaling import EtcdScaleStopped, KubeScaleSource, claim_templates, prepare, scale
from karmada_operator.kube.client import Kube, KubeConfigError, KubeError
from karmada_operator.runtime.status_writer import event_object
from karmada_operator.task import ModuleFailed

ARGUMENT_SPEC: dict[str, Any] = {
    "phase": {"type": "str", "choices": ["prepare", "settle", "scale"], "default": "scale"},
    # the plan's etcd slice (plan.etcd): where etcd lives, its replicas, storage and client Secret
    "etcd": {"type": "dict", "required": True},
    "deletion_policy": {"type": "str", "choices": ["Delete", "Retain"], "default": "Delete"},
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
    etcd, owner = p["etcd"], p["owner"]
    domain, statefulset, desired = etcd["memberDomain"], etcd["statefulset"], int(etcd["replicas"])

    def peer_url(name: str) -> str:
        return f"https://{name}.{domain}:2380"

    try:
        kube = Kube.default(p["kubeconfig"])
        live = Kube.default(p["kubeconfig"], in_cluster_first=True)
    except KubeConfigError as exc:
        raise ModuleFailed(msg=str(exc)) from exc
    with kube, live:
        source = KubeScaleSource(live, etcd["namespace"], statefulset, etcd["selector"], etcd["bootstrapConfigMap"],
                                 etcd["labels"], owner)
        if p["phase"] == "prepare":
            try:
                replicas = prepare(source, statefulset=statefulset, desired=desired, peer_url=peer_url)
                claims = claim_templates(source.statefulset())
            except KubeError as exc:
                raise ModuleFailed(msg=f"{exc.status} {exc.reason}: {exc.message}") from exc
            return {"changed": source.wrote, "replicas": replicas, "volume_claim_templates": claims, "steps": []}
        tls = step_client_tls(live, etcd)
        certs = contextlib.ExitStack()
        try:
            files = certs.enter_context(tls_files(tls, prefix="etcd-scale-"))

            def etcd_for(pods):
                names = sorted(n for n, pod in pods.items() if pod.ip and not pod.terminating) or [
                    f"{statefulset}-0"]
                return EtcdClient([f"https://{n}.{domain}:2379" for n in names], cert=files["cert"],
                                  key=files["key"], ca=files["ca"], timeout=5.0,
                                  resolve=resolve_map(pods, domain))

            def tell(step) -> None:
                if owner:
                    what = (f"etcd member {step.member}" if step.action in ("replace", "reset")
                            else f"etcd scaling to {desired} members")
                    kube.create(event_object(owner, {"type": "Normal", "reason": EVENT_REASONS[step.action],
                                                     "message": f"{what}: {step.reason}"}, datetime.now(UTC)))

            def replaced(member: str, message: str) -> None:
                if owner:
                    kube.create(event_object(owner, {"type": "Normal", "reason": "EtcdMemberReplaced",
                                                     "message": message}, datetime.now(UTC)))

            try:
                result = scale(source, etcd_for, statefulset=statefulset, desired=desired,
                               peer_url=peer_url, timeout=float(p["timeout"]), start=p["phase"] == "scale",
                               storage_type=etcd["storage"]["type"], delete_claims=p["deletion_policy"] == "Delete",
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
