#!/usr/bin/python
"""Roll control-plane components one at a time, each gated (module_utils/karmada_rollout.py)."""

from __future__ import annotations

DOCUMENTATION = r"""
---
module: karmada_rollout
short_description: Apply Karmada control-plane components one at a time, each gated on its rollout
description:
  - For each step in order, applies its objects server-side, then waits until its Deployment
    has observed the new spec with every replica updated, ready and available and no pod of
    the old template left. A step whose objects did not change is checked once.
  - The first step that does not become ready within I(timeout) stops the run (the steps
    after it are not applied). The failure names the component and what its pods say
    (C(ImagePullBackOff pulling ...), a crash loop, unschedulable); C(reason) is
    C(RolloutTimeout) or C(PodsNotReady); C(done) lists the steps that passed their gate.
  - Reports per step the version its ready pods run, read from their container statuses, and
    when it started and ended. With I(owner), writes an Event on it for each step that changed.
options:
  namespace:
    description: Namespace of the components.
    type: str
    required: true
  steps:
    description:
      - In rollout order. Each has C(name), C(objects) (manifests, applied in order),
        C(deployment), C(container), C(selector) (label selector of its pods) and C(replicas);
        optionally C(lease) (C(namespace/name) of its leader-election Lease in karmada-apiserver)
        and C(admission) (an object karmada-apiserver must admit with dryRun), checked through
        I(karmada_kubeconfig) after the step changed something.
    type: list
    elements: dict
    required: true
  timeout:
    description: Seconds each step may take to become ready.
    type: int
    default: 300
  poll:
    description: Seconds between readiness checks.
    type: int
    default: 2
  stuck_after:
    description:
      - Seconds a step's pods may stay in a state that waiting does not clear (image pull
        failure, crash loop, unschedulable) before the run stops there, ahead of I(timeout).
    type: int
    default: 60
  owner:
    description:
      - The object the Events are about and the owner of the objects applied in its namespace
        (C(apiVersion), C(kind), C(metadata) with name, namespace, uid).
    type: dict
  kubeconfig:
    description: Path of a kubeconfig (default as k8s_status).
    type: path
  absent:
    description:
      - Objects to delete after the rollout when they exist (C(apiVersion), C(kind),
        C(metadata.name) and C(metadata.namespace)), in order; those of components switched off.
    type: list
    elements: dict
    default: []
  karmada_kubeconfig:
    description:
      - Path of a kubeconfig for karmada-apiserver. With it, a step that changed passes only
        once its C(lease) is held by one of its ready pods and its C(admission) object is
        admitted (C(reason) C(NotServing) otherwise).
    type: path
author: Karmada-Operator developers
"""

EXAMPLES = r"""
- name: Roll out the components
  karmada_rollout:
    namespace: karmada-system
    steps: "{{ karmada_deployment_rollout_steps }}"
    timeout: 300
    owner: "{{ karmada_deployment_cr }}"
"""

RETURN = r"""
deleted:
  description: C(Kind/name) of each object of I(absent) that existed and was deleted.
  returned: success
  type: list
steps:
  description: One entry per step that passed its gate (name, changed, version, started, finished, seconds, pods).
  returned: always
  type: list
done:
  description: On failure, the steps that passed their gate before the one that stopped the run.
  returned: failure
  type: list
component:
  description: On failure, the component that stopped the run.
  returned: failure
  type: str
"""

import contextlib  # noqa: E402
from datetime import UTC, datetime  # noqa: E402

from ansible.module_utils.basic import AnsibleModule  # noqa: E402
from ansible.module_utils.cr_pass import event_object  # noqa: E402
from ansible.module_utils.karmada_kube import Kube, KubeConfigError, KubeError  # noqa: E402
from ansible.module_utils.karmada_rollout import RolloutStopped, Step, StepResult, remove, rollout  # noqa: E402


def main() -> None:
    module = AnsibleModule(
        argument_spec={
            "namespace": {"type": "str", "required": True},
            "steps": {"type": "list", "elements": "dict", "required": True},
            "timeout": {"type": "int", "default": 300},
            "poll": {"type": "int", "default": 2},
            "stuck_after": {"type": "int", "default": 60},
            "owner": {"type": "dict"},
            "kubeconfig": {"type": "path"},
            "karmada_kubeconfig": {"type": "path"},
            "absent": {"type": "list", "elements": "dict", "default": []},
        },
        supports_check_mode=False,
    )
    p = module.params
    try:
        steps = [Step(name=s["name"], objects=list(s["objects"]), deployment=s["deployment"],
                      container=s["container"], selector=s["selector"], replicas=int(s["replicas"]),
                      lease=str(s.get("lease") or ""), admission=dict(s.get("admission") or {}))
                 for s in p["steps"]]
    except (KeyError, TypeError, ValueError) as exc:
        module.fail_json(msg=f"steps: each needs name, objects, deployment, container, selector, replicas ({exc})")
    owner = p["owner"]
    try:
        # Applies through the runtime's proxy when it runs us (dependent watches), as
        # kubernetes.core would; the gates read the API server itself (the proxy's cache lags).
        kube = Kube.default(p["kubeconfig"])
        live = Kube.default(p["kubeconfig"], in_cluster_first=True)
        karmada = Kube.from_file(p["karmada_kubeconfig"]) if p["karmada_kubeconfig"] else None
    except KubeConfigError as exc:
        module.fail_json(msg=str(exc))

    def tell(result: StepResult) -> None:
        if owner and result.changed:
            message = (f"{result.name} rolled out: {result.version or 'no ready pod'} on "
                       f"{len(result.pods)} pod(s) in {result.seconds:.0f} s")
            kube.create(event_object(owner, {"type": "Normal", "reason": "ComponentRolledOut",
                                             "message": message}, datetime.now(UTC)))

    with kube, live, (karmada or contextlib.nullcontext()):
        try:
            results = rollout(kube, steps, p["namespace"], timeout=float(p["timeout"]), poll=float(p["poll"]),
                              stuck_after=float(p["stuck_after"]), reader=live, karmada=karmada, owner=owner,
                              on_step=tell)
            deleted = remove(kube, p["absent"])
        except RolloutStopped as exc:
            if owner:
                kube.create(event_object(owner, {"type": "Warning", "reason": "RolloutStopped",
                                                 "message": str(exc)}, datetime.now(UTC)))
            module.fail_json(msg=str(exc), reason=exc.reason, component=exc.component,
                             done=[r.as_dict() for r in exc.done], changed=any(r.changed for r in exc.done))
        except KubeError as exc:
            module.fail_json(msg=f"{exc.status} {exc.reason}: {exc.message}")
    module.exit_json(changed=any(r.changed for r in results) or bool(deleted), steps=[r.as_dict() for r in results],
                     deleted=deleted)


if __name__ == "__main__":
    main()
