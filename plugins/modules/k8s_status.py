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
  kubeconfig:
    description: Path of a kubeconfig; default is the in-cluster config, then K8S_AUTH_KUBECONFIG, then ~/.kube/config.
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
changed_fields:
  description: Top-level status keys that changed.
  returned: always
  type: list
  elements: str
"""

import os  # noqa: E402

from ansible.module_utils.basic import AnsibleModule  # noqa: E402
from ansible.module_utils.k8s_conditions import ConditionError, status_patch  # noqa: E402

try:
    from kubernetes import client, config
    from kubernetes.client.rest import ApiException
    HAS_K8S = True
except ImportError:  # pragma: no cover - reported to the user below
    HAS_K8S = False


def api_client(kubeconfig: str | None):
    if kubeconfig:
        return config.new_client_from_config(config_file=kubeconfig)
    if os.environ.get("KUBERNETES_SERVICE_HOST"):
        config.load_incluster_config()
        return client.ApiClient()
    return config.new_client_from_config(config_file=os.environ.get("K8S_AUTH_KUBECONFIG"))


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
        },
        supports_check_mode=True,
    )
    if not HAS_K8S:
        module.fail_json(msg="the kubernetes Python package is required (pip install -r requirements.txt)")
    p = module.params
    group, _, version = p["api_version"].rpartition("/")
    plural = p["kind"].lower() + "s"
    api = client.CustomObjectsApi(api_client(p["kubeconfig"]))
    try:
        if p["namespace"]:
            obj = api.get_namespaced_custom_object(group, version, p["namespace"], plural, p["name"])
        else:
            obj = api.get_cluster_custom_object(group, version, plural, p["name"])
    except ApiException as exc:
        if exc.status == 404:
            # The object is gone (deleted mid-reconcile): nothing to report on.
            module.exit_json(changed=False, status={}, changed_fields=[], msg="object not found")
        module.fail_json(msg=f"reading {p['kind']} {p['name']}: {exc.status} {exc.reason}")
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
        body = {"status": new}
        try:
            if p["namespace"]:
                api.patch_namespaced_custom_object_status(group, version, p["namespace"], plural, p["name"], body)
            else:
                api.patch_cluster_custom_object_status(group, version, plural, p["name"], body)
        except ApiException as exc:
            if exc.status == 404:
                module.exit_json(changed=False, status={}, changed_fields=[], msg="object not found")
            module.fail_json(msg=f"writing status of {p['kind']} {p['name']}: {exc.status} {exc.body}")
    module.exit_json(changed=True, status=new, changed_fields=changed_fields)


if __name__ == "__main__":
    main()
