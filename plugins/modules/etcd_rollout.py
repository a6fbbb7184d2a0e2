#!/usr/bin/python
"""Roll the local etcd StatefulSet one member at a time, leader last, gated (module_utils/etcd_rollout.py)."""

from __future__ import annotations

DOCUMENTATION = r"""
---
module: etcd_rollout
short_description: Replace the pods of an OnDelete etcd StatefulSet one member at a time, the leader last
description:
  - Reads the StatefulSet, its pods and the etcd members (over TLS, by pod address) and waits
    for the gate, every member's pod Ready on a current spec and etcd healthy with all members,
    each caught up with the leader.
  - Then, while a pod runs an older revision than the StatefulSet's C(updateRevision), deletes
    one (followers from the highest ordinal, the leader last, after handing its leadership to
    an updated member) and waits for the gate again before the next. A pod is deleted only when
    the voters left without it keep a quorum.
  - A gate that does not hold within I(timeout) seconds after the last deletion, or pods stuck
    for I(stuck_after) seconds (image pull failure, crash loop, unschedulable), fails the task
    naming the member and the cause (C(reason) RolloutTimeout, PodsNotReady or LeaderNotMoved).
  - Changed only when a pod was deleted. With I(owner), writes an Event C(EtcdMemberRolled) on
    it for each member replaced and C(RolloutStopped) when it stops.
options:
  namespace:
    description: Namespace of the StatefulSet.
    type: str
    required: true
  statefulset:
    description: Name of the etcd StatefulSet; its pods are C(<statefulset>-<ordinal>) and etcd member names.
    type: str
    required: true
  selector:
    description: Label selector of its pods.
    type: str
    required: true
  replicas:
    description: Members the cluster should have.
    type: int
    required: true
  endpoints:
    description: Client URLs of the members, as they advertise them (C(https://<pod>.<member_domain>:2379)).
    type: list
    elements: str
    required: true
  member_domain:
    description: Domain of the members' names (C(<peer service>.<namespace>.svc.<cluster domain>)); each
      C(<pod>.<member_domain>) is dialled at the pod's address.
    type: str
    required: true
  tls:
    description: PEM of C(ca.crt) (the etcd CA), C(tls.crt) and C(tls.key) (a client certificate it signed).
    type: dict
    required: true
  timeout:
    description: Seconds the gate may take to hold after each deletion (and at the start).
    type: int
    default: 600
  poll:
    description: Seconds between two reads.
    type: int
    default: 2
  stuck_after:
    description: Seconds pods may stay in a state that waiting does not clear before the task fails.
    type: int
    default: 60
  max_lag:
    description: Raft entries a member may be behind the leader and count as caught up.
    type: int
    default: 1000
  owner:
    description: The object the Events are about (C(apiVersion), C(kind), C(metadata) with name, namespace, uid).
    type: dict
  kubeconfig:
    description: Path of a kubeconfig (default as k8s_status).
    type: path
author: Karmada-Operator developers
"""

EXAMPLES = r"""
- name: Roll etcd one member at a time
  etcd_rollout:
    namespace: karmada-system
    statefulset: karmada-etcd
    selector: app.kubernetes.io/name=etcd,app.kubernetes.io/instance=karmada
    replicas: 3
    endpoints: "{{ karmada_deployment_plan.etcd.memberEndpoints }}"
    member_domain: karmada-etcd.karmada-system.svc.cluster.local
    tls: {ca.crt: "...", tls.crt: "...", tls.key: "..."}
    owner: "{{ karmada_deployment_cr }}"
"""

RETURN = r"""
revision:
  description: The StatefulSet revision every member runs now.
  returned: success
  type: str
members:
  description: The members replaced, in order (name, was_leader, revision, started, finished, seconds).
  returned: always
  type: list
step:
  description: The pass as a rollout step (name etcd, changed, version, started, finished, seconds, pods).
  returned: success
  type: dict
component:
  description: On failure, C(etcd).
  returned: failure
  type: str
member:
  description: On failure, the member the rollout waited for (empty before the first deletion).
  returned: failure
  type: str
"""

import contextlib  # noqa: E402
from datetime import UTC, datetime  # noqa: E402

from ansible.module_utils.basic import AnsibleModule  # noqa: E402
from ansible.module_utils.cr_pass import event_object  # noqa: E402
from ansible.module_utils.etcd_gateway import EtcdClient, missing_tls, tls_files  # noqa: E402
from ansible.module_utils.etcd_rollout import (  # noqa: E402
    EtcdRolloutStopped,
    KubeMembers,
    MemberRolled,
    resolve_map,
    roll,
)
from ansible.module_utils.karmada_kube import Kube, KubeConfigError, KubeError  # noqa: E402


def main() -> None:
    module = AnsibleModule(
        argument_spec={
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
        },
        supports_check_mode=False,
    )
    p = module.params
    missing = missing_tls(p["tls"])
    if missing:
        module.fail_json(msg=f"tls: {', '.join(missing)} missing")
    owner = p["owner"]
    try:
        # Events through the runtime's proxy when it runs us, as kubernetes.core would; reads and
        # deletions on the API server itself (the proxy's cache lags behind the pods).
        kube = Kube.default(p["kubeconfig"])
        live = Kube.default(p["kubeconfig"], in_cluster_first=True)
    except KubeConfigError as exc:
        module.fail_json(msg=str(exc))
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
                module.fail_json(msg=str(exc), reason=exc.reason, component="etcd", member=exc.member,
                                 members=[m.as_dict() for m in exc.done], changed=bool(exc.done))
            except KubeError as exc:
                module.fail_json(msg=f"{exc.status} {exc.reason}: {exc.message}")
    finally:
        certs.close()
    module.exit_json(changed=result.changed, revision=result.revision, members=[m.as_dict() for m in result.members],
                     step=result.step())


if __name__ == "__main__":
    main()
