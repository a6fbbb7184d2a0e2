#!/usr/bin/python
"""Ansible module etcd_member: add (as learner, then promote) or remove one etcd member."""

from __future__ import annotations

DOCUMENTATION = r"""
---
module: etcd_member
short_description: Add or remove an etcd member safely over the v3 HTTP gateway
description:
  - C(state=present) adds the member as a B(learner) when it is missing and returns the
    C(--initial-cluster) value its etcd process must start with
    (C(--initial-cluster-state existing)). When the member is a learner and O(promote) is true,
    it is promoted to a voting member once it has caught up with the leader, waiting at most
    O(wait_timeout) seconds.
  - Typical use is two calls around starting the process. First call with C(promote=false) to
    add the learner, then start etcd, then call again with C(promote=true).
  - C(state=absent) removes the member. A removal that would leave fewer healthy voting members
    than a quorum is refused unless O(force=true). When the member is the leader, leadership
    is moved to a healthy voter first.
  - Talks to etcd's v3 JSON gateway with client TLS; no etcdctl or grpc needed.
version_added: "0.1.0"
author: Karmada-Operator maintainers
extends_documentation_fragment: [etcd_connection]
options:
  name:
    description:
      - The member's etcd C(--name). Required with C(state=present).
      - With C(state=absent), one of O(name), O(member_id) or O(peer_urls) identifies the member.
    type: str
  peer_urls:
    description: The member's C(--initial-advertise-peer-urls). Required with C(state=present).
    type: list
    elements: str
  member_id:
    description:
      - Hex member ID as C(etcdctl member list) prints it, for C(state=absent).
      - Unlike O(name), an ID that is not in the cluster is an error.
    type: str
  state:
    description: Whether the member should be in the cluster.
    type: str
    choices: [present, absent]
    default: present
  promote:
    description: Promote the learner to a voting member (waits until it has caught up).
    type: bool
    default: true
  force:
    description: Remove even when the remaining healthy voters would be below quorum (accepts an outage).
    type: bool
    default: false
  wait_timeout:
    description: Seconds to wait for a learner to catch up, or for leadership to move.
    type: float
    default: 120
notes:
  - Supports check mode.
  - A removed member's etcd process exits; its data dir must not be reused. Re-add with a new data dir.
"""

EXAMPLES = r"""
- name: Scale etcd (connection options given once for every etcd_member task of the block)
  module_defaults:
    etcd_member:
      endpoints: "{{ etcd_client_urls }}"
      cert: /etc/karmada/pki/etcd/healthcheck-client.crt
      key: /etc/karmada/pki/etcd/healthcheck-client.key
      ca: /etc/karmada/pki/etcd/ca.crt
  block:
    - name: Add karmada-etcd-3 as a learner
      etcd_member:
        name: karmada-etcd-3
        peer_urls: ["https://karmada-etcd-3.karmada-etcd.karmada-system.svc:2380"]
        promote: false
      register: added
    # start the member with --initial-cluster "{{ added.initial_cluster }}" --initial-cluster-state existing

    - name: Promote it once it has caught up
      etcd_member:
        name: karmada-etcd-3
        peer_urls: ["https://karmada-etcd-3.karmada-etcd.karmada-system.svc:2380"]
        wait_timeout: 300

    - name: Remove a member (refused if it would break quorum)
      etcd_member:
        name: karmada-etcd-4
        state: absent
"""

RETURN = r"""
member_id:
  description: Hex ID of the member (empty when it was already absent).
  returned: always
  type: str
  sample: 8e9e05c52164694d
name:
  description: Name of the member.
  returned: always
  type: str
learner:
  description: Whether the member is still a learner (C(state=present)).
  returned: when state is present
  type: bool
added:
  description: The member was added by this call.
  returned: when state is present
  type: bool
promoted:
  description: The member was promoted by this call.
  returned: when state is present
  type: bool
initial_cluster:
  description: Value for the joining member's C(--initial-cluster).
  returned: when state is present
  type: str
  sample: etcd-0=https://etcd-0:2380,etcd-1=https://etcd-1:2380
moved_leader:
  description: Leadership was moved away from the member before removing it.
  returned: when state is absent
  type: bool
members:
  description: The member list after the change (id, name, peer_urls, client_urls, is_learner).
  returned: always
  type: list
  elements: dict
"""

from typing import Any

from ansible.module_utils.basic import AnsibleModule

from karmada_operator.etcd.gateway import CONNECTION_ARGS, client_from_params, module_result
from karmada_operator.etcd.membership import ensure_member_absent, ensure_member_present

ARGUMENT_SPEC: dict[str, Any] = {
    **CONNECTION_ARGS,
    "name": {"type": "str"},
    "peer_urls": {"type": "list", "elements": "str"},
    "member_id": {"type": "str"},
    "state": {"type": "str", "choices": ["present", "absent"], "default": "present"},
    "promote": {"type": "bool", "default": True},
    "force": {"type": "bool", "default": False},
    "wait_timeout": {"type": "float", "default": 120.0},
}


def run_module(params: dict[str, Any], check_mode: bool = False) -> dict[str, Any]:
    """The module's work on already-parsed params; raises EtcdError subclasses on failure."""
    client = client_from_params(params)
    wait = float(params.get("wait_timeout") or 120.0)
    if params.get("state", "present") == "present":
        return ensure_member_present(
            client,
            params.get("name") or "",
            params.get("peer_urls") or [],
            promote=params.get("promote", True),
            wait_timeout=wait,
            check_mode=check_mode,
        )
    peer_urls = params.get("peer_urls") or []
    return ensure_member_absent(
        client,
        name=params.get("name"),
        member_id=params.get("member_id"),
        peer_url=peer_urls[0] if peer_urls else None,
        force=bool(params.get("force")),
        wait_timeout=wait,
        check_mode=check_mode,
    )


def main() -> None:
    module = AnsibleModule(
        argument_spec=ARGUMENT_SPEC,
        supports_check_mode=True,
        required_if=[("state", "present", ("name", "peer_urls"))],
        required_one_of=[("name", "member_id", "peer_urls")],
    )
    module.exit_json(**module_result(module, run_module))


if __name__ == "__main__":
    main()
