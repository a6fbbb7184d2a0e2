"""Which objects on the host cluster belong to one KarmadaDeployment (docs/security.md,
"Coexistence").

Karmada's own operator (kind ``Karmada``, same API group) names its objects as we do
(``<name>-apiserver``, ``<name>-etcd``, ...) and labels them ``app.kubernetes.io/managed-by:
karmada-operator``, the value this operator used too until it took one of its own. A name is
therefore no proof of ownership: an object is this KarmadaDeployment's when

* it has an ownerReference to it (its UID), or
* it carries the label ``operator.karmada.io/karmadadeployment-uid`` with its UID (what has no
  owner: the etcd volumes the StatefulSet makes, what an EtcdRestore seeds), or
* it is an etcd volume or a Secret an earlier version of this operator left without an owner
  (made before the UID label; a restore's seeded CA): no ownerReference, no UID label, and this
  operator's labels for this name (instance ``<name>``, its managed-by value old or new, and a
  part-of label, which this operator always set and Karmada's operator never sets; its volumes
  carry only its StatefulSet's selector, and its Secrets have other names, ``<name>-cert``, ...).

Everything else in the way is someone else's: the pass touches nothing and reports
``NameConflict``; deletion leaves it where it is. Plain Python, no Ansible or client import.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

MANAGED_BY_LABEL = "app.kubernetes.io/managed-by"
# ours alone; "karmada-operator" is Karmada's own operator's value (and was ours before)
MANAGED_BY = "karmadadeployment-operator"
LEGACY_MANAGED_BY = "karmada-operator"
OWNER_UID_LABEL = "operator.karmada.io/karmadadeployment-uid"
INSTANCE_LABEL = "app.kubernetes.io/instance"
PART_OF_LABEL = "app.kubernetes.io/part-of"
# kinds an earlier version left without an owner: the StatefulSet's volumes, a restore's CA
UNOWNED_BEFORE = ("PersistentVolumeClaim", "Secret")


def labels(name: str, uid: str) -> dict[str, str]:
    """The labels every object of KarmadaDeployment ``name`` (UID ``uid``) carries."""
    out = {PART_OF_LABEL: "karmada", INSTANCE_LABEL: name, MANAGED_BY_LABEL: MANAGED_BY}
    if uid:
        out[OWNER_UID_LABEL] = uid
    return out


def _meta(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    return obj.get("metadata") or {}


def owned(obj: Mapping[str, Any], uid: str) -> bool:
    """An ownerReference to ``uid``, or the UID label naming it."""
    meta = _meta(obj)
    if any(ref.get("uid") == uid for ref in meta.get("ownerReferences") or []):
        return True
    return bool(uid) and (meta.get("labels") or {}).get(OWNER_UID_LABEL) == uid


def made_before(obj: Mapping[str, Any], name: str) -> bool:
    """An etcd volume or Secret of KarmadaDeployment ``name`` from before the UID label."""
    meta = _meta(obj)
    found = meta.get("labels") or {}
    return (obj.get("kind") in UNOWNED_BEFORE and not meta.get("ownerReferences") and OWNER_UID_LABEL not in found
            and found.get(INSTANCE_LABEL) == name and PART_OF_LABEL in found
            and found.get(MANAGED_BY_LABEL) in (MANAGED_BY, LEGACY_MANAGED_BY))


def ours(obj: Mapping[str, Any], name: str, uid: str) -> bool:
    return owned(obj, uid) or made_before(obj, name)


def whose(obj: Mapping[str, Any], uid: str) -> str:
    """Who the object seems to belong to, for the NameConflict message."""
    meta = _meta(obj)
    found = meta.get("labels") or {}
    refs = meta.get("ownerReferences") or []
    if found.get(OWNER_UID_LABEL) and found[OWNER_UID_LABEL] != uid:
        return (f"made for another KarmadaDeployment (uid {found[OWNER_UID_LABEL]}); to hand it to this one, "
                f"label it {OWNER_UID_LABEL}={uid}, or delete it")
    if refs:
        return "owned by " + ", ".join(f"{r.get('kind')} {r.get('name')}" for r in refs)
    if found.get(MANAGED_BY_LABEL):
        return f"managed by {found[MANAGED_BY_LABEL]}"
    return "not made by this operator"


def describe(obj: Mapping[str, Any], uid: str) -> str:
    meta = _meta(obj)
    return f"{obj.get('kind')} {meta.get('namespace')}/{meta.get('name')} ({whose(obj, uid)})"


def conflicts(objs: Iterable[Mapping[str, Any]], name: str, uid: str) -> list[dict[str, Any]]:
    """The objects (as read) that are in the way: present and not this KarmadaDeployment's."""
    return [dict(obj) for obj in objs if obj and not ours(obj, name, uid)]
