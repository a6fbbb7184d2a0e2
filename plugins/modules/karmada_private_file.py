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

import os  # noqa: E402
import shutil  # noqa: E402
import tempfile  # noqa: E402

from ansible.module_utils.basic import AnsibleModule  # noqa: E402


def write_private(path: str, content: str) -> bool:
    """Write ``content`` to ``path`` (0600, in a 0700 directory); False when it already held it."""
    directory = os.path.dirname(path) or "."
    os.makedirs(directory, mode=0o700, exist_ok=True)
    data = content.encode()
    try:
        with open(path, "rb") as current:
            if current.read() == data and (os.stat(path).st_mode & 0o777) == 0o600:
                return False
    except FileNotFoundError:
        pass
    fd, tmp = tempfile.mkstemp(dir=directory, prefix=".tmp-")  # 0600
    try:
        with os.fdopen(fd, "wb") as out:
            out.write(data)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
    return True


def remove(path: str) -> bool:
    if os.path.isdir(path) and not os.path.islink(path):
        shutil.rmtree(path)
        return True
    try:
        os.unlink(path)
    except FileNotFoundError:
        return False
    return True


def main() -> None:
    module = AnsibleModule(
        argument_spec={
            "path": {"type": "path", "required": True},
            "content": {"type": "str", "no_log": True},
            "state": {"type": "str", "choices": ["present", "absent"], "default": "present"},
        },
        required_if=[("state", "present", ["content"])],
        supports_check_mode=True,
    )
    path, state = module.params["path"], module.params["state"]
    try:
        if module.check_mode:
            changed = state == "absent" and os.path.lexists(path) or state == "present"
        elif state == "present":
            changed = write_private(path, module.params["content"])
        else:
            changed = remove(path)
    except OSError as exc:
        module.fail_json(msg=f"{path}: {exc.strerror or exc}", path=path)
    module.exit_json(changed=changed, path=path)


if __name__ == "__main__":
    main()
