"""Every object of the encrypted resources rewritten under the encryption configuration
karmada-apiserver runs, and the phases of a key rotation (pki/encryption.py: ROTATION_PHASES;
docs/security.md#encryption-at-rest): a day-2 operation's step at the
end of a full pass (plan/operations.py), after karmada-apiserver has rolled out.

kube-apiserver stores an object anew when it is written and what etcd holds was read with a
provider other than the configuration's first one ("stale": plain text under a key, a former
key, ciphertext with encryption switched off); an unchanged write of an object stored with the
first provider stores nothing. So replacing every object unchanged, once, after a change of key
or settings, leaves all of them under the current key (or in plain text, switched off); objects
written meanwhile by others are stored with it anyway (a 409 here). status.encryption records
what was rewritten for which configuration, so a pass whose configuration was rewritten already
reads one Secret and stops. Kubernetes' own procedure, by hand, is the same:
`kubectl get secrets -A -o json | kubectl replace -f -`.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from typing import Any

from karmada_operator.etcd.client_secret import etcd_client
from karmada_operator.etcd.gateway import EtcdClient, EtcdError
from karmada_operator.kube.client import Kube, KubeError
from karmada_operator.pki import encryption

NAME = "encryption"
CONDITION = "EncryptionAtRest"


def _iso(moment: datetime) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


def target(config: Mapping[str, Any]) -> dict[str, Any]:
    """What the objects must be stored with: the write key ("" in plain text) and the resources."""
    return {"enabled": bool(config["enabled"]), "writeKey": config["writeKey"] if config["enabled"] else "",
            "resources": list(config["resources"])}


def done(record: Mapping[str, Any], config: Mapping[str, Any]) -> bool:
    """Whether the last rewrite was for this configuration."""
    rewritten = record.get("rewritten") or {}
    want = target(config)
    return (bool(rewritten) and rewritten.get("enabled") == want["enabled"]
            and rewritten.get("writeKey", "") == want["writeKey"]
            and sorted(rewritten.get("resources") or []) == sorted(want["resources"]))


def condition(record: Mapping[str, Any]) -> dict[str, Any]:
    rotating = (record.get("rotation") or {}).get("phase") in ("Writing", "Dropping")
    if record.get("phase") == "Failed":
        status, reason = "False", "RewriteFailed"
    elif rotating:
        status, reason = "True", "KeyRotation"
    elif not record.get("enabled"):
        status, reason = "True", "Disabled"
    else:
        status, reason = "True", "Encrypted"
    return {"type": CONDITION, "status": status, "reason": reason, "message": str(record.get("message") or "")}


def report(record: Mapping[str, Any], changed: bool = False) -> dict[str, Any]:
    return {"fields": {NAME: dict(record)}, "conditions": [condition(record)], "changed": changed}


def describe(config: Mapping[str, Any], rewritten: Mapping[str, Any]) -> str:
    what = ", ".join(config["resources"])
    count = f"{rewritten.get('objects', 0)} objects rewritten at {rewritten.get('at', '?')}"
    if not config["enabled"]:
        return f"encryption at rest switched off: {what} stored in plain text ({count})"
    if config.get("provider") == "kms":
        return f"{what} stored encrypted through the KMS v2 plugin {config.get('kms')} ({count})"
    return f"{what} stored encrypted with secretbox key {config['writeKey']} ({count})"


def resolve(kube: Kube, resource: str) -> tuple[str, str]:
    """(apiVersion, kind) of ``resource`` ("secrets", "propagationpolicies.policy.karmada.io")
    from karmada-apiserver's discovery, its preferred version."""
    name, _, group = resource.partition(".")
    found = [r for r in kube.dynamic().resources.search(name=name, group=group)
             if getattr(r, "name", "") == name and getattr(r, "group", None) == group]
    if not found:
        raise KubeError(404, "NotFound", f"karmada-apiserver serves no resource {resource}")
    found.sort(key=lambda r: not getattr(r, "preferred", False))
    return found[0].group_version, found[0].kind


def rewrite(kube: Kube, resources: Sequence[str]) -> int:
    """Replace every object of ``resources`` unchanged; the count written (gone or changed
    meanwhile: skipped, they are stored with the current configuration already)."""
    count = 0
    for resource in resources:
        api_version, kind = resolve(kube, resource)
        for obj in kube.list(api_version, kind):
            obj.setdefault("apiVersion", api_version)
            obj.setdefault("kind", kind)
            try:
                kube.replace(obj)
            except KubeError as exc:
                if exc.status in (404, 409):
                    continue
                raise
            count += 1
    return count


def etcd_prefixes(resources: Sequence[str], root: str = "/registry") -> list[str]:
    """Where kube-apiserver keeps the objects of ``resources`` in etcd: ``<root>/<resource>/`` for
    the core group and most built-in ones, ``<root>/<group>/<resource>/`` for custom resources;
    both are read for a resource with a group (a prefix with nothing under it costs one range)."""
    out: list[str] = []
    for resource in resources:
        name, _, group = resource.partition(".")
        out.append(f"{root}/{name}/")
        if group:
            out.append(f"{root}/{group}/{name}/")
    return out


