#!/usr/bin/python
"""One reconcile pass of an EtcdBackup (module_utils/etcd_backup_controller.py does the work)."""

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

import os  # noqa: E402

from ansible.module_utils.basic import AnsibleModule  # noqa: E402
from ansible.module_utils.etcd_backup_controller import API_VERSION, BackupReconciler, event_object  # noqa: E402
from ansible.module_utils.karmada_kube import Kube, KubeConfigError, KubeError  # noqa: E402

IMAGE_ENV = "KARMADA_OPERATOR_IMAGE"


def main() -> None:
    module = AnsibleModule(
        argument_spec={
            "name": {"type": "str", "required": True},
            "namespace": {"type": "str", "required": True},
            "image": {"type": "str"},
            "image_pull_policy": {"type": "str", "default": "IfNotPresent",
                                  "choices": ["Always", "IfNotPresent", "Never"]},
            "kubeconfig": {"type": "path"},
        },
        supports_check_mode=False,
    )
    p = module.params
    image = p["image"] or os.environ.get(IMAGE_ENV, "")
    try:
        # Live reads and status writes; Jobs and Leases through the runtime's proxy (when it
        # runs us), which adds the owner reference and watches the Job, so its end triggers a pass.
        live = Kube.default(p["kubeconfig"], in_cluster_first=True)
        proxy = Kube.default(p["kubeconfig"])
    except KubeConfigError as exc:
        module.fail_json(msg=str(exc))
    via_proxy = bool(os.environ.get("K8S_AUTH_KUBECONFIG")) and not p["kubeconfig"]
    with live, proxy:
        try:
            backup = live.get(API_VERSION, "EtcdBackup", p["name"], p["namespace"])
            if backup is None:
                module.exit_json(changed=False, action="none", phase="", msg="EtcdBackup not found")
            if not image:
                module.fail_json(msg=f"no image for the backup Job: set {IMAGE_ENV} in the operator's environment")
            rec = BackupReconciler(live, backup, image, pull_policy=p["image_pull_policy"],
                                   creator=proxy if via_proxy else None)
            outcome = rec.reconcile()
            current = backup.get("status") or {}
            new = outcome.status
            wrote = False
            if new != current and outcome.action != "deleting":
                # a merge patch: keys the pass dropped (nextScheduleTime when suspended) go as null
                patch = {**new, **{k: None for k in current.keys() - new.keys()}}
                live.merge_patch(API_VERSION, "EtcdBackup", p["name"], {"status": patch}, p["namespace"],
                                 subresource="status")
                wrote = True
            for event in outcome.events:
                live.create(event_object(backup, event, rec.now))
        except KubeError as exc:
            module.fail_json(msg=f"EtcdBackup {p['namespace']}/{p['name']}: {exc.status} {exc.reason}: {exc.message}")
    module.exit_json(changed=outcome.changed or wrote, action=outcome.action,
                     phase=outcome.status.get("phase", ""))


if __name__ == "__main__":
    main()
