"""etcd_scale: the etcd step's side of scaling (plugins/modules/etcd_scale.py).

``prepare``: the replicas to apply the StatefulSet with and its bootstrap ConfigMap; ``settle``:
finish a scaling step begun before (a joiner to start or promote) and repair (a replacement), so
the rollout's gate can hold. Scaling itself is the etcdScaling operation's step after etcd's
(etcd/scaling.py: EtcdScaling)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from typing import Any

from karmada_operator.etcd import run_as
from karmada_operator.etcd.scaling import KubeScaleSource, claim_templates, prepare, scale_step
from karmada_operator.kube.client import Kube, KubeConfigError, KubeError
from karmada_operator.runtime.status_writer import event_object
from karmada_operator.task import ModuleFailed

ARGUMENT_SPEC: dict[str, Any] = {
    "phase": {"type": "str", "choices": ["prepare", "settle"], "default": "settle"},
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

def run(params: dict[str, Any], check_mode: bool = False, warn: Callable[[str], None] = print) -> dict[str, Any]:
    p = params
    etcd, owner = p["etcd"], p["owner"]
    domain, statefulset, desired = etcd["memberDomain"], etcd["statefulset"], int(etcd["replicas"])
    try:
        kube = Kube.default(p["kubeconfig"])
        live = Kube.default(p["kubeconfig"], in_cluster_first=True)
    except KubeConfigError as exc:
        raise ModuleFailed(msg=str(exc)) from exc

    def event(what: Mapping[str, str]) -> None:
        if owner:
            kube.create(event_object(owner, what, datetime.now(UTC)))

    with kube, live:
        source = KubeScaleSource(live, etcd["namespace"], statefulset, etcd["selector"], etcd["bootstrapConfigMap"],
                                 etcd["labels"], owner)
        if p["phase"] == "prepare":
            try:
                replicas = prepare(source, statefulset=statefulset, desired=desired,
                                   peer_url=lambda name: f"https://{name}.{domain}:2380")
                sts = source.statefulset()
                claims = claim_templates(sts)
                decided = run_as.decide(live, etcd, claims, sts)
            except KubeError as exc:
                raise ModuleFailed(msg=f"{exc.status} {exc.reason}: {exc.message}") from exc
            except run_as.RunAsError as exc:
                raise ModuleFailed(msg=str(exc), field="spec.etcd.local.runAs") from exc
            return {"changed": source.wrote, "replicas": replicas, "volume_claim_templates": claims, "steps": [],
                    "run_as": decided.as_fact()}
        result = scale_step(live, etcd, source, event, start=False, timeout=float(p["timeout"]),
                            poll=float(p["poll"]), stuck_after=float(p["stuck_after"]),
                            delete_claims=p["deletion_policy"] == "Delete")
    return result.as_dict()
