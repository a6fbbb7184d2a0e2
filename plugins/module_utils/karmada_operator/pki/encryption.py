"""Encryption at rest in karmada-apiserver (spec.apiServer.encryption, docs/security.md#encryption-at-rest).

The key is key material like the CA: the certificates step keeps it in the PKI Secret, as the
EncryptionConfiguration karmada-apiserver reads (``FILE``), generated once and kept as long as it
is there. ``config`` renders that file from the stored keys and the spec: with encryption on,
the newest key writes (``secretbox``) and ``identity`` reads what was stored before; off,
``identity`` writes and the key still reads what was encrypted. A backup holds ciphertext; a
restore needs this file (docs/backup-restore.md). Pure, but for the random key.

secretbox (XSalsa20 and Poly1305, 32-byte keys) is Kubernetes' strongest local provider: a random
24-byte nonce per write, so no limit on writes per key (aesgcm needs a new key every 200,000
writes) and authenticated (aescbc is not, and is open to padding-oracle attacks).

With ``provider: KMSv2`` the user's KMS v2 plugin (``kms``: a sidecar in every karmada-apiserver
pod, serving on ``KMS_SOCKET`` in a volume the two share) writes, and the secretbox keys stay as
readers of what was stored before; ``kms`` set under Secretbox keeps the plugin as a reader.
"""

from __future__ import annotations

import base64
import json
import os
import re
from collections.abc import Callable, Mapping
from typing import Any

FILE = "encryption-config.json"
PROVIDER = "secretbox"
KEY_BYTES = 32
DEFAULT_RESOURCES = ("secrets",)
FIELD = "spec.apiServer.encryption"
SECRETBOX, KMS_V2 = "Secretbox", "KMSv2"  # spec.apiServer.encryption.provider
# Where the KMS v2 plugin serves, in the volume its sidecar shares with kube-apiserver
KMS_SOCKET_DIR = "/var/run/kmsplugin"
KMS_SOCKET = f"{KMS_SOCKET_DIR}/kms.sock"
KMS_DEFAULT_TIMEOUT = "3s"
# status.encryption.writeKey when the KMS writes (its values carry k8s:enc:kms:v2:<name>:)
KMS_WRITE_KEY = "kms:{name}"
# the prefix of a value karmada-apiserver stored with key ``name`` (as etcd holds it)
PREFIX = "k8s:enc:secretbox:v1:{name}:"
_KEY_NAME = re.compile(r"^key-([0-9]+)$")


class EncryptionError(ValueError):
    def __init__(self, message: str) -> None:
        super().__init__(f"{FIELD}: {message}")
        self.field = FIELD
        self.message = message


