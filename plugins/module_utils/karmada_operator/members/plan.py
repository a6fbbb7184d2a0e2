"""Member-cluster planning: KarmadaDeployment objects -> inventory hosts, vars and groups.

Pure functions over the objects as the API returns them (dicts); the inventory plugin
(plugins/inventory/karmada_operator/members/plan.py) fetches them and hands the result to Ansible.

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
DEFAULT_AGENT_PLACEMENT = "Member"
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
    out.setdefault("agentPlacement", DEFAULT_AGENT_PLACEMENT)
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
        "karmada_member_agent_placement": spec["agentPlacement"],
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
        "karmada_member_agent_placement": entry.get("agentPlacement") or DEFAULT_AGENT_PLACEMENT,
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

    A deployment with a deletionTimestamp contributes only its registered members, all to
    ``del_member`` (none with deletionPolicy Retain). Deployments without a name or namespace
    and member entries without a name are skipped; order is stable (deployments by
    namespace/name, members in spec then status order).
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
        # A KarmadaDeployment being deleted keeps no member: every registered one is unjoined
        # (its finalizer runs the member task before the control plane goes). Unless its
        # deletionPolicy is Retain: the memberships stay, with the kept etcd data (after a
        # restore elsewhere they belong to the new plane). Also in a normal run that sees the
        # deletion start while it goes on.
        deleting = bool((deployment.get("metadata") or {}).get("deletionTimestamp"))
        if deleting and ((deployment.get("spec") or {}).get("deletionPolicy") or "Delete") == "Retain":
            continue
        spec_members = [] if deleting else _unique_names((deployment.get("spec") or {}).get("members") or [])
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


def member_jobs(deployment: dict[str, Any]) -> list[dict[str, Any]]:
    """What one reconcile does with each member of one KarmadaDeployment, as the karmada_member
    module's ``members`` option: the same plan as the inventory (build_inventory), every member
    in spec (re)joined, every registered member gone from spec (or the whole deployment being
    deleted) unjoined."""
    out = []
    for hostvars in build_inventory([deployment]).hosts.values():
        out.append({
            "name": hostvars["karmada_member_name"],
            "state": "absent" if hostvars["karmada_member_action"] == "delete" else "present",
            "sync_mode": hostvars["karmada_member_sync_mode"],
            "provider": hostvars["karmada_member_provider"],
            "region": hostvars["karmada_member_region"],
            "zones": hostvars["karmada_member_zones"],
            "labels": hostvars["karmada_member_labels"],
            "taints": hostvars["karmada_member_taints"],
            "agent_placement": hostvars["karmada_member_agent_placement"],
            "kubeconfig_secret": hostvars["karmada_member_kubeconfig_secret"],
        })
    return out


def member_results(module_result: dict[str, Any], jobs: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Member name -> result from the karmada_member module's answer. When the module itself
    failed (no per-member results), every member it was given gets the module's message, so
    status says why instead of keeping a stale entry."""
    results = (module_result or {}).get("members")
    if isinstance(results, dict):
        return results
    message = (module_result or {}).get("msg") or "the member task did not run"
    return {job["name"]: {"msg": message} for job in jobs}


# --------------------------------------------------------------------------- status after a run


def members_status(spec_members: list[dict[str, Any]], previous: list[dict[str, Any]],
                   results: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """``status.members``, ``readyMembers`` and the MembersReady condition after a member run.

    ``results`` maps member name -> what the member task reported: the karmada_member module's
    ``state``/``ready``/``reason``/``message`` plus the host's ``spec_hash``,
    ``kubeconfig_secret`` and ``sync_mode``. Members in spec without a result (their host did
    not run) keep their previous entry (or Pending); members gone from spec are dropped once
    unjoined and kept, with the reason, while their unjoin is incomplete. ``retry`` says the
    reconcile should be repeated (a member not Ready or an unjoin not finished).
    """
    before = {e.get("name"): e for e in previous or [] if e.get("name")}
    spec = _unique_names(spec_members or [])
    out: list[dict[str, Any]] = []
    problems: list[str] = []
    retry = False
    ready_count = 0
    for member in spec:
        name = member["name"]
        normalized = normalized_member(member)
        result = results.get(name)
        if result is None:
            entry = dict(before.get(name) or {"name": name, "state": "Pending", "ready": False,
                                              "syncMode": normalized["syncMode"], "reason": "NotJoinedYet",
                                              "message": "waiting for the control plane"})
        else:
            entry = _entry(name, result, member_spec_hash(member), normalized["kubeconfigSecretRef"],
                           normalized["syncMode"], normalized.get("agentPlacement") or DEFAULT_AGENT_PLACEMENT)
        if entry.get("ready"):
            ready_count += 1
        else:
            retry = True
            problems.append(f"{name}: {entry.get('state')} {entry.get('reason') or ''}: {entry.get('message') or ''}"
                            .strip())
        out.append(entry)
    in_spec = {m["name"] for m in spec}
    leftovers: list[str] = []
    removed: list[str] = []
    for name, old in before.items():
        if name in in_spec:
            continue
        result = results.get(name)
        if result is None:
            if old.get("state") in REGISTERED_STATES:
                out.append(dict(old))
                leftovers.append(name)
                retry = True
            continue
        if result.get("state") == "Unjoined":
            if result.get("reason") not in (None, "", "Unjoined"):
                # Gone, but not cleanly (forced, or the member side left): say it once.
                removed.append(f"{name} ({result.get('reason')}: {result.get('message')})")
            continue
        ref = old.get("kubeconfigSecretRef") or {}
        out.append(_entry(name, result, old.get("specHash") or "", ref, old.get("syncMode") or DEFAULT_SYNC_MODE,
                          old.get("agentPlacement") or DEFAULT_AGENT_PLACEMENT))
        leftovers.append(f"{name} ({result.get('reason')}: {result.get('message')})")
        retry = True
    total = len(spec)
    if not spec:
        condition = {"type": "MembersReady", "status": "True", "reason": "NoMembers",
                     "message": "spec.members is empty"}
    elif ready_count == total:
        condition = {"type": "MembersReady", "status": "True", "reason": "AllMembersReady",
                     "message": f"{ready_count}/{total} members Ready"}
    else:
        condition = {"type": "MembersReady", "status": "False", "reason": "MembersNotReady",
                     "message": f"{ready_count}/{total} members Ready; " + "; ".join(problems)}
    if leftovers:
        condition["message"] += "; still being removed: " + ", ".join(leftovers)
    if removed:
        condition["message"] += "; removed with a warning: " + ", ".join(removed)
    condition["message"] = condition["message"][:4000]
    return {"members": out, "readyMembers": f"{ready_count}/{total}", "condition": condition, "retry": retry}


def _entry(name: str, result: dict[str, Any], spec_hash: str, ref: dict[str, Any], sync_mode: str,
           agent_placement: str) -> dict[str, Any]:
    entry = {
        "name": name,
        "state": result.get("state") or "Failed",
        "ready": bool(result.get("ready")),
        "syncMode": sync_mode,
        "agentPlacement": agent_placement,
        # A module that crashed has no reason, only Ansible's msg.
        "reason": result.get("reason") or ("" if result.get("state") else "OperatorError"),
        "message": (result.get("message") or result.get("msg") or "")[:2000],
        "kubeconfigSecretRef": {"name": ref.get("name") or "", "key": ref.get("key") or DEFAULT_KUBECONFIG_KEY},
    }
    if spec_hash:
        entry["specHash"] = spec_hash
    return entry
