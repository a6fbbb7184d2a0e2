"""karmada_crds: Karmada's CRDs from the pinned release asset, applied and Established
(plugins/modules/karmada_crds.py)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from karmada_operator.controlplane.crds import DEFAULT_URL_TEMPLATE, CrdSourceError, apply_crds, karmada_crds
from karmada_operator.kube.client import Kube, KubeConfigError
from karmada_operator.task import ModuleFailed

ARGUMENT_SPEC: dict[str, Any] = {
    "version": {"type": "str", "default": ""},
    "url": {"type": "str"},
    "url_template": {"type": "str"},
    "sha256": {"type": "str"},
    "cache_dir": {"type": "path", "required": True},
    "ca_bundle": {"type": "str", "required": True},
    "webhook_service": {"type": "str", "required": True},
    "webhook_namespace": {"type": "str", "required": True},
    "timeout": {"type": "int", "default": 60},
    "validate_certs": {"type": "bool", "default": True},
    "proxy": {"type": "str"},
    "kubeconfig": {"type": "path"},
    "established_timeout": {"type": "int", "default": 120},
}
SUPPORTS_CHECK_MODE = True


def run(params: dict[str, Any], check_mode: bool = False, warn: Callable[[str], None] = print) -> dict[str, Any]:
    p = params
    try:
        result = karmada_crds(
            version=p["version"], ca_bundle=p["ca_bundle"], webhook_service=p["webhook_service"],
            webhook_namespace=p["webhook_namespace"], cache_dir=p["cache_dir"], url=p["url"],
            sha256=p["sha256"], timeout=p["timeout"], validate_certs=p["validate_certs"], proxy=p["proxy"],
            url_template=p["url_template"] or DEFAULT_URL_TEMPLATE,
        )
        if p["kubeconfig"]:
            with Kube.from_file(p["kubeconfig"]) as kube:
                result["applied"] = apply_crds(kube, result.pop("crds"), timeout=p["established_timeout"],
                                               check=check_mode)
    except CrdSourceError as exc:
        raise ModuleFailed(msg=str(exc), reason=exc.reason) from exc
    except KubeConfigError as exc:
        raise ModuleFailed(msg=str(exc), reason="CrdApplyFailed") from exc
    return {"changed": bool(result.get("applied")), **result}
