"""Member-cluster planning: KarmadaDeployment objects -> inventory hosts, vars and groups.

Pure functions over the objects as the API returns them (dicts); the inventory plugin
(plugins/inventory/karmada_members.py) fetches them and hands the result to Ansible.

Host names are ``<namespace>/<deployment>/<member>``: every part is a DNS-1123 name, so
the slashes can never be ambiguous, the name is unique across the whole host cluster, and
it reads like the object path a user knows (``kubectl -n <namespace> get kd <deployment>``).

Groups:

- ``add_member``: in spec, and not Joined in status or Joined with a recorded
  ``specHash`` different from the member's current hash (a missing hash counts as
  different: re-joining is idempotent, skipping a changed member is not safe).
- ``del_member``: in status with state Joined, Joining, Unjoining or Failed, no longer in
  spec. Its vars come from the status entry (the spec entry is gone).
- ``members_joined``: in spec, Joined, hash unchanged: nothing to do.
- ``karmada_<namespace>_<name>``: every host of one KarmadaDeployment.
- ``push`` / ``pull``: every host by sync mode.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass, field
from typing import Any

ADD_GROUP = "add_member"
DEL_GROUP = "del_member"
JOINED_GROUP = "members_joined"
SYNC_MODE_GROUPS = {"Push": "push", "Pull": "pull"}
DEFAULT_SYNC_MODE = "Push"
DEFAULT_KUBECONFIG_KEY = "kubeconfig"
# Status states of a member that may still be registered in Karmada, so unjoin must run.
REGISTERED_STATES = frozenset({"Joined", "Joining", "Unjoining", "Failed"})

_GROUP_UNSAFE = re.compile(r"[^A-Za-z0-9_]")


@dataclass
class MemberInventory:
    """What Ansible needs: host -> vars, group -> hosts (in a stable order)."""

    hosts: dict[str, dict[str, Any]] = field(default_factory=dict)
    groups: dict[str, list[str]] = field(default_factory=dict)

    def add(self, host: str, hostvars: dict[str, Any], groups: list[str]) -> None:
        self.hosts[host] = hostvars
        for group in groups:
            self.groups.setdefault(group, []).append(host)


def host_name(namespace: str, deployment: str, member: str) -> str:
    """The inventory host of a member: ``<namespace>/<deployment>/<member>``."""
    return f"{namespace}/{deployment}/{member}"


def sanitize_group(name: str) -> str:
    """A valid Ansible group name: letters, digits and underscores, not starting with a digit."""
    clean = _GROUP_UNSAFE.sub("_", name)
    return f"_{clean}" if clean[:1].isdigit() else clean


def deployment_group(namespace: str, name: str) -> str:
    return sanitize_group(f"karmada_{namespace}_{name}")


def normalized_member(member: dict[str, Any]) -> dict[str, Any]:
    """The spec entry with the API server's defaults filled in and empty optional fields dropped.

    So that ``{name, kubeconfigSecretRef: {name}}`` as written and the same entry as stored
    (with ``syncMode: Push`` and ``key: kubeconfig`` defaulted) hash the same.
    """
    out: dict[str, Any] = {k: v for k, v in member.items() if v not in (None, "", [], {})}
    ref = dict(out.get("kubeconfigSecretRef") or {})
    ref.setdefault("key", DEFAULT_KUBECONFIG_KEY)
    out["kubeconfigSecretRef"] = ref
    out.setdefault("syncMode", DEFAULT_SYNC_MODE)
    return out


def member_spec_hash(member: dict[str, Any]) -> str:
    """A short stable hash of a member's spec entry (key order and defaults do not change it)."""
    canonical = json.dumps(normalized_member(member), sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canonical.encode()).hexdigest()[:16]


def _owner(deployment: dict[str, Any]) -> dict[str, str]:
    meta = deployment.get("metadata") or {}
    return {"name": meta.get("name") or "", "namespace": meta.get("namespace") or "", "uid": meta.get("uid") or ""}


