"""What one pass over a KarmadaDeployment does, decided once, in Python, beside the plan.

``plan_pass`` turns the custom resource (its spec and the status the last pass wrote) and the
plan into this pass's own plan:

- ``mode``: ``full`` (every control-plane step, then the members), ``members`` (a spec edit that
  only touched spec.members, or a join being retried on a plane the fast path found as the last
  full pass left it: the control plane is left alone) or ``delete`` (the finalizer).
- ``steps``: the control-plane steps a full pass runs, in order, each naming the task file
  that does it (roles/karmada_deployment/tasks/<file>.yml) and what that file is told. A
  rollback runs them backwards; only a version change takes a backup first; only the
  Dropping phase of a karmada or front-proxy CA rotation trims kube-apiserver's client CAs.
- ``upgrade``: status.upgrade as this pass starts ({} without a version change), ``reverse``
  whether it goes down, ``caRotation`` the CA-rotation phase this pass works on ({} for none).
- ``conditions``: on a members-only pass, the control plane's conditions, to be written again
  with the members' (stamped with this generation).

Every day-2 operation is admitted here, once (plan/operations.py): a version change the
preflight refuses, or a CA-rotation request the operator cannot act on, fails the plan step with
the reason and message status shows (``PassRefused``).

The hashes that decide which pods restart come from the key material, so the PKI step makes
them (:func:`pki_hashes`), from the same plan.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from karmada_operator.pki import ca_rotation
from karmada_operator.plan import upgrade as karmada_upgrade
from karmada_operator.plan.operations import PassRefused, admit_all, steps_after
from karmada_operator.plan.plan import config_hash, mounts_hash

__all__ = ["PassRefused", "control_plane_steps", "pki_hashes", "plan_pass", "step"]

MODE_FULL, MODE_MEMBERS, MODE_DELETE = "full", "members", "delete"

# A CA whose Dropping phase also trims the client CAs kube-apiserver lists in
# kube-system/extension-apiserver-authentication (docs/certificates.md).
CLIENT_CAS = ("karmada", "front-proxy")


def step(name: str, file: str = "", **tells: Any) -> dict[str, Any]:
    """One control-plane step: its name (status and logs), its task file, what the file is told."""
    return {"name": name, "file": file or name, **tells}


def control_plane_steps(upgrade: Mapping[str, Any], reverse: bool, rotation: Mapping[str, Any],
                        after: Mapping[str, list[dict]] | None = None) -> list[dict]:
    """The ordered steps of a full pass.

    First the ownership check (nothing is written while a name is someone else's). Forward:
    certificates (the admin kubeconfig Secret with them), etcd, karmada-apiserver,
    karmada-aggregated-apiserver,
    Karmada's CRDs and system objects, the other components (the registry's order), then
    karmada-apiserver again when only its certificates changed (it restarts last), the Dropping
    phase's client-CA trim, and the Running status. ``after``: the steps day-2 operations add
    after a step, by its name (operations.steps_after: etcd scaling after etcd, its
    defragmentation after the quorum gate). A
    rollback reaches the running
    karmada-apiserver first and rolls it last: components (last first), the aggregated
    apiserver, the older CRDs, karmada-apiserver; a component never runs against a newer one it
    was not built for.
    """
    # first: every name the pass needs is free or this KarmadaDeployment's (NameConflict otherwise)
    steps = [step("ownership")]
    steps += [step("pre-upgrade-backup", "upgrade_backup")] if upgrade else []
    # etcd: its StatefulSet and rollout; the operations after it (scaling, member replacement); the
    # quorum gate with every member healthy; then the operations that need that (space, fragmentation)
    steps += [step("pki"), step("etcd"), *(after or {}).get("etcd", []), step("etcd-quorum", "etcd_quorum"),
              *(after or {}).get("etcd-quorum", [])]
    if reverse:
        steps += [step("apiserver-connect", "apiserver_connect"),
                  step("components", "components", component_step="components", reverse=True),
                  step("aggregated", "components", component_step="aggregated", reverse=True),
                  step("resources"), step("apiserver")]
    else:
        steps += [step("apiserver"),
                  step("aggregated", "components", component_step="aggregated"),
                  step("resources"),
                  step("components", "components", component_step="components"),
                  # runs only when the apiserver step left its certificate restart for now
                  step("apiserver-last", "apiserver", deferred=True)]
        if rotation.get("phase") == "Dropping" and rotation.get("ca") in CLIENT_CAS:
            steps.append(step("ca-dropping", "ca_dropping"))
    # after the whole control plane has rolled out, whichever the direction (the encryption rewrite)
    steps += (after or {}).get("control-plane", [])
    steps.append(step("status"))
    return steps


def _int(value: Any, default: int) -> int:
    try:
        return int(value)
    except (TypeError, ValueError):
        return default


def _condition_status(status: Mapping[str, Any], kind: str) -> str:
    return next((str(c.get("status")) for c in status.get("conditions") or [] if c.get("type") == kind), "")


def members_only(cr: Mapping[str, Any], plan: Mapping[str, Any], converged_control_plane: bool) -> bool:
    """Whether this pass leaves the control plane alone (the rotation check is the caller's).

    A spec edit (a new generation) that leaves the control-plane plan as the last full pass left
    it (status.controlPlaneHash), on a Running, Ready plane, only touched spec.members. Also a
    run the fast-path check found with the control plane as the last full pass left it and only
    members not Ready (a join being retried). Every other run takes the full pass, which puts
    back whatever drifted.
    """
    status = cr.get("status") or {}
    edit = (str(status.get("controlPlaneHash") or "") == plan["controlPlaneHash"]
            and _int(status.get("observedGeneration"), -1) != _int((cr.get("metadata") or {}).get("generation"), 0)
            and status.get("phase") == "Running"
            and _condition_status(status, "Ready") == "True")
    return edit or bool(converged_control_plane)


def restamped_conditions(cr: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The control plane's conditions, written again by a members-only pass (MembersReady is the
    member task's own)."""
    return [{k: c[k] for k in ("type", "status", "reason", "message") if k in c}
            for c in (cr.get("status") or {}).get("conditions") or [] if c.get("type") != "MembersReady"]


def plan_pass(cr: Mapping[str, Any], plan: Mapping[str, Any], *, converged_control_plane: bool = False,
              deleting: bool = False, now: datetime | None = None) -> dict[str, Any]:
    """This pass's plan (module docstring); raises PassRefused."""
    if deleting:
        return {"mode": MODE_DELETE, "steps": [], "upgrade": {}, "reverse": False, "caRotation": {},
                "conditions": []}
    # every day-2 operation admitted once (plan/operations.py); a refusal fails the pass here
    records = admit_all(cr, plan, now or datetime.now(UTC))
    rotation, upgrade = records["caRotation"], records["upgrade"]
    reverse = karmada_upgrade.is_rollback(upgrade)
    if not rotation and members_only(cr, plan, converged_control_plane):
        return {"mode": MODE_MEMBERS, "steps": [], "upgrade": upgrade, "reverse": reverse, "caRotation": {},
                "conditions": restamped_conditions(cr)}
    after = {anchor: steps_after(anchor, plan, records) for anchor in ("etcd", "etcd-quorum", "control-plane")}
    return {"mode": MODE_FULL, "steps": control_plane_steps(upgrade, reverse, rotation, after), "upgrade": upgrade,
            "reverse": reverse, "caRotation": rotation, "conditions": []}


def pki_hashes(plan: Mapping[str, Any], groups: Mapping[str, Mapping[str, str]], rotation: Mapping[str, Any],
               recorded_rotation: Mapping[str, Any]) -> dict[str, Any]:
    """The pod-template hashes that decide which pods restart for their certificates.

    Pods restart when what they read only at start changes: each component hashes every key it
    mounts (its kubeconfig embeds a client certificate), karmada-apiserver its restartMounts,
    etcd its CA (the members reload their serving and peer pairs at each TLS handshake). In
    each phase of a CA rotation karmada-apiserver restarts, and etcd too for the etcd CA
    (ca_rotation.restart_marker, "" when nothing was ever rotated). ``rotation``: this pass's
    (plan_pass), ``recorded_rotation``: status.caRotation as the pass started.

    ``apiserverSpec`` is karmada-apiserver's spec hash: a new etcd CA counts as a spec change
    (kube-apiserver reads the CA it checks etcd with once), so it restarts right after etcd.
    """
    etcd = mounts_hash(dict(groups), plan["pki"]["etcd_restart_mounts"])
    etcd_marker = ca_rotation.restart_marker(rotation, recorded_rotation, "etcd")
    if etcd_marker:
        etcd = config_hash([etcd, etcd_marker])
    apiserver = mounts_hash(dict(groups), plan["apiserver"]["restartMounts"])
    marker = ca_rotation.restart_marker(rotation, recorded_rotation)
    if marker:
        apiserver = config_hash([apiserver, marker])
    spec = config_hash([plan["apiserver"], plan["labels"], plan["annotations"], plan["names"]["pkiSecret"], etcd])
    return {
        "etcd": etcd,
        "apiserver": apiserver,
        "apiserverSpec": spec,
        "components": {c["component"]: mounts_hash(dict(groups), c["mounts"])
                       for c in plan["components"] if c.get("enabled")},
    }
