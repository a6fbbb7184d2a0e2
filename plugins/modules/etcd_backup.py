#!/usr/bin/python
"""One reconcile pass of an EtcdBackup (module_utils/karmada_operator/backup/controller.py does the work)."""

from __future__ import annotations

DOCUMENTATION = r"""
---
module: etcd_backup
short_description: Reconcile one EtcdBackup - record a finished backup Job, or start the next one
description:
  - Reads the EtcdBackup, its KarmadaDeployment and this backup's Jobs; records a finished Job
    (status, Events, lock released), reports a running one, or starts a backup Job when one is
    due (on demand once, on a schedule per tick, a failed one again after its back-off).
  - Writes the EtcdBackup's status and Events itself.
  - The Job runs the operator image (C(image)), which carries etcdctl and our plugins.
options:
  name:
    description: Name of the EtcdBackup.
    type: str
    required: true
  namespace:
    description: Namespace of the EtcdBackup.
    type: str
    required: true
  image:
    description:
      - Image of the backup Job (the operator image). Default the environment variable
        C(KARMADA_OPERATOR_IMAGE) that the operator's Deployment sets.
    type: str
  image_pull_policy:
    description: imagePullPolicy of the Job's container.
    type: str
    default: IfNotPresent
    choices: [Always, IfNotPresent, Never]
  kubeconfig:
    description: Path of a kubeconfig (default as k8s_status).
    type: path
  follow_seconds:
    description:
      - After starting a backup Job (or finding one running), wait up to this long in the same
        pass for it to end and record it then, from its pod's termination message, instead of in
        a pass after the Job controller marks the Job complete. 0 does not wait. The wait holds
        one of the EtcdBackup controller's workers.
    type: int
    default: 60
author: Karmada-Operator developers
"""

EXAMPLES = r"""
- name: Reconcile the EtcdBackup
  etcd_backup:
    name: "{{ ansible_operator_meta.name }}"
    namespace: "{{ ansible_operator_meta.namespace }}"
"""

RETURN = r"""
action:
  description: What the pass did (started, running, recorded, wait, invalid, none, deleting).
  returned: always
  type: str
phase:
  description: status.phase after the pass.
  returned: always
  type: str
"""

from ansible.module_utils.basic import AnsibleModule  # noqa: E402

from karmada_operator.backup.controller import ARGUMENT_SPEC, run_pass
from karmada_operator.task import module_main


def main() -> None:
    module_main(AnsibleModule(argument_spec=ARGUMENT_SPEC, supports_check_mode=False), run_pass)


if __name__ == "__main__":
    main()
