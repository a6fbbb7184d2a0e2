"""karmada_member in the controller process (module_utils/karmada_operator/runtime/adapter.py).

Options: plugins/modules/karmada_member.py.
"""

from __future__ import annotations

from karmada_operator.members import join as karmada_member_join
from karmada_operator.runtime.adapter import in_process_action

ActionModule = in_process_action(karmada_member_join.ARGUMENT_SPEC, karmada_member_join.run)
