"""Whether an object in the cluster already is what we would apply, so an apply can be skipped.

Plain Python, no Ansible API (a filter plugin and tests import it as ``applied_objects``).

Two things must hold for an object to be left alone:

* it carries the digest annotation of the definition we would apply (``with_digest``): a
  new definition (a field added or removed by a new release) has a new digest, so it is
  applied even when the live object already has every field the new one sets;
* every field the definition sets has that value in the live object (``is_subset``): the
  server's defaults and other managers' fields are extra, and do not count; a field edited
  by hand does.

What is neither missing nor different costs no write: a full pass over Karmada's 30-odd
CRDs, each tens of kilobytes, reads them once (the list its Established gate reads anyway)
instead of applying each (a GET and a PATCH per CRD, 5 s on the test bed).
"""

from __future__ import annotations

import copy
import hashlib
import json
from collections.abc import Iterable, Mapping
from typing import Any

DIGEST_ANNOTATION = "operator.karmada.io/definition-sha256"


def digest(obj: Mapping[str, Any]) -> str:
    """sha256 of a definition's canonical JSON, without its own digest annotation."""
    plain = copy.deepcopy(dict(obj))
    annotations = (plain.get("metadata") or {}).get("annotations") or {}
    annotations.pop(DIGEST_ANNOTATION, None)
    return hashlib.sha256(json.dumps(plain, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


def with_digest(objs: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The definitions, each annotated with its digest (copies; the input is not changed)."""
    out = []
    for obj in objs:
        annotated = copy.deepcopy(dict(obj))
        meta = annotated.setdefault("metadata", {})
        meta["annotations"] = {**(meta.get("annotations") or {}), DIGEST_ANNOTATION: digest(obj)}
        out.append(annotated)
    return out


def is_subset(want: Any, live: Any) -> bool:
    """Every field ``want`` sets has the same value in ``live`` (lists: same length, element
    by element). Numbers compare by value (1 == 1.0), everything else exactly."""
    if isinstance(want, Mapping):
        return isinstance(live, Mapping) and all(k in live and is_subset(v, live[k]) for k, v in want.items())
    if isinstance(want, list | tuple):
        return isinstance(live, list | tuple) and len(want) == len(live) and all(
            is_subset(w, v) for w, v in zip(want, live, strict=True))
    if isinstance(want, bool) or isinstance(live, bool):
        return want is live or want == live and type(want) is type(live)
    if isinstance(want, int | float) and isinstance(live, int | float):
        return want == live
    return want == live


def _key(obj: Mapping[str, Any]) -> tuple[str, str, str, str]:
    meta = obj.get("metadata") or {}
    group = str(obj.get("apiVersion", "")).rpartition("/")[0]  # by group: one object whatever version is read
    return group, str(obj.get("kind", "")), str(meta.get("namespace") or ""), str(meta.get("name", ""))


def unapplied(want: Iterable[Mapping[str, Any]], live: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The definitions in ``want`` (with their digest annotation: ``with_digest``) whose live
    object is missing, lacks that digest, or differs in a field the definition sets. ``live``
    are the objects as read, each with its apiVersion and kind (k8s_info's resources)."""
    found = {_key(obj): obj for obj in live}
    return [dict(obj) for obj in want if not is_subset(obj, found.get(_key(obj)))]


def kinds(objs: Iterable[Mapping[str, Any]]) -> list[dict[str, str]]:
    """The distinct (apiVersion, kind, namespace) of some definitions, in first-seen order: what
    to list to read them all back (one list per entry; namespace "" for cluster-scoped ones)."""
    seen: dict[tuple[str, str, str], None] = {}
    for obj in objs:
        seen.setdefault((str(obj.get("apiVersion", "")), str(obj.get("kind", "")),
                         str((obj.get("metadata") or {}).get("namespace") or "")), None)
    return [{"apiVersion": a, "kind": k, "namespace": n} for a, k, n in seen]


def unregistered_apiservices(live: Iterable[Mapping[str, Any]], wanted: Iterable[str], ca_bundle: str) -> list[str]:
    """The ``wanted`` APIService names the aggregator has not picked up with ``ca_bundle``: missing,
    another caBundle, or no Available condition yet (True or False both show it was picked up;
    True needs the component running, which is awaited elsewhere)."""
    found = {(obj.get("metadata") or {}).get("name"): obj
             for obj in live if obj.get("kind", "APIService") == "APIService"}
    missing = []
    for name in wanted:
        obj = found.get(name) or {}
        conditions = (obj.get("status") or {}).get("conditions") or []
        if (obj.get("spec") or {}).get("caBundle") != ca_bundle or not any(
                c.get("type") == "Available" for c in conditions):
            missing.append(name)
    return missing
