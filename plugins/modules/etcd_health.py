#!/usr/bin/python
"""Ansible module etcd_health: per-member and cluster health of an etcd cluster."""

from __future__ import annotations

DOCUMENTATION = r"""
---
module: etcd_health
short_description: Report the health of every etcd member and of the cluster
description:
  - Lists the members (linearizable, falling back to serializable when there is no quorum),
    then asks each member for its status over the v3 JSON gateway and does a serializable
    read on it, so a member is judged on its own answer.
  - A member is healthy when it answers, knows a leader, serves a read and has no alarm.
    The cluster has quorum when a majority of voting members (learners excluded) is healthy.
  - Never changes anything. With O(fail_without_quorum=true) the task fails when quorum is lost.
  - With O(etcd) (the plan's etcd slice) instead of O(endpoints), it is the etcd step's quorum
    gate - it reads the client pair from the Secret C(etcd.clientSecret) names (no key passes through
    the task's options or facts), dials a local etcd's members at their pods' addresses, and waits up
    to O(wait) seconds for a quorum with O(expect) members healthy (an external etcd - six looks,
    O(poll) seconds apart). Without a quorum then it fails with C(field), the spec field to look at.
version_added: "0.1.0"
author: Karmada-Operator maintainers
extends_documentation_fragment: [etcd_connection]
options:
  endpoints:
    description: Client URLs of members (V(https://host:2379)); required without O(etcd).
    type: list
    elements: str
    required: false
  etcd:
    description:
      - The plan's etcd slice (C(plan.etcd), module_utils/karmada_operator/plan/plan.py) - C(mode),
        C(namespace), C(clientSecret), C(replicas), and for a local etcd C(memberEndpoints), C(selector)
        and C(memberDomain), for an external one C(endpoints).
    type: dict
  expect:
    description: Members that must be healthy (default the slice's C(replicas), at least 1).
    type: int
  wait:
    description: Seconds the gate waits for a local etcd.
    type: float
    default: 600.0
  poll:
    description: Seconds between two looks.
    type: float
    default: 5.0
  kubeconfig:
    description: Path of a kubeconfig for reading the Secret and the pods (default as k8s_status).
    type: path
  fail_without_quorum:
    description: Fail the task when the cluster has no quorum.
    type: bool
    default: false
notes:
  - Supports check mode (it is read-only anyway).
"""

EXAMPLES = r"""
- name: Check etcd
  etcd_health:
    endpoints: "{{ etcd_client_urls }}"
    cert: /etc/karmada/pki/etcd/healthcheck-client.crt
    key: /etc/karmada/pki/etcd/healthcheck-client.key
    ca: /etc/karmada/pki/etcd/ca.crt
  register: etcd
  until: etcd.has_quorum and etcd.healthy_count == etcd.member_count
  retries: 30
  delay: 5
"""

RETURN = r"""
healthy:
  description: Quorum and every member healthy.
  returned: always
  type: bool
has_quorum:
  description: A majority of voting members is healthy.
  returned: always
  type: bool
healthy_count:
  description: Number of healthy members (learners included).
  returned: always
  type: int
member_count:
  description: Number of members in the member list.
  returned: always
  type: int
leader_id:
  description: Hex ID of the leader the members agree on (empty if none or disputed).
  returned: always
  type: str
alarms:
  description: Active alarms, C([{member_id, alarm}]).
  returned: always
  type: list
  elements: dict
members:
  description:
    - Per member C(id), C(name), C(client_urls), C(reachable), C(healthy), C(leader), C(learner),
      C(version), C(db_size), C(db_size_in_use), C(raft_index), C(raft_term), C(revision),
      C(alarms) and C(error) (what went wrong, empty when healthy).
  returned: always
  type: list
  elements: dict
"""

from ansible.module_utils.basic import AnsibleModule

from karmada_operator.task import module_main
from karmada_operator.tasks import etcd_health as task


def main() -> None:
    module_main(AnsibleModule(argument_spec=task.ARGUMENT_SPEC, supports_check_mode=task.SUPPORTS_CHECK_MODE), task.run)


if __name__ == "__main__":
    main()
