"""Where a CA certificate still appears in Kubernetes objects (Secrets, ConfigMaps, webhook and
APIService caBundles, kubeconfigs inside Secrets): every string of every object is searched,
as it is, base64-decoded once, and every long base64 token inside either decoded once more, for
the certificate's DER (the body of its PEM) and for the base64 of its whole PEM.

The second decoding matters for bundles: the base64 of two PEMs (a kubeconfig's
certificate-authority-data or a caBundle in the middle of a CA rotation, inside a Secret's
base64) holds the base64 of one of them only when that PEM starts at a multiple of 3 bytes; the
decoded PEM text always holds the certificate's DER lines."""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Iterable, Iterator
from typing import Any

from cryptography import x509
from cryptography.hazmat.primitives.serialization import Encoding

_SPACE = re.compile(r"\s+")
_BASE64_TOKEN = re.compile(r"[A-Za-z0-9+/]{64,}={0,2}")


def _needles(cert: x509.Certificate) -> tuple[str, str]:
    pem = cert.public_bytes(Encoding.PEM)
    der_b64 = base64.b64encode(cert.public_bytes(Encoding.DER)).decode()
    return der_b64, base64.b64encode(pem).decode()


def _strings(value: Any, path: str) -> Iterator[tuple[str, str]]:
    if isinstance(value, str):
        yield path, value
    elif isinstance(value, dict):
        for k, v in value.items():
            yield from _strings(v, f"{path}.{k}")
    elif isinstance(value, list):
        for i, v in enumerate(value):
            yield from _strings(v, f"{path}[{i}]")


def _decoded(text: str) -> str:
    compact = _SPACE.sub("", text)
    if len(compact) < 64:
        return ""
    try:
        return base64.b64decode(compact, validate=True).decode("utf-8", "ignore")
    except (binascii.Error, ValueError):
        return ""


def places(objects: Iterable[dict], cert: x509.Certificate) -> list[str]:
    """``<kind> <namespace>/<name> <field path>`` of every string that holds ``cert``."""
    der_b64, pem_b64 = _needles(cert)
    found = []
    for obj in objects:
        meta = obj.get("metadata") or {}
        where = f"{obj.get('kind', '?')} {meta.get('namespace', '')}/{meta.get('name', '')}"
        body = {k: v for k, v in obj.items() if k != "metadata"}
        body["annotations"] = meta.get("annotations") or {}
        for path, text in _strings(body, ""):
            once = _decoded(text)
            inner = [_decoded(token) for layer in (text, once) for token in _BASE64_TOKEN.findall(layer)]
            for candidate in (text, once, *inner):
                flat = _SPACE.sub("", candidate)
                if der_b64 in flat or pem_b64 in flat:
                    found.append(f"{where} {path}")
                    break
    return found
