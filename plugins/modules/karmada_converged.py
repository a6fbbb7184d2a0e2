#!/usr/bin/python
"""Has anything changed since the last full pass of a KarmadaDeployment? (module_utils/karmada_converged.py)"""

from __future__ import annotations

DOCUMENTATION = r"""
---
module: karmada_converged
short_description: Decide whether a reconcile may end early, and record what a full pass converged
description:
  - With I(mode=check), compares what the last full pass recorded in C(status.converged) with the
    KarmadaDeployment I(cr) and the objects it owns now (listed by I(selector) in I(namespace)), and
    reads every member's Cluster through karmada-apiserver; C(converged) is true only when nothing
    changed, everything is Ready and nothing is due (docs/performance.md lists the rules).
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
    description: Digest of the operator's code (the C(karmada_build_id) filter).
    type: str
    required: true
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
"""

import base64  # noqa: E402
from datetime import UTC, datetime  # noqa: E402

from ansible.module_utils.basic import AnsibleModule  # noqa: E402
from ansible.module_utils.karmada_converged import (  # noqa: E402
    OWNED_KINDS,
    decide,
    record,
    unready_members,
)
from ansible.module_utils.karmada_kube import Kube, KubeConfigError, KubeError, root_cause  # noqa: E402
from ansible.module_utils.karmada_pki import PkiInputError, renewal_window  # noqa: E402


def owned(kube: Kube, namespace: str, selector: str) -> list[dict]:
    objects = []
    for api_version, kind in OWNED_KINDS:
        for obj in kube.list(api_version, kind, namespace=namespace, label_selector=selector):
            objects.append({"kind": kind, **obj})
    return objects


def service_ips(objects: list[dict]) -> dict[str, str]:
    return {o["metadata"]["name"]: (o.get("spec") or {}).get("clusterIP") or ""
            for o in objects if o["kind"] == "Service"}


def members_check(kube: Kube, cr: dict, secret_name: str) -> str:
    """Empty when every member's Cluster is Ready, else why not."""
    converged = (cr.get("status") or {}).get("converged") or {}
    secret = kube.get("v1", "Secret", secret_name, cr["metadata"]["namespace"])
    text = base64.b64decode(((secret or {}).get("data") or {}).get("kubeconfig") or "").decode()
    if not text:
        return f"no admin kubeconfig in Secret {secret_name}"
    try:
        with Kube.from_kubeconfig(text, server=converged.get("server") or "",
                                  tls_server_name=converged.get("tlsServerName") or "", timeout=10,
                                  where=f"Secret {secret_name}") as karmada:
            clusters = karmada.list("cluster.karmada.io/v1alpha1", "Cluster")
    except (KubeError, KubeConfigError, OSError) as exc:
        return f"karmada-apiserver not read: {root_cause(exc)}"
    missing = unready_members(cr, clusters)
    return f"members not Ready in karmada-apiserver: {', '.join(missing)}" if missing else ""


def main() -> None:
    module = AnsibleModule(
        argument_spec={
            "mode": {"type": "str", "choices": ["check", "record"], "required": True},
            "cr": {"type": "dict", "required": True},
            "namespace": {"type": "str", "required": True},
            "selector": {"type": "str", "required": True},
            "build": {"type": "str", "required": True},
            "recheck_after": {"type": "int", "default": 3600},
            "admin_kubeconfig_secret": {"type": "str"},
            "certificates": {"type": "list", "elements": "dict", "default": []},
            "server": {"type": "str", "default": ""},
            "tls_server_name": {"type": "str", "default": ""},
            "kubeconfig": {"type": "path"},
        },
        supports_check_mode=False,
    )
    p = module.params
    cr = p["cr"]
    now = datetime.now(UTC)
    try:
        # The API server itself, not the runtime's cache: what the last pass applied must show.
        with Kube.default(p["kubeconfig"], in_cluster_first=True) as kube:
            objects = owned(kube, p["namespace"], p["selector"])
            if p["mode"] == "check":
                decision = decide(cr, objects, p["build"], now, float(p["recheck_after"]))
                reason = decision.reason
                if decision.converged and p["admin_kubeconfig_secret"] and (cr.get("spec") or {}).get("members"):
                    reason = members_check(kube, cr, p["admin_kubeconfig_secret"]) or reason
                module.exit_json(changed=False, converged=decision.converged and reason == decision.reason,
                                 control_plane=decision.control_plane, reason=reason,
                                 service_ips=service_ips(objects))
            try:
                window = renewal_window((cr.get("spec") or {}).get("certificates") or {})
            except PkiInputError as exc:
                module.fail_json(msg=str(exc))
            previous = ((cr.get("status") or {}).get("converged") or {}).get("fingerprint")
            converged = record(cr, objects, p["build"], now, p["certificates"], window, p["server"],
                               p["tls_server_name"])
            kube.merge_patch(cr["apiVersion"], cr["kind"], cr["metadata"]["name"], {"status": {"converged": converged}},
                             namespace=p["namespace"], subresource="status")
    except (KubeError, KubeConfigError) as exc:
        module.fail_json(msg=str(exc))
    module.exit_json(changed=converged["fingerprint"] != previous, converged=True,
                     reason=f"recorded the full pass at {converged['at']}")


if __name__ == "__main__":
    main()
