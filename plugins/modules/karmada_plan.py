#!/usr/bin/python
"""Derive the install plan of a KarmadaDeployment (names, images, flags, pod settings)."""

from __future__ import annotations

DOCUMENTATION = r"""
---
module: karmada_plan
short_description: Compute everything the install derives from a KarmadaDeployment
description:
  - Pure computation, no cluster access. Takes the custom resource as the API server returns it
    (schema defaults filled in) and returns object names, images, command-line flags and pod
    settings of every component in install order, the etcd topology, the apiserver endpoints
    and the input of the karmada_pki module; and beside it what this pass does (RV(pass)).
  - Problems only the operator can judge come back as a failure with C(field) naming the spec path.
options:
  resource:
    description: The KarmadaDeployment object (metadata, spec and status).
    type: dict
    required: true
  converged_control_plane:
    description: The fast-path check found the control plane as the last full pass left it.
    type: bool
    default: false
  deleting:
    description: The finalizer's pass (only the names are used; nothing is refused).
    type: bool
    default: false
author: Karmada-Operator developers
"""

EXAMPLES = r"""
- name: Plan the install
  karmada_plan:
    resource: "{{ _operator_karmada_io_karmadadeployment }}"
  register: karmada_deployment_plan
"""

RETURN = r"""
plan:
  description: The plan; see plugins/module_utils/karmada_operator/plan/plan.py for its keys.
  returned: success
  type: dict
pass:
  description:
    - What this pass does (mode, steps, upgrade, reverse, caRotation, conditions);
      see plugins/module_utils/karmada_operator/plan/pass_plan.py.
  returned: success
  type: dict
step_reason:
  description: Why the pass cannot start (UnsupportedUpgrade, UpgradePreflightFailed, InvalidSpec).
  returned: failure
  type: str
field:
  description: Spec path of the problem when the module fails.
  returned: failure
  type: str
"""

from ansible.module_utils.basic import AnsibleModule  # noqa: E402

from karmada_operator.task import module_main
from karmada_operator.tasks.karmada_plan import ARGUMENT_SPEC, run


def main() -> None:
    module_main(AnsibleModule(argument_spec=ARGUMENT_SPEC, supports_check_mode=True), run)


if __name__ == "__main__":
    main()
