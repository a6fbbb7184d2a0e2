"""etcd_restore in the controller process (module_utils/karmada_operator/runtime/adapter.py).

Options: plugins/modules/etcd_restore.py.
"""

from __future__ import annotations

from karmada_operator.backup import restore_controller as etcd_restore_controller
from karmada_operator.runtime.adapter import in_process_action

ActionModule = in_process_action(etcd_restore_controller.ARGUMENT_SPEC, etcd_restore_controller.run_pass)
