"""etcd_rollout: roll the local etcd StatefulSet one member at a time, leader last, gated
(plugins/modules/etcd_rollout.py)."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from karmada_operator.etcd.client_secret import step_client_tls
from karmada_operator.etcd.gateway import EtcdClient, tls_files
from karmada_operator.etcd.rollout import EtcdRolloutStopped, KubeMembers, MemberRolled, resolve_map, roll
from karmada_operator.kube.client import Kube, KubeConfigError, KubeError
from karmada_operator.runtime.status_writer import event_object
from karmada_operator.task import ModuleFailed

ARGUMENT_SPEC: dict[str, Any] = {
    # the plan's etcd slice (plan.etcd): where etcd lives, its member URLs and client Secret
    "etcd": {"type": "dict", "required": True},
    # the members the StatefulSet has now (more than the slice's while a scale is under way)
    "replicas": {"type": "int", "required": True},
    "timeout": {"type": "int", "default": 600},
    "poll": {"type": "int", "default": 2},
    "stuck_after": {"type": "int", "default": 60},
    "max_lag": {"type": "int", "default": 1000},
    "owner": {"type": "dict"},
    "kubeconfig": {"type": "path"},
}
SUPPORTS_CHECK_MODE = False


def run(params: dict[str, Any], check_mode: bool = False, warn: Callable[[str], None] = print) -> dict[str, Any]:
    p = params
    etcd, owner = p["etcd"], p["owner"]
    endpoints = etcd["allMemberEndpoints"][: p["replicas"]]
    try:
        # Events through the runtime's proxy when it runs us, as kubernetes.core would; reads and
        # deletions on the API server itself (the proxy's cache lags behind the pods).
        kube = Kube.default(p["kubeconfig"])
        live = Kube.default(p["kubeconfig"], in_cluster_first=True)
    except KubeConfigError as exc:
        raise ModuleFailed(msg=str(exc)) from exc
    with kube, live:
        tls = step_client_tls(live, etcd)
        with tls_files(tls, prefix="etcd-rollout-") as files:

            def etcd_for(pods):
                return EtcdClient(endpoints, cert=files["cert"], key=files["key"], ca=files["ca"],
                                  timeout=5.0, resolve=resolve_map(pods, etcd["memberDomain"]))

            def tell(rolled: MemberRolled) -> None:
                if owner:
                    role = "the leader, after handing over leadership" if rolled.was_leader else "a follower"
                    message = (f"etcd member {rolled.name} ({role}) replaced by revision {rolled.revision}; "
                               f"etcd healthy with every member again after {rolled.seconds:.0f} s")
                    kube.create(event_object(owner, {"type": "Normal", "reason": "EtcdMemberRolled",
                                                     "message": message}, datetime.now(UTC)))

            source = KubeMembers(live, etcd["namespace"], etcd["statefulset"], etcd["selector"])
            try:
                result = roll(source, etcd_for, statefulset=etcd["statefulset"], replicas=p["replicas"],
                              timeout=float(p["timeout"]), poll=float(p["poll"]), stuck_after=float(p["stuck_after"]),
                              max_lag=p["max_lag"], on_member=tell)
            except EtcdRolloutStopped as exc:
                if owner:
                    kube.create(event_object(owner, {"type": "Warning", "reason": "RolloutStopped",
                                                     "message": str(exc)}, datetime.now(UTC)))
                raise ModuleFailed(msg=str(exc), reason=exc.reason, component="etcd", member=exc.member,
                                 members=[m.as_dict() for m in exc.done], changed=bool(exc.done)) from exc
            except KubeError as exc:
                raise ModuleFailed(msg=f"{exc.status} {exc.reason}: {exc.message}") from exc
    return {"changed": result.changed, "revision": result.revision, "members": [m.as_dict() for m in result.members],
            "step": result.step()}
