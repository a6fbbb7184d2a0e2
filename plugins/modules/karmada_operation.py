#!/usr/bin/python
"""Run one day-2 operation's share of a pass (module_utils/karmada_operator/plan/operations.py)."""

from __future__ import annotations

DOCUMENTATION = r"""
---
module: karmada_operation
short_description: Run one day-2 operation's share of a KarmadaDeployment's pass
description:
  - The one step behind every day-2 operation that runs as a step of the pass (etcd's
    automatic defragmentation, module_utils/karmada_operator/etcd/defragmentation.py; the rewrite of
    the encrypted resources, module_utils/karmada_operator/controlplane/encryption_rewrite.py). The pass
    plan lists the step where the operation asks for it; this module hands the operation the plan,
    the custom resource, the API server and an Event poster, and returns its report.
  - The report (C(fields), C(conditions)) is merged into the Running status by the status step.
  - Changed only when the operation changed something (e.g. defragmented a member).
options:
  name:
    description: The operation (its status field), e.g. V(etcdDefragmentation).
    type: str
    required: true
  plan:
    description: The KarmadaDeployment's plan (module_utils/karmada_operator/plan/plan.py).
    type: dict
    required: true
  owner:
    description:
      - The KarmadaDeployment as the pass started (its status holds the operation's record).
      - The Events are about it.
    type: dict
    required: true
  timeout:
    description: Seconds the operation's share may wait on what it changed (e.g. a member healthy again).
    type: float
    default: 600
  poll:
    description: Seconds between two reads while it waits.
    type: float
    default: 2
  kubeconfig:
    description: Path of a kubeconfig (default as k8s_status).
    type: path
  karmada_kubeconfig:
    description:
      - Path of the operator's kubeconfig for karmada-apiserver (what the apiserver step wrote), for an
        operation that works inside Karmada (the encryption rewrite).
    type: path
author: Karmada-Operator developers
"""

EXAMPLES = r"""
- name: Defragment an etcd member when one is due
  karmada_operation:
    name: etcdDefragmentation
    plan: "{{ karmada_deployment_plan }}"
    owner: "{{ karmada_deployment_cr }}"
"""

RETURN = r"""
report:
  description: What the status step merges - C(fields) (status fields) and C(conditions).
  returned: success
  type: dict
"""

from ansible.module_utils.basic import AnsibleModule

from karmada_operator.task import module_main
from karmada_operator.tasks import karmada_operation as task


def main() -> None:
    module_main(AnsibleModule(argument_spec=task.ARGUMENT_SPEC, supports_check_mode=task.SUPPORTS_CHECK_MODE), task.run)


if __name__ == "__main__":
    main()
