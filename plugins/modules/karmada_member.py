#!/usr/bin/python
"""Join a member cluster to Karmada (Push or Pull) or take it out, idempotently."""

from __future__ import annotations

DOCUMENTATION = r"""
---
module: karmada_member
short_description: Register a member cluster with a Karmada control plane, or unregister it
description:
  - C(state=present) joins the member. Push mode makes a service account with full access, an
    impersonator service account and their tokens in the member, then the credential Secrets and
    the C(Cluster) object in Karmada. Pull mode grants the agent's RBAC in Karmada, issues the agent
    a client certificate signed by the Karmada CA, and runs karmada-agent (in the member, or in the
    host cluster with O(agent_placement=Host)). Both then wait until Karmada reports the Cluster Ready.
  - C(state=absent) deletes the Cluster, waits until Karmada has withdrawn its work from the member,
    then removes what the join made on both sides. A member that cannot be reached is still removed
    from Karmada after O(wait_timeout) and RV(state) stays C(Unjoining) with the reason.
  - Problems with the member (missing Secret, invalid kubeconfig, unreachable API server, no token)
    never fail the task; they come back as RV(state), RV(reason) and RV(message) so the caller can
    write them into status and go on with the other members.
  - Credentials are read from Secrets by the module itself and never pass through task arguments
    or results.
options:
  name:
    description: Cluster name in Karmada.
    type: str
    required: true
  state:
    description: V(present) joins (or keeps joined), V(absent) unjoins.
    type: str
    choices: [present, absent]
    default: present
  sync_mode:
    description: Push or Pull.
    type: str
    choices: [Push, Pull]
    default: Push
  provider:
    description: Provider copied to the Cluster.
    type: str
    default: ""
  region:
    description: Region copied to the Cluster.
    type: str
    default: ""
  zones:
    description: Zones copied to the Cluster.
    type: list
    elements: str
    default: []
  labels:
    description: Labels put on the Cluster.
    type: dict
    default: {}
  taints:
    description: Taints put on the Cluster (key, value, effect).
    type: list
    elements: dict
    default: []
  agent_placement:
    description: Where a Pull member's karmada-agent runs.
    type: str
    choices: [Member, Host]
    default: Member
  namespace:
    description: Namespace of the KarmadaDeployment in the host cluster (its Secrets live there).
    type: str
    required: true
  kubeconfig_secret:
    description:
      - The member's kubeconfig in the host cluster, C({name, key, namespace}).
      - The namespace defaults to O(namespace).
    type: dict
    required: true
  karmada:
    description:
      - How to reach karmada-apiserver. C(admin_kubeconfig_secret) names the Secret (key C(kubeconfig))
        with the admin kubeconfig; C(server) and C(tls_server_name) override its address (e.g. the
        Service's ClusterIP with the name the certificate carries).
    type: dict
    required: true
  pki_secret:
    description: Secret with the Karmada CA (C(ca.crt), C(ca.key)); needed for Pull members.
    type: str
    default: ""
  agent:
    description:
      - karmada-agent settings for Pull members. C(image), C(pull_policy), C(pull_secrets),
        C(karmada_server_in_cluster) (address for an agent in the host cluster),
        C(karmada_server_external) (address for an agent in the member), C(owner_labels)
        (labels put on objects made in the host cluster).
    type: dict
    default: {}
  wait_timeout:
    description: Seconds to wait for the Cluster to turn Ready (join) or to go (unjoin).
    type: int
    default: 180
  teardown:
    description:
      - The whole Karmada is being deleted (state C(absent) only). Once Karmada has withdrawn the
        member's work (its execution namespace is gone), the Cluster is released without waiting
        for the rest of Karmada's bookkeeping (bindings still naming it), which cannot finish when
        every cluster goes at once.
    type: bool
    default: false
  request_timeout:
    description: Seconds to wait for each API answer.
    type: int
    default: 20
author: Karmada-Operator developers
"""

EXAMPLES = r"""
- name: Join member1 in Push mode
  karmada_member:
    name: member1
    namespace: karmada-system
    kubeconfig_secret: {name: member1-kubeconfig, key: kubeconfig}
    karmada: {admin_kubeconfig_secret: karmada-admin-kubeconfig}
    region: eu-west-1
    labels: {env: prod}
  register: joined

- name: Take member2 out
  karmada_member:
    name: member2
    state: absent
    namespace: karmada-system
    kubeconfig_secret: {name: member2-kubeconfig, key: kubeconfig}
    karmada: {admin_kubeconfig_secret: karmada-admin-kubeconfig}
"""

RETURN = r"""
state:
  description: Joined, Joining (waiting for Ready), Failed (could not act), Unjoining or Unjoined.
  returned: always
  type: str
ready:
  description: Karmada reports the Cluster Ready.
  returned: always
  type: bool
reason:
  description: CamelCase reason, e.g. ClusterReady, MemberUnreachable, KubeconfigSecretMissing.
  returned: always
  type: str
message:
  description: What happened, in a sentence.
  returned: always
  type: str
changes:
  description: The objects created, changed or deleted (kind and name, never contents).
  returned: always
  type: list
  elements: str
cluster_id:
  description: UID of the member's kube-system namespace (Push joins), as karmadactl records it.
  returned: always
  type: str
"""

import base64  # noqa: E402
import binascii  # noqa: E402

from ansible.module_utils.basic import AnsibleModule  # noqa: E402
from ansible.module_utils.karmada_kube import Kube, KubeConfigError, KubeError, load_kubeconfig_text  # noqa: E402
from ansible.module_utils.karmada_member_join import (  # noqa: E402
    AgentSettings,
    Clients,
    Joiner,
    MemberProblem,
    MemberSpec,
)


