#!/usr/bin/python
"""Several lists of objects in one call, and the definitions that need applying
(module_utils/karmada_operator/runtime/lists_task.py)."""

from __future__ import annotations

DOCUMENTATION = r"""
---
module: karmada_lists
short_description: Read several lists of objects over one client, and which definitions need applying
description:
  - Reads each entry of I(lists) (a kind, optionally in a namespace and by label selectors) and,
    for I(definitions), one list per distinct kind and namespace among them, all over one client in
    one task. A loop of kubernetes.core.k8s_info costs a task per kind.
  - For I(definitions), also returns those whose live object is missing, lacks the definition's
    digest annotation or differs in a field the definition sets (module_utils/karmada_operator/kube/applied.py).
  - Reads only; never changed. A kind the server does not serve reads as no objects.
options:
  kubeconfig:
    description: Kubeconfig of the cluster to read (default as kubernetes.core finds it).
    type: path
  lists:
    description: The lists to read.
    type: list
    elements: dict
    default: []
    suboptions:
      api_version:
        description: The kind's apiVersion.
        type: str
        required: true
      kind:
        description: The kind.
        type: str
        required: true
      namespace:
        description: Its namespace (empty, all namespaces, or a cluster-scoped kind).
        type: str
        default: ""
      label_selectors:
        description: Label selectors, all of which must match.
        type: list
        elements: str
        default: []
  definitions:
    description: Objects we would apply, each with its digest annotation (the C(karmada_with_digest) filter).
    type: list
    elements: dict
    default: []
"""

EXAMPLES = r"""
- name: Read back the system objects
  karmada_lists:
    kubeconfig: /tmp/karmada-apiserver.conf
    definitions: "{{ objects | karmada_with_digest }}"
  register: read
"""

RETURN = r"""
lists:
  description: The objects of each entry of I(lists), in order, each with its apiVersion and kind.
  returned: always
  type: list
  elements: list
resources:
  description: Every object read (those of I(lists), then those of the definitions' kinds).
  returned: always
  type: list
  elements: dict
unapplied:
  description: The I(definitions) that need applying (missing, lacking their digest, or different).
  returned: when definitions are given
  type: list
  elements: dict
"""

from ansible.module_utils.basic import AnsibleModule  # noqa: E402

from karmada_operator.runtime.lists_task import ARGUMENT_SPEC, run
from karmada_operator.task import module_main


def main() -> None:
    module_main(AnsibleModule(argument_spec=ARGUMENT_SPEC, supports_check_mode=True), run)


if __name__ == "__main__":
    main()
