#!/usr/bin/python
"""Ansible module etcd_restore_plan: plan restoring a snapshot into a new etcd cluster."""

from __future__ import annotations

DOCUMENTATION = r"""
---
module: etcd_restore_plan
short_description: Plan restoring an etcd snapshot into a new cluster (names, URLs, token, etcdutl argv)
description:
  - Pure computation, nothing is touched. For N new members returns names, peer and client
    URLs, the C(--initial-cluster) value, a fresh cluster token, data dirs and, per member,
    the C(etcdutl snapshot restore) argv (with C(--bump-revision) and C(--mark-compacted)) and
    the etcd start flags.
  - Give the members either as an explicit O(members) list or as O(replicas) with URL
    templates (C({name}) and C({index}) are replaced).
  - Verify the snapshot first (M(etcd_snapshot) with C(verify_only=true)); run the argv lists
    with M(ansible.builtin.command) C(argv:) before starting any member.
version_added: "0.1.0"
author: Karmada-Operator maintainers
options:
  snapshot:
    description: Path of the snapshot file as the restore will see it.
    type: path
    required: true
  members:
    description: Explicit members, each with C(name), C(peer_url), C(client_url) and optional C(data_dir).
    type: list
    elements: dict
  replicas:
    description: Number of members to generate when O(members) is not given.
    type: int
  name_prefix:
    description: Generated names are C(<name_prefix><index>).
    type: str
    default: etcd-
  peer_url_template:
    description: Peer URL of a generated member, e.g. V(https://{name}.karmada-etcd.karmada-system.svc:2380).
    type: str
  client_url_template:
    description: Client URL of a generated member, e.g. V(https://{name}.karmada-etcd.karmada-system.svc:2379).
    type: str
  data_dir_root:
    description: Data dirs default to C(<data_dir_root>/<name>).
    type: path
    default: /var/lib/etcd
  wal_dir_root:
    description: When set, WAL dirs are C(<wal_dir_root>/<name>).
    type: path
  cluster_token:
    description: C(--initial-cluster-token); a fresh random one by default (recommended).
    type: str
  bump_revision:
    description: How much to raise the revision after restore (more than the writes since the backup).
    type: int
    default: 1000000000
  mark_compacted:
    description: Pass C(--mark-compacted) (required by etcdutl when O(bump_revision) > 0).
    type: bool
    default: true
  etcdutl:
    description: etcdutl binary to put at the start of each argv.
    type: str
    default: etcdutl
"""

EXAMPLES = r"""
- name: Plan the restore into a new 3-member cluster
  etcd_restore_plan:
    snapshot: /backups/karmada-etcd.db
    replicas: 3
    name_prefix: karmada-etcd-
    peer_url_template: "https://{name}.karmada-etcd.karmada-system.svc:2380"
    client_url_template: "https://{name}.karmada-etcd.karmada-system.svc:2379"
    data_dir_root: /var/lib/etcd-restored
  register: plan

- name: Restore every member's data dir
  ansible.builtin.command:
    argv: "{{ item.restore_argv }}"
  loop: "{{ plan.members }}"
"""

RETURN = r"""
cluster_token:
  description: The new cluster's C(--initial-cluster-token).
  returned: always
  type: str
initial_cluster:
  description: C(--initial-cluster) of the new cluster.
  returned: always
  type: str
bump_revision:
  description: The revision bump used.
  returned: always
  type: int
members:
  description:
    - Per member C(name), C(peer_url), C(client_url), C(data_dir), C(wal_dir),
      C(restore_argv) and C(etcd_args).
  returned: always
  type: list
  elements: dict
"""

from typing import Any

from ansible.module_utils.basic import AnsibleModule

from karmada_operator.backup.restore_plan import RestorePlanError, expand_members, plan_restore

ARGUMENT_SPEC: dict[str, Any] = {
    "snapshot": {"type": "path", "required": True},
    "members": {"type": "list", "elements": "dict"},
    "replicas": {"type": "int"},
    "name_prefix": {"type": "str", "default": "etcd-"},
    "peer_url_template": {"type": "str"},
    "client_url_template": {"type": "str"},
    "data_dir_root": {"type": "path", "default": "/var/lib/etcd"},
    "wal_dir_root": {"type": "path"},
    "cluster_token": {"type": "str", "no_log": False},
    "bump_revision": {"type": "int", "default": 1_000_000_000},
    "mark_compacted": {"type": "bool", "default": True},
    "etcdutl": {"type": "str", "default": "etcdutl"},
}


def run_module(params: dict[str, Any], check_mode: bool = False) -> dict[str, Any]:
    members = params.get("members")
    if not members:
        if (
            not params.get("replicas")
            or not params.get("peer_url_template")
            or not params.get("client_url_template")
        ):
            raise RestorePlanError(
                "members", "give members, or replicas with peer_url_template and client_url_template"
            )
        members = expand_members(
            params["replicas"],
            params.get("name_prefix") or "etcd-",
            params["peer_url_template"],
            params["client_url_template"],
        )
    plan = plan_restore(
        params["snapshot"],
        members,
        params.get("data_dir_root") or "/var/lib/etcd",
        cluster_token=params.get("cluster_token"),
        bump_revision=params.get("bump_revision", 1_000_000_000),
        mark_compacted=params.get("mark_compacted", True),
        etcdutl=params.get("etcdutl") or "etcdutl",
        wal_dir_root=params.get("wal_dir_root"),
    )
    return {"changed": False, **plan.as_dict()}


def main() -> None:
    module = AnsibleModule(
        argument_spec=ARGUMENT_SPEC, supports_check_mode=True, mutually_exclusive=[("members", "replicas")]
    )
    try:
        result = run_module(module.params, module.check_mode)
    except RestorePlanError as exc:
        module.fail_json(msg=str(exc), field=exc.field)
    module.exit_json(**result)


if __name__ == "__main__":
    main()
