"""When a renewed certificate restarts karmada-apiserver: after the components.

A pass that changes the apiserver's spec (a version upgrade, new flags) rolls karmada-apiserver
first, as the upgrade order says. A pass that changes only what the apiserver's pod template
hashes from the certificate Secrets (``operator.karmada.io/pki-hash``) keeps the running hash
while the components roll, and rolls karmada-apiserver last: the components' new client
certificates are accepted by the apiserver that is already serving, and the apiserver that
every other pod talks to restarts once the rest is done.

The apiserver's spec is compared through ``operator.karmada.io/spec-hash`` on its Deployment
(not on the pod template, so writing it restarts nothing).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

PKI_HASH = "operator.karmada.io/pki-hash"
SPEC_HASH = "operator.karmada.io/spec-hash"


def _annotations(obj: Mapping[str, Any] | None, *path: str) -> Mapping[str, Any]:
    """The annotations of the metadata at ``path`` inside ``obj``."""
    for key in path:
        obj = (obj or {}).get(key) or {}
    return (obj or {}).get("annotations") or {}


def apiserver_pki_hash(live: Mapping[str, Any] | None, wanted_pki_hash: str, spec_hash: str) -> dict[str, str]:
    """``{"now": hash to apply in the apiserver step, "later": hash to apply after the
    components, or ""}`` for the karmada-apiserver Deployment ``live`` (None: not made yet)."""
    if not live:
        return {"now": wanted_pki_hash, "later": ""}
    running = str(_annotations(live, "spec", "template", "metadata").get(PKI_HASH) or "")
    live_spec = str(_annotations(live, "metadata").get(SPEC_HASH) or "")
    if not running or running == wanted_pki_hash or live_spec != spec_hash:
        return {"now": wanted_pki_hash, "later": ""}
    return {"now": running, "later": wanted_pki_hash}
