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
  - O(content) is never logged (no_log).
options:
  path:
    description: The file (present) or the file or directory (absent).
    type: path
    required: true
  content:
    description: What the file holds (state=present).
    type: str
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
    content: "{{ kubeconfig_text }}"
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
