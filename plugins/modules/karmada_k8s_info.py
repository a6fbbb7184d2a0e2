#!/usr/bin/python
"""kubernetes.core.k8s_info under our name, run by plugins/action/karmada_k8s_info.py in the task's worker.

This file is its documentation and what ansible-lint checks a task's arguments against (the
collection's own ``main``). It does not run as a module process: use kubernetes.core.k8s_info there."""

from __future__ import annotations

DOCUMENTATION = r"""
---
module: karmada_k8s_info
short_description: kubernetes.core.k8s_info, run in the controller process
description:
  - Exactly kubernetes.core.k8s_info (the pinned kubernetes.core collection's module code, options and
    result), run by an action plugin in the task's worker rather than as a new Python process
    (which took 1-2 s of every call on the 2-core test bed, most of it importing the Kubernetes
    client).
  - Runs only through its action plugin (plugins/action/); as a module process, use kubernetes.core.k8s_info.
  - See kubernetes.core.k8s_info for the options.
options: {}
"""

EXAMPLES = r"""
- name: Read a Secret
  karmada_k8s_info:
    kind: Secret
    namespace: karmada-system
    name: karmada-cert
"""

from ansible_collections.kubernetes.core.plugins.modules.k8s_info import (
    main,  # noqa: E402, F401 - what ansible-lint reads the arguments from
)

if __name__ == "__main__":
    import json
    import sys

    print(json.dumps({"failed": True,
                      "msg": "karmada_k8s_info runs in the task's worker through plugins/action/karmada_k8s_info.py "
                             "(ansible.cfg action_plugins); as a module process use kubernetes.core.k8s_info"}))
    sys.exit(1)