def stored_under(client: EtcdClient, resources: Sequence[str], key_name: str, root: str = "/registry") -> list[str]:
    """The etcd keys of ``resources`` whose value etcd holds encrypted with ``key_name``: what a
    configuration without that key could no longer read. Read from etcd itself, not through
    karmada-apiserver (which decrypts)."""
    marker = encryption.PREFIX.format(name=key_name).encode()
    return [kv.key.decode(errors="replace") for prefix in etcd_prefixes(resources, root)
            for kv in client.iter_prefix(prefix, page=500) if kv.value.startswith(marker)]


def etcd_root(plan: Mapping[str, Any]) -> str:
    """karmada-apiserver's --etcd-prefix (the plan's arguments; /registry by default)."""
    for arg in plan["apiserver"]["args"]:
        if arg.startswith("--etcd-prefix="):
            return arg.split("=", 1)[1].rstrip("/") or "/registry"
    return "/registry"


def left_under_old_key(ctx: Any, resources: Sequence[str], key_name: str) -> list[str]:
    """:func:`stored_under` for this Karmada's etcd (local or external), with the operator's
    etcd client pair."""
    with etcd_client(ctx.live, ctx.plan["etcd"], timeout=10.0, prefix="etcd-encryption-") as client:
        return stored_under(client, resources, key_name, etcd_root(ctx.plan))


def apiservers_moving(live: Kube, plan: Mapping[str, Any]) -> str:
    """What keeps karmada-apiserver from serving the current configuration alone ("" when
    nothing does): its Deployment's rollout not finished, or an old pod still terminating. An old
    pod serves until it is gone (a preStop delay keeps it answering), with the key it started
    with: an object rewritten through it would keep the old key, which a later phase drops."""
    namespace, name = plan["namespace"], plan["names"]["apiserver"]
    dep = live.get("apps/v1", "Deployment", name, namespace) or {}
    want = int((dep.get("spec") or {}).get("replicas") or 0)
    status = dep.get("status") or {}
    if int(status.get("observedGeneration") or 0) < int((dep.get("metadata") or {}).get("generation") or 0):
        return f"Deployment {name}: its rollout is not observed yet"
    if (int(status.get("updatedReplicas") or 0), int(status.get("replicas") or 0)) != (want, want):
        return (f"Deployment {name}: {status.get('updatedReplicas') or 0} of {want} replicas updated, "
                f"{status.get('replicas') or 0} in all")
    selector = f"app.kubernetes.io/name=karmada-apiserver,app.kubernetes.io/instance={plan['name']}"
    leaving = sorted(p["metadata"]["name"] for p in live.list("v1", "Pod", namespace, label_selector=selector)
                     if p["metadata"].get("deletionTimestamp"))
    return f"old karmada-apiserver pods still terminating: {', '.join(leaving)}" if leaving else ""


def wait_settled(live: Kube, plan: Mapping[str, Any], timeout: float, poll: float,
                 sleep: Callable[[float], None] = time.sleep, clock: Callable[[], float] = time.monotonic) -> str:
    """:func:`apiservers_moving` until it is "" or ``timeout`` passed (then what still moves)."""
    deadline = clock() + timeout
    while True:
        moving = apiservers_moving(live, plan)
        if not moving or clock() >= deadline:
            return moving
        sleep(max(poll, 0.5))


