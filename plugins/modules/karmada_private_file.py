#!/usr/bin/python
"""Ansible module: a file only its owner may read (a kubeconfig with a client key), written or removed."""

from __future__ import annotations

DOCUMENTATION = r"""
---
module: karmada_private_file
short_description: Write a secret to a private file, or remove it with its directory
description:
  - C(state=present) writes O(content) to O(path) with mode 0600, in a directory created with
    mode 0700 if missing; the file is written to a temporary name and renamed, so a reader never
    sees half of it. Unchanged content is not rewritten.
  - C(state=absent) removes O(path) (a file, or a directory and everything in it).
  - Run in the task's worker by plugins/action/karmada_private_file.py (no module process); what
    ansible.builtin.tempfile, copy and file did in three processes for the operator's kubeconfig.
  - O(content) is never logged (no_log). With O(kubeconfig_from) instead, the content is a
    kubeconfig read from a Secret and pointed at another server, so the credentials go from the
    Secret to the file without passing through the task's options or facts.
options:
  path:
    description: The file (present) or the file or directory (absent).
    type: path
    required: true
  content:
    description: What the file holds (state=present).
    type: str
  kubeconfig_from:
    description:
      - Instead of O(content) - the Secret holding a kubeconfig (C(namespace), C(name), C(key)), and
        the C(server) its copy dials (with C(tls_server_name), the name the serving certificate is
        checked against, when C(server) is an address).
    type: dict
  kubeconfig:
    description: Path of a kubeconfig for reading the Secret (default as k8s_status).
    type: path
  state:
    description: present or absent.
    type: str
    choices: [present, absent]
    default: present
author: Karmada-Operator maintainers
"""

EXAMPLES = r"""
- name: Write the operator's kubeconfig
  karmada_private_file:
    path: /tmp/karmada-operator/uid/admin.conf
    kubeconfig_from:
      namespace: karmada-system
      name: karmada-kubeconfigs
      key: admin.conf
      server: https://10.96.0.20:5443
      tls_server_name: karmada-apiserver.karmada-system.svc.cluster.local
"""

RETURN = r"""
path:
  description: The path.
  returned: always
  type: str
"""

from ansible.module_utils.basic import AnsibleModule

from karmada_operator.task import module_main
from karmada_operator.tasks import karmada_private_file as task


def main() -> None:
    module_main(AnsibleModule(argument_spec=task.ARGUMENT_SPEC, supports_check_mode=task.SUPPORTS_CHECK_MODE), task.run)


if __name__ == "__main__":
    main()
