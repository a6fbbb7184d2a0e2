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

from datetime import UTC, datetime  # noqa: E402

from ansible.module_utils.basic import AnsibleModule  # noqa: E402
from ansible.module_utils.cr_pass import event_object  # noqa: E402
from ansible.module_utils.k8s_conditions import ConditionError, status_patch  # noqa: E402
from ansible.module_utils.karmada_kube import Kube, KubeConfigError, KubeError  # noqa: E402


def main() -> None:
    module = AnsibleModule(
        argument_spec={
            "api_version": {"type": "str", "required": True},
            "kind": {"type": "str", "required": True},
            "name": {"type": "str", "required": True},
            "namespace": {"type": "str"},
            "status": {"type": "dict", "default": {}},
            "conditions": {"type": "list", "elements": "dict", "default": []},
            "kubeconfig": {"type": "path"},
            "observed_generation": {"type": "int"},
            "event": {"type": "dict"},
        },
        supports_check_mode=True,
    )
    p = module.params
    what = f"{p['kind']} {p['name']}"
    try:
        # In the operator pod: the API server itself, not the runtime's caching proxy.
        kube = Kube.default(p["kubeconfig"], in_cluster_first=True)
    except KubeConfigError as exc:
        module.fail_json(msg=str(exc))
    with kube:
        try:
            obj = kube.get(p["api_version"], p["kind"], p["name"], p["namespace"])
        except KubeError as exc:
            module.fail_json(msg=f"reading {what}: {exc.status} {exc.reason}: {exc.message}")
        if obj is None:
            # The object is gone (deleted mid-reconcile): nothing to report on.
            module.exit_json(changed=False, status={}, changed_fields=[], msg="object not found")
        current = obj.get("status") or {}
        try:
            generation = p["observed_generation"]
            if generation is None:
                generation = obj["metadata"].get("generation")
            new = status_patch(current, p["status"], p["conditions"], generation)
        except ConditionError as exc:
            module.fail_json(msg=str(exc))
        if new is None:
            module.exit_json(changed=False, status=current, changed_fields=[])
        changed_fields = sorted(k for k in new if new.get(k) != current.get(k))
        if not module.check_mode:
            try:
                # A merge patch of the status subresource: top-level status keys we set replace
                # the current ones, the others stay.
                kube.merge_patch(p["api_version"], p["kind"], p["name"], {"status": new}, p["namespace"],
                                 subresource="status")
            except KubeError as exc:
                if exc.status == 404:
                    module.exit_json(changed=False, status={}, changed_fields=[], msg="object not found")
                module.fail_json(msg=f"writing status of {what}: {exc.status} {exc.reason}: {exc.message}")
            event = p["event"] or {}
            if event.get("reason"):
                about = {**obj, "apiVersion": p["api_version"]}
                want = {"type": event.get("type") or "Normal", "reason": str(event["reason"]),
                        "message": str(event.get("message") or "")}
                try:
                    made = kube.create(event_object(about, want, datetime.now(UTC)))
                except KubeError as exc:  # the status is written; a lost Event is not worth a failed run
                    module.warn(f"status of {what} written, but its Event was not: {exc.status} {exc.message}")
                else:
                    module.exit_json(changed=True, status=new, changed_fields=changed_fields,
                                     event=(made.get("metadata") or {}).get("name", ""))
    module.exit_json(changed=True, status=new, changed_fields=changed_fields)


if __name__ == "__main__":
    main()