class EncryptionRewrite:
    """The operation: its step after the control plane, in every full pass of a KarmadaDeployment."""

    name = NAME
    after = "control-plane"
    # what etcd holds under a key, read from etcd itself (a seam for the unit tests)
    etcd_left = staticmethod(left_under_old_key)

    def admit(self, cr: Mapping[str, Any], plan: Mapping[str, Any], now: datetime) -> dict[str, Any]:
        return dict((cr.get("status") or {}).get(NAME) or {})

    def steps(self, plan: Mapping[str, Any], records: Mapping[str, Mapping[str, Any]]) -> list[dict[str, Any]]:
        return [{"name": "encryption-rewrite", "file": "operation", "operation": NAME,
                 "reason": "EncryptionRewriteFailed", "condition": CONDITION}]

    def under_way(self, cr: Mapping[str, Any]) -> str:
        """A key rotation between its phases: each one's status write starts the next pass."""
        enc = ((cr.get("spec") or {}).get("apiServer") or {}).get("encryption") or {}
        phase = encryption.rotation_phase(enc, (cr.get("status") or {}).get(NAME) or {})
        return f"encryption key rotation under way (next: {phase})" if phase else ""

    def run(self, ctx: Any) -> dict[str, Any]:
        plan, owner = ctx.plan, ctx.owner
        record = dict((owner.get("status") or {}).get(NAME) or {})
        secret = ctx.live.get("v1", "Secret", plan["names"]["pkiSecret"], plan["namespace"]) or {}
        config = encryption.read((secret.get("data") or {}).get(encryption.FILE))
        if config is None:
            return report(record)  # nothing to go by (no key yet): the certificates step makes it
        out = self._rewrite(ctx, record, config)
        if out["fields"][NAME].get("phase") == "Failed":
            return out
        phase = plan["pki"]["api_server"]["encryption"].get("rotation") or ""
        if phase == "Writing":
            held = self._old_key_left(ctx, record, config, out)
            if held is not None:
                return held
        if phase:
            out["fields"][NAME]["rotation"] = self._rotated(ctx, record, config, phase)
            out["conditions"] = [condition(out["fields"][NAME])]
            out["changed"] = True
        return out

    def _old_key_left(self, ctx: Any, record: Mapping[str, Any], config: Mapping[str, Any],
                      out: Mapping[str, Any]) -> dict[str, Any] | None:
        """Before the old key may go (the next phase drops it): etcd itself holds nothing under it.
        What is left is rewritten once more and read again; still there, the rotation stays in
        Writing (the record without ``rewritten``, so the next pass rewrites and checks again) and
        the pass says which keys: dropping the key would make them unreadable. None: all moved."""
        old = str((record.get("rotation") or {}).get("oldKey") or "")
        if not old:
            return None
        try:
            left = self.etcd_left(ctx, config["resources"], old)
            if left and ctx.karmada is not None:
                rewrite(ctx.karmada, config["resources"])
                left = self.etcd_left(ctx, config["resources"], old)
        except (EtcdError, KubeError) as exc:
            left_msg = f"etcd could not be read to check that nothing is stored under {old} any more: {exc}"
        else:
            if not left:
                return None
            left_msg = (f"{len(left)} object(s) still stored under {old} in etcd after the rewrite (e.g. "
                        f"{', '.join(left[:3])}): {old} stays until they are rewritten")
        fields = {k: v for k, v in out["fields"][NAME].items() if k != "rewritten"}
        failed = {**fields, "phase": "Failed", "message": left_msg}
        ctx.event({"type": "Warning", "reason": "EncryptionRewriteFailed", "message": left_msg})
        return report(failed, changed=True)

    def _rotated(self, ctx: Any, record: Mapping[str, Any], config: Mapping[str, Any], phase: str) -> dict[str, Any]:
        """status.encryption.rotation after this pass did ``phase`` (the next phase to do)."""
        spec = ((ctx.owner.get("spec") or {}).get("apiServer") or {}).get("encryption") or {}
        before = dict(record.get("rotation") or {})
        now = _iso(ctx.now())
        keys = config["keys"]
        if phase == "Adding":
            rotation = {"requestedAt": encryption.rotation_requested(spec), "startedAt": now, "phase": "Writing",
                        "oldKey": keys[0], "newKey": keys[-1],
                        "message": f"{keys[-1]} added, readable by every karmada-apiserver; next: it writes and "
                                   "every object is rewritten with it"}
        elif phase == "Writing":
            rotation = {**before, "phase": "Dropping",
                        "message": f"{keys[0]} writes, every object rewritten with it; next: {before.get('oldKey')} "
                                   "goes"}
        else:
            rotation = {**before, "phase": "Done", "finishedAt": now,
                        "message": f"{before.get('oldKey')} dropped: {keys[0]} is the only key"}
        ctx.event({"type": "Normal", "reason": f"EncryptionKeyRotation{phase}", "message": rotation["message"]})
        return rotation

    def _rewrite(self, ctx: Any, record: Mapping[str, Any], config: Mapping[str, Any]) -> dict[str, Any]:
        base = {"enabled": config["enabled"], "writeKey": config["writeKey"], "keys": config["keys"],
                "resources": config["resources"], "provider": config["provider"], "kms": config["kms"]}
        if done(record, config):
            after = {**record, **base, "phase": "Current", "message": describe(config, record["rewritten"])}
            return report(after)
        if ctx.karmada is None:
            raise ValueError("the encryption rewrite needs the operator's connection to karmada-apiserver")
        # every write must reach a karmada-apiserver that runs this configuration: none still on
        # its way out with the one before
        moving = wait_settled(ctx.live, ctx.plan, float(ctx.timeout), float(ctx.poll))
        if moving:
            failed = {**record, **base, "phase": "Failed",
                      "message": f"not rewriting {', '.join(config['resources'])} yet: {moving}"}
            ctx.event({"type": "Warning", "reason": "EncryptionRewriteFailed", "message": failed["message"]})
            return report(failed)
        # what was encrypted before stays listed (resources can only grow: the schema), so the
        # configuration's resources are all there is to rewrite
        try:
            count = rewrite(ctx.karmada, config["resources"])
        except KubeError as exc:
            failed = {**record, **base, "phase": "Failed",
                      "message": f"rewriting {', '.join(config['resources'])} under the current configuration "
                                 f"failed: {exc.status} {exc.reason}: {exc.message}"}
            ctx.event({"type": "Warning", "reason": "EncryptionRewriteFailed", "message": failed["message"]})
            return report(failed)
        rewritten = {**target(config), "objects": count, "at": _iso(ctx.now())}
        after = {**record, **base, "phase": "Current", "rewritten": rewritten, "message": describe(config, rewritten)}
        ctx.event({"type": "Normal", "reason": "EncryptionRewritten", "message": after["message"]})
        return report(after, changed=True)
