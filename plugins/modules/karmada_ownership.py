#!/usr/bin/python
"""Touch only what this KarmadaDeployment made (module_utils/karmada_operator/tasks/karmada_ownership.py)."""

from __future__ import annotations

DOCUMENTATION = r"""
---
module: karmada_ownership
short_description: Before a pass writes, check every name it needs is free or its own; remove only its own
description:
  - V(present) (the first step of every full pass) reads every object the pass makes on the host
    cluster (module_utils/karmada_operator/plan/plan.py host_objects). When one exists and is not this
    KarmadaDeployment's (no ownerReference to it, no label operator.karmada.io/karmadadeployment-uid
    with its UID: module_utils/karmada_operator/kube/ownership.py), it fails with
    C(step_reason=NameConflict) and C(conflicts) naming each object and whose it seems to be;
    nothing has been written.
  - V(absent) (the finalizer) deletes the workloads (and waits until they are gone), the etcd
    volumes and the certificate Secrets, or with deletionPolicy Retain drops the Secrets'
    ownerReference to it; only what is this KarmadaDeployment's. What is someone else's stays and
    is named in C(left).
  - Run in the task's worker by plugins/action/karmada_ownership.py (no module process).
options:
  state:
    description: V(present) to check before a pass, V(absent) to remove on deletion.
    type: str
    choices: [present, absent]
    default: present
  plan:
    description: The KarmadaDeployment's plan (module_utils/karmada_operator/plan/plan.py).
    type: dict
    required: true
  owner:
    description: The KarmadaDeployment (its name and metadata.uid).
    type: dict
    required: true
  timeout:
    description: Seconds to wait for the deleted workloads to be gone.
    type: float
    default: 300
  poll:
    description: Seconds between two reads while waiting.
    type: float
    default: 1
  kubeconfig:
    description: Path of a kubeconfig (default as k8s_status).
    type: path
author: Karmada-Operator developers
"""

EXAMPLES = r"""
- name: Every name this pass needs is free or ours
  karmada_ownership:
    plan: "{{ karmada_deployment_plan }}"
    owner: "{{ karmada_deployment_cr }}"
"""

RETURN = r"""
checked:
  description: How many names were checked (V(present)).
  returned: success
  type: int
conflicts:
  description: The objects in the way, described (on failure).
  returned: failure
  type: list
  elements: str
deleted:
  description: What was deleted (V(absent)), "Kind name".
  returned: success
  type: list
  elements: str
released:
  description: The Secrets kept with deletionPolicy Retain (their ownerReference dropped).
  returned: success
  type: list
  elements: str
left:
  description: Objects with the names of this KarmadaDeployment's that are someone else's, left in place.
  returned: success
  type: list
  elements: str
"""

from ansible.module_utils.basic import AnsibleModule

from karmada_operator.task import module_main
from karmada_operator.tasks import karmada_ownership as task


def main() -> None:
    module_main(AnsibleModule(argument_spec=task.ARGUMENT_SPEC, supports_check_mode=task.SUPPORTS_CHECK_MODE), task.run)


if __name__ == "__main__":
    main()
