#!/usr/bin/python
"""Roll control-plane components one at a time, each gated (module_utils/karmada_operator/controlplane/rollout.py)."""

from __future__ import annotations

DOCUMENTATION = r"""
---
module: karmada_rollout
short_description: Apply Karmada control-plane components one at a time, each gated on its rollout
description:
  - For each step in order, applies its objects server-side, then waits until its Deployment
    has observed the new spec with every replica updated, ready and available and no pod of
    the old template left. A step whose objects did not change is checked once.
  - The first step that does not become ready within I(timeout) stops the run (the steps
    after it are not applied). The failure names the component and what its pods say
    (C(ImagePullBackOff pulling ...), a crash loop, unschedulable); C(reason) is
    C(RolloutTimeout) or C(PodsNotReady); C(done) lists the steps that passed their gate.
  - Reports per step the version its ready pods run, read from their container statuses, and
    when it started and ended. With I(owner), writes an Event on it for each step that changed.
options:
  namespace:
    description: Namespace of the components.
    type: str
    required: true
  steps:
    description:
      - In rollout order. Each has C(name), C(objects) (manifests, applied in order),
        C(deployment), C(container), C(selector) (label selector of its pods) and C(replicas);
        optionally C(lease) (C(namespace/name) of its leader-election Lease in karmada-apiserver)
        and C(admission) (an object karmada-apiserver must admit with dryRun), checked through
        I(karmada_kubeconfig) after the step changed something.
    type: list
    elements: dict
    default: []
  components:
    description:
      - Instead of O(steps), the components of one step of the plan, rendered by the module
        (C(component.yaml.j2), plugins/module_utils/karmada_operator/runtime/templates.py):
        C(plan) (the karmada_plan task's plan), C(step) (C(aggregated) or C(components)),
        C(hashes) (the certificates step's pod-template hashes; never key material) and
        C(reverse) (a rollback: the registry's order backwards). The objects of the step's
        components switched off become O(absent).
    type: dict
  timeout:
    description: Seconds each step may take to become ready.
    type: int
    default: 300
  poll:
    description: Seconds between readiness checks.
    type: int
    default: 2
  stuck_after:
    description:
      - Seconds a step's pods may stay in a state that waiting does not clear (image pull
        failure, crash loop, unschedulable) before the run stops there, ahead of I(timeout).
    type: int
    default: 60
  owner:
    description:
      - The object the Events are about and the owner of the objects applied in its namespace
        (C(apiVersion), C(kind), C(metadata) with name, namespace, uid).
    type: dict
  kubeconfig:
    description: Path of a kubeconfig (default as k8s_status).
    type: path
  absent:
    description:
      - Objects to delete after the rollout when they exist (C(apiVersion), C(kind),
        C(metadata.name) and C(metadata.namespace)), in order; those of components switched off.
    type: list
    elements: dict
    default: []
  karmada_kubeconfig:
    description:
      - Path of a kubeconfig for karmada-apiserver. With it, a step that changed passes only
        once its C(lease) is held by one of its ready pods and its C(admission) object is
        admitted (C(reason) C(NotServing) otherwise).
    type: path
author: Karmada-Operator developers
"""

EXAMPLES = r"""
- name: Roll out the components
  karmada_rollout:
    namespace: karmada-system
    components:
      plan: "{{ karmada_deployment_plan }}"
      step: components
      hashes: "{{ karmada_deployment_pki.hashes }}"
    timeout: 300
    owner: "{{ karmada_deployment_cr }}"
"""

RETURN = r"""
deleted:
  description: C(Kind/name) of each object of I(absent) that existed and was deleted.
  returned: success
  type: list
steps:
  description: One entry per step that passed its gate (name, changed, version, started, finished, seconds, pods).
  returned: always
  type: list
done:
  description: On failure, the steps that passed their gate before the one that stopped the run.
  returned: failure
  type: list
component:
  description: On failure, the component that stopped the run.
  returned: failure
  type: str
"""

from ansible.module_utils.basic import AnsibleModule

from karmada_operator.task import module_main
from karmada_operator.tasks import karmada_rollout as task


def main() -> None:
    module_main(AnsibleModule(argument_spec=task.ARGUMENT_SPEC, supports_check_mode=task.SUPPORTS_CHECK_MODE), task.run)


if __name__ == "__main__":
    main()