def _unique_names(members: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Entries with a name, first one kept per name (the API server already refuses duplicates)."""
    seen: set[str] = set()
    out = []
    for entry in members:
        name = (entry or {}).get("name")
        if isinstance(name, str) and name and name not in seen:
            seen.add(name)
            out.append(entry)
    return out


def _spec_member_vars(member: dict[str, Any], owner: dict[str, str], status: dict[str, Any],
                      action: str, reason: str) -> dict[str, Any]:
    spec = normalized_member(member)
    ref = spec["kubeconfigSecretRef"]
    return {
        "karmada_member_name": spec["name"],
        "karmada_member_kubeconfig_secret": {"name": ref.get("name") or "", "key": ref["key"]},
        "karmada_member_sync_mode": spec["syncMode"],
        "karmada_member_region": spec.get("region") or "",
        "karmada_member_zones": list(spec.get("zones") or []),
        "karmada_member_provider": spec.get("provider") or "",
        "karmada_member_labels": dict(spec.get("labels") or {}),
        "karmada_member_taints": [dict(t) for t in spec.get("taints") or []],
        "karmada_member_spec_hash": member_spec_hash(member),
        "karmada_member_state": status.get("state") or "",
        "karmada_member_action": action,
        "karmada_member_reason": reason,
        "karmada_deployment": dict(owner),
    }


def _status_member_vars(entry: dict[str, Any], owner: dict[str, str]) -> dict[str, Any]:
    ref = entry.get("kubeconfigSecretRef") or {}
    return {
        "karmada_member_name": entry["name"],
        # Only known when the operator recorded it in status (the spec entry is gone).
        "karmada_member_kubeconfig_secret": {"name": ref.get("name") or "",
                                             "key": ref.get("key") or DEFAULT_KUBECONFIG_KEY},
        "karmada_member_sync_mode": entry.get("syncMode") or DEFAULT_SYNC_MODE,
        "karmada_member_region": "",
        "karmada_member_zones": [],
        "karmada_member_provider": "",
        "karmada_member_labels": {},
        "karmada_member_taints": [],
        "karmada_member_spec_hash": entry.get("specHash") or "",
        "karmada_member_state": entry.get("state") or "",
        "karmada_member_action": "delete",
        "karmada_member_reason": "RemovedFromSpec",
        "karmada_deployment": dict(owner),
    }


def plan_member(member: dict[str, Any], status: dict[str, Any] | None) -> tuple[str, str]:
    """(action, reason) for a member in spec: ``add`` or ``none``, with a CamelCase reason."""
    if not status:
        return "add", "NotInStatus"
    state = status.get("state") or ""
    if state != "Joined":
        return "add", f"State{state or 'Unknown'}"
    recorded = status.get("specHash") or ""
    if not recorded:
        return "add", "NoRecordedSpecHash"
    if recorded != member_spec_hash(member):
        return "add", "SpecChanged"
    return "none", "Unchanged"


def _deployment_groups(deployments: list[dict[str, Any]]) -> dict[tuple[str, str], str]:
    """Group name per (namespace, name); a short hash suffix only when two sanitize alike."""
    keys = sorted({(o["namespace"], o["name"]) for o in map(_owner, deployments)})
    by_group: dict[str, list[tuple[str, str]]] = {}
    for key in keys:
        by_group.setdefault(deployment_group(*key), []).append(key)
    out = {}
    for group, owners in by_group.items():
        for key in owners:
            suffix = hashlib.sha256("/".join(key).encode()).hexdigest()[:8] if len(owners) > 1 else ""
            out[key] = f"{group}_{suffix}" if suffix else group
    return out


def build_inventory(deployments: list[dict[str, Any]]) -> MemberInventory:
    """Hosts and groups for every member of every KarmadaDeployment given.

    Deployments without a name or namespace and member entries without a name are skipped;
    order is stable (deployments by namespace/name, members in spec then status order).
    """
    inventory = MemberInventory()
    for group in (ADD_GROUP, DEL_GROUP, JOINED_GROUP):
        inventory.groups[group] = []
    valid = [d for d in deployments if _owner(d)["name"] and _owner(d)["namespace"]]
    groups_of = _deployment_groups(valid)
    for deployment in sorted(valid, key=lambda d: (_owner(d)["namespace"], _owner(d)["name"])):
        owner = _owner(deployment)
        dep_group = groups_of[(owner["namespace"], owner["name"])]
        inventory.groups.setdefault(dep_group, [])
        spec_members = _unique_names((deployment.get("spec") or {}).get("members") or [])
        status_members = {e["name"]: e for e in _unique_names((deployment.get("status") or {}).get("members") or [])}
        for member in spec_members:
            status = status_members.get(member["name"]) or {}
            action, reason = plan_member(member, status)
            hostvars = _spec_member_vars(member, owner, status, action, reason)
            plan_group = ADD_GROUP if action == "add" else JOINED_GROUP
            groups = [plan_group, dep_group, SYNC_MODE_GROUPS.get(hostvars["karmada_member_sync_mode"], "push")]
            inventory.add(host_name(owner["namespace"], owner["name"], member["name"]), hostvars, groups)
        in_spec = {m["name"] for m in spec_members}
        for name, entry in status_members.items():
            if name in in_spec or entry.get("state") not in REGISTERED_STATES:
                continue
            hostvars = _status_member_vars(entry, owner)
            groups = [DEL_GROUP, dep_group, SYNC_MODE_GROUPS.get(hostvars["karmada_member_sync_mode"], "push")]
            inventory.add(host_name(owner["namespace"], owner["name"], name), hostvars, groups)
    return inventory
