"""karmada_pre_upgrade_backup: before a version change, an etcd backup to the configured store,
waited for (plugins/modules/karmada_pre_upgrade_backup.py).

When an EtcdBackup of the namespace backs up this KarmadaDeployment (a store is configured) and
spec.upgrade.preUpgradeBackup is not Skip, a one-off EtcdBackup to its store
(plan/upgrade.py: pre_upgrade_backup) is created and waited for; a failed backup stops the
upgrade before anything changes; a resumed upgrade finds and reuses it. Reads are live (not the
runtime's cache); the EtcdBackup is created where the runtime's other writes go, so it gets the
KarmadaDeployment as its owner.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from karmada_operator.kube.client import Kube, KubeConfigError, KubeError
from karmada_operator.plan import upgrade as karmada_upgrade
from karmada_operator.task import ModuleFailed

ARGUMENT_SPEC: dict[str, Any] = {
    "cr": {"type": "dict", "required": True},
    # status.upgrade as this pass starts (the pass's upgrade record)
    "upgrade": {"type": "dict", "required": True},
    "timeout": {"type": "int", "default": 1800},
    "poll": {"type": "int", "default": 5},
    "kubeconfig": {"type": "path"},
}
SUPPORTS_CHECK_MODE = False
API_VERSION = "operator.karmada.io/v1alpha1"


def run(params: dict[str, Any], check_mode: bool = False, warn: Callable[[str], None] = print) -> dict[str, Any]:
    cr, record = params["cr"], params["upgrade"]
    namespace = cr["metadata"]["namespace"]
    try:
        kube = Kube.default(params["kubeconfig"])
        live = Kube.default(params["kubeconfig"], in_cluster_first=True)
    except KubeConfigError as exc:
        raise ModuleFailed(str(exc)) from exc
    with kube, live:
        try:
            backups = live.list(API_VERSION, "EtcdBackup", namespace=namespace)
            wanted = karmada_upgrade.pre_upgrade_backup(cr, backups, record)
            if not wanted:
                return {"changed": False, "backup": {}, "msg": "no backup to take (no store, or preUpgradeBackup Skip)"}
            name = wanted["metadata"]["name"]
            created = False
            if live.get(API_VERSION, "EtcdBackup", name, namespace) is None:
                kube.create(wanted)
                created = True
            deadline = time.monotonic() + params["timeout"]
            while True:
                state, message = karmada_upgrade.pre_upgrade_backup_state(
                    live.get(API_VERSION, "EtcdBackup", name, namespace))
                if state != "Waiting":
                    break
                if time.monotonic() >= deadline:
                    raise ModuleFailed(f"the pre-upgrade backup {name} did not finish in {params['timeout']} s: "
                                       f"{message}", changed=created)
                time.sleep(max(1, params["poll"]))
        except KubeError as exc:
            raise ModuleFailed(f"{exc.status} {exc.reason}: {exc.message}") from exc
    if state != "Succeeded":
        raise ModuleFailed(message, changed=created)
    return {"changed": created, "backup": {"name": name, "location": message}}
