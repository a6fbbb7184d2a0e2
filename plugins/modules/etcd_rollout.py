#!/usr/bin/python
"""Roll the local etcd StatefulSet one member at a time, leader last, gated
(module_utils/karmada_operator/etcd/rollout.py)."""

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
  etcd:
    description:
      - The plan's etcd slice (C(plan.etcd), module_utils/karmada_operator/plan/plan.py) - C(namespace),
        C(statefulset) (its pods are C(<statefulset>-<ordinal>) and etcd member names), C(selector) (of
        its pods), C(allMemberEndpoints) (the client URLs members advertise), C(memberDomain) (each
        C(<pod>.<memberDomain>) is dialled at the pod's address) and C(clientSecret).
      - C(clientSecret) names the Secret holding the client pair (its C(name), and its C(keys) for
        C(ca.crt), C(tls.crt) and C(tls.key)); the module reads it, so no key passes through the task's
        options or facts.
    type: dict
    required: true
  replicas:
    description: Members the cluster has now (the first as many of C(allMemberEndpoints) are dialled).
    type: int
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
- name: Replace outdated etcd pods, the leader last
  etcd_rollout:
    etcd: "{{ karmada_deployment_plan.etcd }}"
    replicas: 3
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

from ansible.module_utils.basic import AnsibleModule

from karmada_operator.task import module_main
from karmada_operator.tasks import etcd_rollout as task


def main() -> None:
    module_main(AnsibleModule(argument_spec=task.ARGUMENT_SPEC, supports_check_mode=task.SUPPORTS_CHECK_MODE), task.run)


if __name__ == "__main__":
    main()
