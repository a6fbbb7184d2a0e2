#!/usr/bin/python
"""Ansible module: before a version change, an etcd backup to the configured store, waited for."""

from __future__ import annotations

DOCUMENTATION = r"""
---
module: karmada_pre_upgrade_backup
short_description: Take the pre-upgrade etcd backup of a KarmadaDeployment and wait for it
description:
  - When an EtcdBackup of the namespace backs up this KarmadaDeployment (a store is configured)
    and C(spec.upgrade.preUpgradeBackup) is not C(Skip), creates a one-off EtcdBackup to that
    store and waits until it succeeds or fails. A failure fails the task (the upgrade stops
    before anything changes); a resumed upgrade reuses the backup it took.
  - Run in the task's worker by plugins/action/karmada_pre_upgrade_backup.py; the code is
    plugins/module_utils/karmada_operator/tasks/karmada_pre_upgrade_backup.py.
options:
  cr:
    description: The KarmadaDeployment.
    type: dict
    required: true
  upgrade:
    description: C(status.upgrade) as this pass starts (the pass plan's C(upgrade)).
    type: dict
    required: true
  timeout:
    description: Seconds to wait for the backup.
    type: int
    default: 1800
  poll:
    description: Seconds between two reads of the backup.
    type: int
    default: 5
  kubeconfig:
    description: The cluster (default as every task).
    type: path
author: Karmada-Operator maintainers
"""

EXAMPLES = r"""
- name: Take the pre-upgrade backup
  karmada_pre_upgrade_backup:
    cr: "{{ karmada_deployment_cr }}"
    upgrade: "{{ karmada_deployment_upgrade }}"
  register: karmada_deployment_pre_upgrade
"""

RETURN = r"""
backup:
  description: C({name, location}) of the backup taken (or reused); C({}) when none is taken.
  returned: success
  type: dict
"""

from ansible.module_utils.basic import AnsibleModule  # noqa: E402

from karmada_operator.task import module_main
from karmada_operator.tasks.karmada_pre_upgrade_backup import ARGUMENT_SPEC, SUPPORTS_CHECK_MODE, run


def main() -> None:
    module_main(AnsibleModule(argument_spec=ARGUMENT_SPEC, supports_check_mode=SUPPORTS_CHECK_MODE), run)


if __name__ == "__main__":
    main()
