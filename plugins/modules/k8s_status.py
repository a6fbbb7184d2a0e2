#!/usr/bin/python
"""Write the status subresource of a custom resource, with conditions in Kubernetes convention."""

from __future__ import annotations

DOCUMENTATION = r"""
---
module: k8s_status
short_description: Update the status of a custom resource with Kubernetes-style conditions
description:
  - Reads the object, merges the given fields and conditions into its status and patches the
    status subresource only when something differs, so a reconcile with nothing new is a no-op.
  - A condition's lastTransitionTime changes only when its status changes.
  - Our replacement for operator_sdk.util.k8s_status, which is not available offline.
options:
  api_version:
    description: apiVersion of the object, e.g. operator.karmada.io/v1alpha1.
    type: str
    required: true
  kind:
    description: Kind of the object.
    type: str
    required: true
  name:
    description: Name of the object.
    type: str
    required: true
  namespace:
    description: Namespace of the object.
    type: str
  status:
    description: Status fields to set (top-level keys replace the current ones).
    type: dict
    default: {}
  conditions:
    description:
      - Conditions to set; each has type, status (True/False/Unknown), reason (CamelCase) and message.
      - Conditions of other types already in status are kept.
    type: list
    elements: dict
    default: []
  observed_generation:
    description:
      - The generation the caller acted on (the object as the run read it), stamped on the
        conditions and status.observedGeneration. Default the object's current generation,
        which claims a spec edit made while the run was going on as seen.
    type: int
  event:
    description:
      - An Event about the object (type Normal or Warning, reason, message), created only when
        the status changed, so `kubectl describe` tells the story without one per reconcile.
        Omitted, or an empty reason: no Event.
    type: dict
  kubeconfig:
    description:
      - Path of a kubeconfig. Default the in-cluster service account (in a pod), then
        K8S_AUTH_KUBECONFIG, then KUBECONFIG, then C(~/.kube/config); the context is
        K8S_AUTH_CONTEXT or the current one.
    type: path
author: Karmada-Operator developers
"""

EXAMPLES = r"""
- name: Report that etcd has quorum
  k8s_status:
    api_version: operator.karmada.io/v1alpha1
    kind: KarmadaDeployment
    name: "{{ ansible_operator_meta.name }}"
    namespace: "{{ ansible_operator_meta.namespace }}"
    status:
      phase: Provisioning
    conditions:
      - type: EtcdReady
        status: "True"
        reason: QuorumReached
        message: 3/3 members healthy
"""

RETURN = r"""
status:
  description: The status after the update.
  returned: always
  type: dict
event:
  description: The name of the Event created, when one was.
  returned: when an Event was created
  type: str
changed_fields:
  description: Top-level status keys that changed.
  returned: always
  type: list
  elements: str
"""

from ansible.module_utils.basic import AnsibleModule  # noqa: E402

from karmada_operator.runtime.status_writer import ARGUMENT_SPEC, run
from karmada_operator.task import module_main


def main() -> None:
    module_main(AnsibleModule(argument_spec=ARGUMENT_SPEC, supports_check_mode=True), run)


if __name__ == "__main__":
    main()
