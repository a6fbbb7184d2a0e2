#!/usr/bin/python
"""One reconcile pass of an EtcdRestore (module_utils/karmada_operator/backup/restore_controller.py does the work)."""

from __future__ import annotations

DOCUMENTATION = r"""
---
module: etcd_restore
short_description: Reconcile one EtcdRestore - seed a new Karmada's etcd from a snapshot, then verify it
description:
  - Refuses a target whose etcd exists; creates the members' volumes and one restore Job per
    member (fetch, sha256 check, etcdutl snapshot restore with a revision bump); marks the
    EtcdRestore Seeded, which lets the target KarmadaDeployment start; once it is Ready,
    compares the restored plane with the snapshot (condition Verified).
  - Writes the EtcdRestore's status and Events itself.
  - The Jobs run the operator image (C(image)), which carries etcdutl and our plugins.
options:
  name:
    description: Name of the EtcdRestore.
    type: str
    required: true
  namespace:
    description: Namespace of the EtcdRestore.
    type: str
    required: true
  image:
    description:
      - Image of the restore Jobs (the operator image). Default the environment variable
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
      - After starting the restore Jobs (or finding them running), wait up to this long in the
        same pass for all of them to end and record the seeding then, from their pods' results,
        instead of in a pass after the Job controller marks them complete. 0 does not wait. The
        wait holds one of the EtcdRestore controller's workers.
    type: int
    default: 60
author: Karmada-Operator developers
"""

EXAMPLES = r"""
- name: Reconcile the EtcdRestore
  etcd_restore:
    name: "{{ ansible_operator_meta.name }}"
    namespace: "{{ ansible_operator_meta.namespace }}"
"""

RETURN = r"""
action:
  description: What the pass did (started, running, seeded, failed, wait, verifying, verified, none, deleting).
  returned: always
  type: str
phase:
  description: status.phase after the pass.
  returned: always
  type: str
"""

from ansible.module_utils.basic import AnsibleModule  # noqa: E402

from karmada_operator.backup.restore_controller import ARGUMENT_SPEC, run_pass
from karmada_operator.task import module_main


def main() -> None:
    module_main(AnsibleModule(argument_spec=ARGUMENT_SPEC, supports_check_mode=False), run_pass)


if __name__ == "__main__":
    main()