def settings(api: Mapping[str, Any], record: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """spec.apiServer.encryption with its defaults (the CRD fills them too), and the phase of a
    key rotation this pass does (``rotation``, "" for none) from status.encryption (``record``)."""
    enc = api.get("encryption") or {}
    resources = list(dict.fromkeys(enc.get("resources") or DEFAULT_RESOURCES))
    if "secrets" not in resources:
        raise EncryptionError("resources must include secrets")
    provider, kms = provider_settings(enc)
    rotation = rotation_phase(enc, record or {})
    if provider == KMS_V2 and rotation == "Adding":
        raise EncryptionError("rotation rotates the operator's own secretbox key; with provider KMSv2 the key "
                              "is in your KMS: rotate it there")
    held = kms_still_holding(record or {})
    if held and not kms:
        raise EncryptionError(f"kms: values may still be stored through the KMS v2 plugin {held} "
                              f"(status.encryption: {_where(record or {})}); without it karmada-apiserver could "
                              "not read them. Put kms back, with provider Secretbox, and remove it once every "
                              "object is rewritten under a secretbox key (status.encryption.rewritten.writeKey "
                              "equal to status.encryption.writeKey, not kms:<name>)")
    return {"enabled": bool(enc.get("enabled", True)), "resources": resources, "rotation": rotation,
            "provider": provider, "kms": kms}


def kms_still_holding(record: Mapping[str, Any]) -> str:
    """The KMS plugin's name while values may still be stored through it, "" once none can be,
    from status.encryption (``record``, the encryption rewrite's): the running configuration lists
    a KMS plugin and either it writes or the last rewrite of every object was not for the key that
    writes now. Dropping the plugin before then would leave those values unreadable."""
    name = str(record.get("kms") or "")
    if not name:
        return ""
    enabled = bool(record.get("enabled"))
    writes = str(record.get("writeKey") or "") if enabled else ""
    rewritten = record.get("rewritten") or {}
    moved = (record.get("provider") != "kms" and bool(rewritten)
             and bool(rewritten.get("enabled")) == enabled and str(rewritten.get("writeKey") or "") == writes
             and set(record.get("resources") or []) <= set(rewritten.get("resources") or []))
    return "" if moved else name


def _where(record: Mapping[str, Any]) -> str:
    rewritten = (record.get("rewritten") or {}).get("writeKey")
    return (f"writeKey {record.get('writeKey') or '-'}, "
            f"last rewrite {'for ' + str(rewritten) if rewritten is not None else 'none'}")


def provider_settings(enc: Mapping[str, Any]) -> tuple[str, dict[str, str] | None]:
    """(provider, the KMS plugin's name and timeout or None) of spec.apiServer.encryption, or of
    the settings() made from it (the certificates step reads them back with this)."""
    provider = str(enc.get("provider") or SECRETBOX)
    if provider not in (SECRETBOX, KMS_V2):
        raise EncryptionError(f"provider {provider!r} is not {SECRETBOX} or {KMS_V2}")
    kms = enc.get("kms") or None
    if provider == KMS_V2 and not kms:
        raise EncryptionError("provider KMSv2 needs kms (the plugin)")
    return provider, ({"name": str(kms["name"]), "timeout": str(kms.get("timeout") or KMS_DEFAULT_TIMEOUT)}
                      if kms else None)


# A key rotation (spec.apiServer.encryption.rotation.requestedAt), one karmada-apiserver roll per
# phase, each a full pass: Adding (a new key every replica can read; the old one still writes),
# Writing (the new key writes; the operation then rewrites every object with it), Dropping (the
# old key goes). status.encryption.rotation.phase is the phase the next pass does; Done at the end.
ROTATION_PHASES = ("Adding", "Writing", "Dropping", "Done")


def rotation_requested(enc: Mapping[str, Any]) -> str:
    return str(((enc.get("rotation") or {}).get("requestedAt")) or "")


def rotation_phase(enc: Mapping[str, Any], record: Mapping[str, Any]) -> str:
    """The phase this pass does: the one status recorded as next (Writing, Dropping) while a
    rotation is under way (a new request waits for it to finish), else Adding when a rotation was
    asked for that status has not seen; "" when none is."""
    requested = rotation_requested(enc)
    rotation = record.get("rotation") or {}
    phase = str(rotation.get("phase") or "")
    if phase in ("Writing", "Dropping"):
        return phase
    if requested and requested != str(rotation.get("requestedAt") or ""):
        return "Adding"
    return ""


def rotated_keys(keys: list[dict[str, str]], phase: str,
                 random: Callable[[int], bytes] = os.urandom) -> list[dict[str, str]]:
    """The keys, in order, for a rotation phase (idempotent: a phase done again gives the same)."""
    if phase == "Adding" and len(keys) == 1:
        return [*keys, new_key(keys, random)]
    if phase == "Writing" and len(keys) >= 2:
        newest = max(keys, key=lambda k: int(_KEY_NAME.match(k["name"]).group(1)))  # type: ignore[union-attr]
        return [newest, *(k for k in keys if k is not newest)]
    if phase == "Dropping":
        return keys[:1]
    return keys


def stored_keys(text: str | None) -> list[dict[str, str]]:
    """The secretbox keys of a stored configuration, in its order (the first one writes when on);
    [] when there is none or it cannot be read."""
    return _keys(_parse(text))


def _parse(text: str | bytes | None) -> dict[str, Any]:
    """A stored configuration ({} when there is none or it is not JSON)."""
    if not text:
        return {}
    try:
        doc = json.loads(text)
    except ValueError:
        return {}
    return doc if isinstance(doc, dict) else {}


def _keys(doc: Mapping[str, Any]) -> list[dict[str, str]]:
    for entry in doc.get("resources") or []:
        for provider in entry.get("providers") or []:
            keys = (provider.get(PROVIDER) or {}).get("keys")
            if keys and all(isinstance(k, dict) and _valid(k) for k in keys):
                return [{"name": k["name"], "secret": k["secret"]} for k in keys]
    return []


def _valid(key: Mapping[str, Any]) -> bool:
    try:
        return bool(_KEY_NAME.match(str(key.get("name")))) and len(base64.b64decode(key["secret"], validate=True)) \
            == KEY_BYTES
    except (KeyError, TypeError, ValueError):
        return False


def new_key(keys: list[dict[str, str]], random: Callable[[int], bytes] = os.urandom) -> dict[str, str]:
    """A key named after the highest one stored (key-1, key-2, ...)."""
    numbers = [int(m.group(1)) for k in keys if (m := _KEY_NAME.match(k["name"]))]
    return {"name": f"key-{max(numbers, default=0) + 1}", "secret": base64.b64encode(random(KEY_BYTES)).decode()}


def config(keys: list[dict[str, str]], enabled: bool, resources: list[str], provider: str = SECRETBOX,
           kms: Mapping[str, str] | None = None) -> str:
    """The EncryptionConfiguration file: the provider that writes first (identity when off), then
    every other one that may have to read what was stored before."""
    box = {PROVIDER: {"keys": [dict(k) for k in keys]}}
    readers = [box]
    if kms:
        plugin = {"kms": {"apiVersion": "v2", "name": kms["name"], "endpoint": f"unix://{KMS_SOCKET}",
                          "timeout": kms.get("timeout") or KMS_DEFAULT_TIMEOUT}}
        readers = [plugin, box] if provider == KMS_V2 else [box, plugin]
    providers = [*readers, {"identity": {}}] if enabled else [{"identity": {}}, *readers]
    doc = {"apiVersion": "apiserver.config.k8s.io/v1", "kind": "EncryptionConfiguration",
           "resources": [{"resources": list(resources), "providers": providers}]}
    return json.dumps(doc, indent=1, sort_keys=True) + "\n"


def ensure(existing: str | None, spec: Mapping[str, Any],
           random: Callable[[int], bytes] = os.urandom) -> tuple[str, list[str]]:
    """The file for ``spec`` (settings()), keeping the stored keys: (text, reasons it changed)."""
    keys = stored_keys(existing)
    reasons = []
    if not keys:
        keys = [new_key([], random)]
        reasons.append("missing" if not existing else "unreadable")
    phase = spec.get("rotation") or ""
    rotated = rotated_keys(keys, phase, random)
    if rotated != keys:
        keys = rotated
        reasons.append(f"rotation-{phase.lower()}")
    text = config(keys, spec["enabled"], spec["resources"], spec.get("provider") or SECRETBOX, spec.get("kms"))
    if existing and text != existing and not reasons:
        reasons.append("settings")
    return text, reasons


def write_key(text: str | None) -> str:
    """The name of the key that encrypts new writes ("" when encryption is off or there is none)."""
    said = _describe(_parse(text))
    return said["writeKey"] if said and said["enabled"] else ""


def read(data: str | None) -> dict[str, Any] | None:
    """What a stored configuration says (``data``: the Secret's base64 value): ``enabled`` (a key
    writes), ``writeKey`` (the first provider's key: a secretbox key's name, or ``kms:<name>``),
    ``provider`` (``secretbox`` or ``kms``), ``keys`` (the secretbox keys' names, in order),
    ``kms`` (the plugin's name, "" without one) and ``resources``; None when there is none or it
    cannot be read."""
    try:
        return _describe(_parse(base64.b64decode(data))) if data else None
    except ValueError:
        return None


def _describe(doc: Mapping[str, Any]) -> dict[str, Any] | None:
    keys = [k["name"] for k in _keys(doc)]
    if not keys:
        return None
    entry = (doc.get("resources") or [{}])[0]
    providers = entry.get("providers") or []
    kms = next((str(p["kms"].get("name") or "") for p in providers if isinstance(p.get("kms"), dict)), "")
    first = providers[0] if providers else {}
    writer = "kms" if "kms" in first and kms else PROVIDER
    return {"enabled": PROVIDER in first or writer == "kms",
            "writeKey": KMS_WRITE_KEY.format(name=kms) if writer == "kms" else keys[0], "provider": writer,
            "keys": keys, "kms": kms, "resources": list(entry.get("resources") or [])}
