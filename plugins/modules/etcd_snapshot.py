#!/usr/bin/python
"""Ansible module etcd_snapshot: save a verified etcd snapshot to a file."""

from __future__ import annotations

DOCUMENTATION = r"""
---
module: etcd_snapshot
short_description: Save an etcd snapshot to a file, verified by the sha256 etcd sends with it
description:
  - Streams C(/v3/maintenance/snapshot) from one member into O(path) (through C(<path>.part),
    renamed only once the sha256 trailer etcd appends matches the data), the same bytes
    C(etcdctl snapshot save) writes, so C(etcdutl snapshot restore) accepts the file.
  - Returns size, sha256 of the file, the store revision the snapshot holds and the etcd version.
  - With O(verify_only=true) checks an existing file instead (truncation, sha256 trailer,
    readable database) and saves nothing; use it before a restore.
version_added: "0.1.0"
author: Karmada-Operator maintainers
extends_documentation_fragment: [etcd_connection]
options:
  endpoints:
    description: Client URLs of members; the snapshot comes from O(endpoint) or the first that answers.
  endpoint:
    description: Take the snapshot from this member (prefer a follower to spare the leader).
    type: str
  timeout:
    description: Seconds to wait between two chunks of the stream.
    type: float
    default: 60.0
  path:
    description: File to write (its directory is created). An existing file is replaced.
    type: path
    required: true
  verify_only:
    description: Only verify the existing file at O(path).
    type: bool
    default: false
"""

EXAMPLES = r"""
- name: Back up etcd
  etcd_snapshot:
    endpoints: "{{ etcd_client_urls }}"
    cert: /etc/karmada/pki/etcd/healthcheck-client.crt
    key: /etc/karmada/pki/etcd/healthcheck-client.key
    ca: /etc/karmada/pki/etcd/ca.crt
    path: /backups/karmada-etcd-{{ ansible_date_time.iso8601_basic_short }}.db
  register: backup

- name: Verify a snapshot before restoring it
  etcd_snapshot:
    endpoints: ["https://127.0.0.1:2379"]
    path: /backups/karmada-etcd.db
    verify_only: true
"""

RETURN = r"""
path:
  description: The snapshot file.
  returned: always
  type: str
size:
  description: Size of the file in bytes (database plus the 32-byte sha256 trailer).
  returned: always
  type: int
sha256:
  description: sha256 of the whole file, hex.
  returned: always
  type: str
revision:
  description: Latest store revision in the snapshot.
  returned: always
  type: int
etcd_version:
  description: Server version of the member the snapshot came from.
  returned: when a snapshot was saved
  type: str
storage_version:
  description: Storage version reported in the snapshot stream (etcd >= 3.6).
  returned: when a snapshot was saved
  type: str
duration_seconds:
  description: Time to stream and verify.
  returned: when a snapshot was saved
  type: float
"""

from typing import Any

from ansible.module_utils.basic import AnsibleModule

from karmada_operator.etcd.gateway import CONNECTION_ARGS, client_from_params, module_result
from karmada_operator.etcd.snapshots import save_snapshot, verify_snapshot

ARGUMENT_SPEC: dict[str, Any] = {
    **CONNECTION_ARGS,
    "timeout": {"type": "float", "default": 60.0},
    "endpoint": {"type": "str"},
    "path": {"type": "path", "required": True},
    "verify_only": {"type": "bool", "default": False},
}


def run_module(params: dict[str, Any], check_mode: bool = False) -> dict[str, Any]:
    if params.get("verify_only"):
        return {"changed": False, **verify_snapshot(params["path"])}
    client = client_from_params(params)
    if check_mode:
        return {"changed": True, "path": params["path"]}
    result = save_snapshot(
        client, params["path"], endpoint=params.get("endpoint"), chunk_timeout=float(params.get("timeout") or 60.0)
    )
    return {"changed": True, **result.as_dict()}


def main() -> None:
    module = AnsibleModule(argument_spec=ARGUMENT_SPEC, supports_check_mode=True)
    module.exit_json(**module_result(module, run_module))


if __name__ == "__main__":
    main()
