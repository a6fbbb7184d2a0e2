#!/usr/bin/python
"""Has anything changed since the last full pass of a KarmadaDeployment?
(module_utils/karmada_operator/plan/converged.py)"""

from __future__ import annotations

DOCUMENTATION = r"""
---
module: karmada_converged
short_description: Decide whether a reconcile may end early, and record what a full pass converged
description:
  - With I(mode=check), compares what the last full pass recorded in C(status.converged) with the
    KarmadaDeployment I(cr) and the objects it owns now (listed by I(selector) in I(namespace)), and
    reads every member's Cluster through karmada-apiserver; C(converged) is true only when nothing
    changed, everything is Ready and nothing is due (docs/performance.md lists the rules). On a
    local etcd it also asks etcd for its alarms and sizes (module_utils/karmada_operator/etcd/space.py):
    a NOSPACE alarm or a database newly over 80 % of its quota is not converged, and while one is
    over it C(requeue_after) is at most 30 s.
  - With I(mode=record), writes C(status.converged) (fingerprint, generation, time, the soonest
    certificate renewal, how the operator reached karmada-apiserver) at the end of a full pass.
    Changed only when the fingerprint differs from the one recorded before (the time and the
    C(operator.karmada.io/full-pass) value it also records are bookkeeping).
options:
  mode:
    description: C(check) or C(record).
    type: str
    choices: [check, record]
    required: true
  cr:
    description: The KarmadaDeployment as this run got it.
    type: dict
    required: true
  namespace:
    description: Its namespace (where the objects it owns are).
    type: str
    required: true
  selector:
    description: Label selector of the objects the operator made for it.
    type: str
    required: true
  build:
    description:
      - Digest of the operator's code (C(build_id) in plan/converged.py); by default this
        operator's own, computed from the directory holding its plugins.
    type: str
  recheck_after:
    description: With I(mode=check), seconds after which a full pass runs even when nothing changed.
    type: int
    default: 3600
  admin_kubeconfig_secret:
    description: With I(mode=check), the Secret holding the admin kubeconfig (key C(kubeconfig)).
    type: str
  certificates:
    description: With I(mode=record), the certificates and their notAfter (C(status.certificates)).
    type: list
    elements: dict
    default: []
  server:
    description: With I(mode=record), the URL the operator reached karmada-apiserver at in this pass.
    type: str
    default: ""
  tls_server_name:
    description: With I(mode=record), the name it checked the serving certificate for (empty, the URL's host).
    type: str
    default: ""
  kubeconfig:
    description: Kubeconfig of the host cluster (default as kubernetes.core finds it).
    type: path
"""

RETURN = r"""
converged:
  description: (check) True when the run may end now.
  returned: always
  type: bool
control_plane:
  description: (check) True when the control plane is as the last full pass left it (only members may need work).
  returned: when mode is check
  type: bool
service_ips:
  description:
    - (check) The cluster IP of every Service the operator owns, by name, as just listed: a run
      that goes on with only the members reaches karmada-apiserver at it without another lookup.
  returned: when mode is check
  type: dict
reason:
  description: Why (check), or what was recorded (record).
  returned: always
  type: str
renew_at:
  description: (record) When the soonest certificate enters its renewal window (C(renewAt)), empty when none is listed.
  returned: when mode is record
  type: str
requeue_after:
  description:
    - The period after which the runtime should reconcile again (C(<n>s)) when the next
      certificate renewal comes before the next periodic reconcile, else empty (plan/requeue.py).
    - (check) only when the run may end now.
  returned: always
  type: str
"""

from ansible.module_utils.basic import AnsibleModule  # noqa: E402

from karmada_operator.runtime.converged_task import ARGUMENT_SPEC, run
from karmada_operator.task import module_main


def main() -> None:
    module_main(AnsibleModule(argument_spec=ARGUMENT_SPEC, supports_check_mode=False), run)


if __name__ == "__main__":
    main()
