#!/usr/bin/python
"""The etcd step's side of scaling: the StatefulSet's replicas and bootstrap values, a step begun before
finished (module_utils/karmada_operator/etcd/scaling.py)."""

from __future__ import annotations

DOCUMENTATION = r"""
---
module: etcd_scale
short_description: Move the local etcd StatefulSet to a member count one member at a time
description:
  - The etcd step's side of scaling; scaling itself is the C(etcdScaling) day-2 operation's step after
    etcd's (module_utils/karmada_operator/etcd/scaling.py, C(EtcdScaling); "Scale" in docs/etcd.md).
  - C(phase=prepare) (before the StatefulSet is applied) returns the C(replicas) to apply it with (the
    wanted count for a new StatefulSet, else the StatefulSet's own) and writes the bootstrap ConfigMap
    (C(ETCD_INITIAL_CLUSTER_STATE), C(ETCD_INITIAL_CLUSTER)) its pods read through C(envFrom).
  - C(phase=settle) only finishes a step begun before (a joiner, replicas that do not match the
    members) or replaces a member that lost its data (its claim was replaced, or etcd exits saying its
    data is lost or corrupt; module_utils/karmada_operator/etcd/replacement.py), and returns as soon as
    a new change or a wait for health would begin. Events C(EtcdMemberReplacing) when a replacement
    begins, C(EtcdMemberReplaced) when the member is promoted again.
  - A lost member whose removal would break the quorum (or a HostPath one) fails with C(reason)
    EtcdReplaceRefused having changed nothing; a wait longer than I(timeout) fails with C(reason)
    EtcdNotReady.
options:
  phase:
    description: prepare or settle.
    type: str
    choices: [prepare, settle]
    default: settle
  etcd:
    description:
      - The plan's etcd slice (C(plan.etcd), module_utils/karmada_operator/plan/plan.py) - C(namespace),
        C(statefulset) (its pods C(<statefulset>-<ordinal>) are the members), C(selector) (of its pods
        and claims), C(replicas) (members wanted, 1, 3, 5 or 7), C(memberDomain), C(bootstrapConfigMap)
        (the ConfigMap the pods read C(ETCD_INITIAL_CLUSTER*) from), C(labels) (the ConfigMap's),
        C(storage.type) and C(clientSecret).
      - C(clientSecret) names the Secret holding the client pair (its C(name), and its C(keys) for
        C(ca.crt), C(tls.crt) and C(tls.key)); the module reads it, so no key passes through the task's
        options or facts.
    type: dict
    required: true
  deletion_policy:
    description: spec.deletionPolicy; with C(Delete), a removed member's claim is deleted once its pod is gone.
    type: str
    choices: [Delete, Retain]
    default: Delete
  timeout:
    description: Seconds each step may wait (a joiner to start and catch up, a claim to go).
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
  owner:
    description: The object the Events are about and the ConfigMap's owner.
    type: dict
  kubeconfig:
    description: Path of a kubeconfig (default as k8s_status).
    type: path
author: Karmada-Operator developers
"""

EXAMPLES = r"""
- name: Finish an etcd scaling step begun before
  etcd_scale:
    phase: settle
    etcd: "{{ karmada_deployment_plan.etcd }}"
    deletion_policy: "{{ karmada_deployment_plan.deletionPolicy }}"
    owner: "{{ karmada_deployment_cr }}"
"""

RETURN = r"""
replicas:
  description: prepare, the replicas to apply the StatefulSet with; else the StatefulSet's replicas at the end.
  returned: success
  type: int
volume_claim_templates:
  description:
    - prepare, the existing StatefulSet's volumeClaimTemplates (name, labels, annotations, spec), to
      apply it with unchanged: the API server refuses any change to them (a spec.globals label
      added later, say); empty for a new StatefulSet.
  returned: when phase is prepare
  type: list
members:
  description: The etcd members at the end (names, in ordinal order).
  returned: success
  type: list
steps:
  description: The steps carried out (action, member, reason).
  returned: always
  type: list
deferred:
  description: settle, why it returned before the wanted count.
  returned: success
  type: str
replaced:
  description: The members replaced by this run (member, why, finished).
  returned: success
  type: list
last_replacement:
  description: What the last replacement of a member was (kept in the bootstrap ConfigMap), "" when none.
  returned: success
  type: str
reason:
  description: On failure, EtcdReplaceRefused or EtcdNotReady.
  returned: failure
  type: str
"""

from ansible.module_utils.basic import AnsibleModule

from karmada_operator.task import module_main
from karmada_operator.tasks import etcd_scale as task


def main() -> None:
    module_main(AnsibleModule(argument_spec=task.ARGUMENT_SPEC, supports_check_mode=task.SUPPORTS_CHECK_MODE), task.run)


if __name__ == "__main__":
    main()
