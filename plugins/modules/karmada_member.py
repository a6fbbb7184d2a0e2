#!/usr/bin/python
"""Join member clusters to Karmada (Push or Pull) or take them out, all at once, idempotently."""

from __future__ import annotations

DOCUMENTATION = r"""
---
module: karmada_member
short_description: Register member clusters with a Karmada control plane, or unregister them, all at once
description:
  - Every member in O(members) is joined (C(state=present)) or unjoined (C(state=absent)) at the same
    time, one thread per member in this one module process, each with its own API clients.
  - C(state=present) joins the member. Push mode makes a service account with full access, an
    impersonator service account and their tokens in the member, then the credential Secrets and
    the C(Cluster) object in Karmada. Pull mode grants the agent's RBAC in Karmada, issues the agent
    a client certificate signed by the Karmada CA, and runs karmada-agent (in the member, or in the
    host cluster with C(agent_placement=Host)). Both then wait until Karmada reports the Cluster Ready.
  - C(state=absent) deletes the Cluster, waits until Karmada has withdrawn its work from the member,
    then removes what the join made on both sides. A member that cannot be reached is still removed
    from Karmada after O(wait_timeout) and its state stays C(Unjoining) with the reason.
  - Problems with one member (missing Secret, invalid kubeconfig, unreachable API server, no token,
    even a bug in the join code) never fail the task and never stop the other members; they come
    back in that member's RV(members) entry as C(state), C(reason) and C(message).
  - Credentials are read from Secrets by the module itself and never pass through task arguments
    or results.
options:
  members:
    description: The members to join or unjoin.
    type: list
    elements: dict
    required: true
    suboptions:
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
      kubeconfig_secret:
        description:
          - The member's kubeconfig in the host cluster, C({name, key, namespace}).
          - The namespace defaults to O(namespace).
        type: dict
        required: true
  namespace:
    description: Namespace of the KarmadaDeployment in the host cluster (its Secrets live there).
    type: str
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
    description: Seconds to wait for each Cluster to turn Ready (join) or to go (unjoin).
    type: int
    default: 180
  teardown:
    description:
      - The whole Karmada is being deleted (unjoins only). Once Karmada has withdrawn a member's
        work (its execution namespace is gone), the Cluster is released without waiting for the
        rest of Karmada's bookkeeping (bindings still naming it), which cannot finish when every
        cluster goes at once.
    type: bool
    default: false
  request_timeout:
    description: Seconds to wait for each API answer.
    type: int
    default: 20
  workers:
    description: At most this many members are worked on at the same time.
    type: int
    default: 32
author: Karmada-Operator developers
"""

EXAMPLES = r"""
- name: Join member1 in Push mode and take member2 out
  karmada_member:
    namespace: karmada-system
    karmada: {admin_kubeconfig_secret: karmada-admin-kubeconfig}
    members:
      - name: member1
        kubeconfig_secret: {name: member1-kubeconfig, key: kubeconfig}
        region: eu-west-1
        labels: {env: prod}
      - name: member2
        state: absent
        kubeconfig_secret: {name: member2-kubeconfig, key: kubeconfig}
  register: joined
"""

RETURN = r"""
members:
  description:
    - Member name -> its result. C(state) is Joined, Joining (waiting for Ready), Failed (could not
      act), Unjoining or Unjoined; C(ready) says Karmada reports the Cluster Ready; C(reason) is
      CamelCase (ClusterReady, MemberUnreachable, KubeconfigSecretMissing, ...); C(message) says
      what happened; C(changes) lists the objects created, changed or deleted (kind and name, never
      contents); C(cluster_id) is the UID of the member's kube-system namespace (Push joins).
  returned: always
  type: dict
"""

from ansible.module_utils.basic import AnsibleModule  # noqa: E402

from karmada_operator.members.join import ARGUMENT_SPEC, run
from karmada_operator.task import module_main


def main() -> None:
    module_main(AnsibleModule(argument_spec=ARGUMENT_SPEC, supports_check_mode=False), run)


if __name__ == "__main__":
    main()
