"""etcd_backup in the controller process (module_utils/karmada_operator/runtime/adapter.py).

Options: plugins/modules/etcd_backup.py.
"""

from __future__ import annotations

from karmada_operator.backup import controller as etcd_backup_controller
from karmada_operator.runtime.adapter import in_process_action

ActionModule = in_process_action(etcd_backup_controller.ARGUMENT_SPEC, etcd_backup_controller.run_pass)
