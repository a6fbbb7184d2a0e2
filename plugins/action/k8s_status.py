"""k8s_status in the controller process (module_utils/karmada_operator/runtime/adapter.py).

Options: plugins/modules/k8s_status.py.
"""

from __future__ import annotations

from karmada_operator.runtime import status_writer
from karmada_operator.runtime.adapter import in_process_action

ActionModule = in_process_action(status_writer.ARGUMENT_SPEC, status_writer.run, supports_check_mode=True)