def secret_value(host: Kube, namespace: str, name: str, key: str, what: str) -> str:
    """A Secret's value as text; MemberProblem naming the Secret when it is missing or empty."""
    try:
        secret = host.get("v1", "Secret", name, namespace)
    except KubeError as exc:
        raise MemberProblem("HostUnreachable", f"reading Secret {namespace}/{name}: {exc.message}") from exc
    if secret is None:
        raise MemberProblem(f"{what}SecretMissing", f"Secret {namespace}/{name} ({what.lower()}) does not exist")
    raw = (secret.get("data") or {}).get(key)
    if not raw:
        raise MemberProblem(f"{what}SecretMissing", f"Secret {namespace}/{name} has no key {key!r}")
    try:
        return base64.b64decode(raw).decode()
    except (binascii.Error, UnicodeDecodeError) as exc:
        raise MemberProblem(f"Invalid{what}", f"Secret {namespace}/{name} key {key!r} is not text: {exc}") from exc


def main() -> None:
    module = AnsibleModule(
        argument_spec={
            "name": {"type": "str", "required": True},
            "state": {"type": "str", "choices": ["present", "absent"], "default": "present"},
            "sync_mode": {"type": "str", "choices": ["Push", "Pull"], "default": "Push"},
            "provider": {"type": "str", "default": ""},
            "region": {"type": "str", "default": ""},
            "zones": {"type": "list", "elements": "str", "default": []},
            "labels": {"type": "dict", "default": {}},
            "taints": {"type": "list", "elements": "dict", "default": []},
            "agent_placement": {"type": "str", "choices": ["Member", "Host"], "default": "Member"},
            "namespace": {"type": "str", "required": True},
            "kubeconfig_secret": {"type": "dict", "required": True},
            "karmada": {"type": "dict", "required": True},
            "pki_secret": {"type": "str", "default": ""},
            "agent": {"type": "dict", "default": {}},
            "wait_timeout": {"type": "int", "default": 180},
            "teardown": {"type": "bool", "default": False},
            "request_timeout": {"type": "int", "default": 20},
        },
        supports_check_mode=False,
    )
    p = module.params
    spec = MemberSpec(name=p["name"], sync_mode=p["sync_mode"], provider=p["provider"] or "",
                      region=p["region"] or "", zones=list(p["zones"]),
                      labels={str(k): str(v) for k, v in p["labels"].items()},
                      taints=[{k: str(v) for k, v in t.items() if v not in (None, "")} for t in p["taints"]],
                      agent_placement=p["agent_placement"])
    try:
        host = Kube.default(timeout=p["request_timeout"])
    except KubeConfigError as exc:
        module.fail_json(msg=f"cannot load credentials for the host cluster: {exc}")
    ns = p["namespace"]
    ref = p["kubeconfig_secret"]
    karmada_opts = p["karmada"]

    def member_kubeconfig() -> dict:
        if not ref.get("name"):
            raise MemberProblem("KubeconfigSecretMissing", "no kubeconfig Secret is known for this member")
        text = secret_value(host, ref.get("namespace") or ns, ref["name"], ref.get("key") or "kubeconfig",
                            "Kubeconfig")
        try:
            return load_kubeconfig_text(text)
        except ValueError as exc:
            raise MemberProblem("InvalidKubeconfig", f"Secret {ref['name']} does not hold a usable kubeconfig: "
                                f"{exc}") from exc

    def karmada_client() -> Kube:
        name = karmada_opts["admin_kubeconfig_secret"]
        text = secret_value(host, ns, name, "kubeconfig", "KarmadaKubeconfig")
        try:
            return Kube.from_kubeconfig(text, timeout=p["request_timeout"], server=karmada_opts.get("server") or "",
                                        tls_server_name=karmada_opts.get("tls_server_name") or "",
                                        where=f"Secret {ns}/{name}")
        except KubeConfigError as exc:
            raise MemberProblem("InvalidKarmadaKubeconfig", str(exc)) from None

    clients = Clients(host=host, karmada_factory=karmada_client, member_kubeconfig=member_kubeconfig,
                      timeout=p["request_timeout"])
    agent_opts = p["agent"] or {}
    agent = AgentSettings(image=agent_opts.get("image") or "", pull_policy=agent_opts.get("pull_policy") or
                          "IfNotPresent", pull_secrets=list(agent_opts.get("pull_secrets") or []),
                          host_namespace=ns,
                          karmada_server_in_cluster=agent_opts.get("karmada_server_in_cluster") or "",
                          karmada_server_external=agent_opts.get("karmada_server_external") or "",
                          owner={str(k): str(v) for k, v in (agent_opts.get("owner_labels") or {}).items()})
    try:
        ca = None
        if p["sync_mode"] == "Pull" and p["state"] == "present":
            ca = (secret_value(host, ns, p["pki_secret"], "ca.crt", "Pki"),
                  secret_value(host, ns, p["pki_secret"], "ca.key", "Pki"))
        joiner = Joiner(spec, clients, agent=agent, ca=ca, wait=p["wait_timeout"], teardown=p["teardown"])
        result = joiner.join() if p["state"] == "present" else joiner.unjoin()
        out = result.as_dict()
    except MemberProblem as exc:
        out = {"state": "Failed" if p["state"] == "present" else "Unjoining", "ready": False,
               "reason": exc.reason, "message": exc.message, "changed": False, "changes": [], "cluster_id": ""}
    finally:
        clients.close()
        host.close()
    module.exit_json(**out)


if __name__ == "__main__":
    main()
