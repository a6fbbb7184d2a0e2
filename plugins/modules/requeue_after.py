#!/usr/bin/python
"""Ansible module: ask the ansible-operator runtime to reconcile this object again after a time."""

from __future__ import annotations

DOCUMENTATION = r"""
---
module: requeue_after
short_description: Reconcile the object again after O(period) instead of the reconcile period
description:
  - The ansible-operator runtime reads this task's result (task action C(requeue_after), the
    name it looks for, like operator_sdk.util's module) and requeues the object after
    O(period), in place of the reconcile period, for this one run.
  - The runtime stops reading the run's events at this task, so it must be the run's last task;
    it never fails.
  - Run in the task's worker by plugins/action/requeue_after.py (no module process).
options:
  period:
    description: A Go duration (C(45s), C(4m30s)).
    type: str
    required: true
author: Karmada-Operator maintainers
"""

EXAMPLES = r"""
- name: Come back when the next certificate is due
  requeue_after:
    period: 270s
"""

RETURN = r"""
period:
  description: The period, as given (the runtime parses it).
  returned: always
  type: str
"""

from ansible.module_utils.basic import AnsibleModule

from karmada_operator.task import module_main
from karmada_operator.tasks import requeue_after as task


def main() -> None:
    module_main(AnsibleModule(argument_spec=task.ARGUMENT_SPEC, supports_check_mode=task.SUPPORTS_CHECK_MODE), task.run)


if __name__ == "__main__":
    main()
