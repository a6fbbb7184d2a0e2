"""etcd_rollout: roll the local etcd StatefulSet one member at a time, leader last, gated
(plugins/modules/etcd_rollout.py)."""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from karmada_operator.etcd.gateway import EtcdClient, missing_tls, tls_files
from karmada_operator.etcd.rollout import EtcdRolloutStopped, KubeMembers, MemberRolled, resolve_map, roll
from karmada_operator.kube.client import Kube, KubeConfigError, KubeError
from karmada_operator.runtime.status_writer import event_object
from karmada_operator.task import ModuleFailed

ARGUMENT_SPEC: dict[str, Any] = {
    "namespace": {"type": "str", "required": True},
    "statefulset": {"type": "str", "required": True},
    "selector": {"type": "str", "required": True},
    "replicas": {"type": "int", "required": True},
    "endpoints": {"type": "list", "elements": "str", "required": True},
    "member_domain": {"type": "str", "required": True},
    "tls": {"type": "dict", "required": True, "no_log": True},
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
    missing = missing_tls(p["tls"])
    if missing:
        raise ModuleFailed(msg=f"tls: {', '.join(missing)} missing")
    owner = p["owner"]
    try:
        # Events through the runtime's proxy when it runs us, as kubernetes.core would; reads and
        # deletions on the API server itself (the proxy's cache lags behind the pods).
        kube = Kube.default(p["kubeconfig"])
        live = Kube.default(p["kubeconfig"], in_cluster_first=True)
    except KubeConfigError as exc:
        raise ModuleFailed(msg=str(exc)) from exc
    certs = contextlib.ExitStack()
    try:
        files = certs.enter_context(tls_files(p["tls"], prefix="etcd-rollout-"))

        def etcd_for(pods):
            return EtcdClient(p["endpoints"], cert=files["cert"], key=files["key"], ca=files["ca"],
                              timeout=5.0, resolve=resolve_map(pods, p["member_domain"]))

        def tell(rolled: MemberRolled) -> None:
            if owner:
                role = "the leader, after handing over leadership" if rolled.was_leader else "a follower"
                message = (f"etcd member {rolled.name} ({role}) replaced by revision {rolled.revision}; etcd healthy "
                           f"with every member again after {rolled.seconds:.0f} s")
                kube.create(event_object(owner, {"type": "Normal", "reason": "EtcdMemberRolled",
                                                 "message": message}, datetime.now(UTC)))

        with kube, live:
            source = KubeMembers(live, p["namespace"], p["statefulset"], p["selector"])
            try:
                result = roll(source, etcd_for, statefulset=p["statefulset"], replicas=p["replicas"],
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
    finally:
        certs.close()
    return {"changed": result.changed, "revision": result.revision, "members": [m.as_dict() for m in result.members],
            "step": result.step()}
