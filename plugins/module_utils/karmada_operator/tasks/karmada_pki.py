"""karmada_pki: the PKI set of a KarmadaDeployment, made or kept (plugins/modules/karmada_pki.py)."""

from __future__ import annotations

import base64
from collections.abc import Callable
from typing import Any

from karmada_operator.pki.pki import PkiInputError, files_from_secret_groups, reconcile_pki, secret_groups
from karmada_operator.task import ModuleFailed

ARGUMENT_SPEC: dict[str, Any] = {
    "namespace": {"type": "str", "default": "karmada-system"},
    "name": {"type": "str", "default": "karmada"},
    "cluster_domain": {"type": "str", "default": "cluster.local"},
    "etcd": {"type": "dict", "default": {}},
    "api_server": {"type": "dict", "default": {}},
    "serving_services": {"type": "dict", "default": {}},
    "components": {"type": "list", "elements": "str"},
    "certificates": {"type": "dict", "default": {}},
    # not no_log: Ansible would then mask the same PEM text in the returned files; callers use no_log
    "existing": {"type": "dict", "default": {}, "no_log": False},
    "existing_groups": {"type": "dict", "default": {}, "no_log": False},
    "existing_groups_base64": {"type": "bool", "default": False},
    "force_renew": {"type": "list", "elements": "str", "default": []},
    "force_renew_issued_before": {"type": "str"},
    "ca_rotation": {"type": "dict"},
}
SUPPORTS_CHECK_MODE = True


def pki_input(params: dict) -> dict:
    """Module parameters (snake_case) to the library's input dict (the CR's camelCase)."""
    groups = params["existing_groups"] or {}
    if params["existing_groups_base64"]:
        groups = {
            g: {k: base64.b64decode(v).decode() for k, v in (d or {}).items()} for g, d in groups.items()
        }
    existing = files_from_secret_groups(groups)
    existing.update(params["existing"] or {})
    return {
        "namespace": params["namespace"],
        "name": params["name"],
        "clusterDomain": params["cluster_domain"],
        "etcd": params["etcd"],
        "apiServer": params["api_server"],
        "servingServices": params["serving_services"],
        "components": params["components"],
        "certificates": params["certificates"],
        "forceRenew": params["force_renew"],
        "forceRenewIssuedBefore": params["force_renew_issued_before"],
        "caRotation": params["ca_rotation"] or None,
        "existing": existing,
    }


def run(params: dict[str, Any], check_mode: bool = False, warn: Callable[[str], None] = print) -> dict[str, Any]:
    try:
        result = reconcile_pki(pki_input(params))
    except PkiInputError as exc:
        raise ModuleFailed(str(exc), field=exc.field) from exc
    for warning in result.warnings:
        warn(warning)
    removed_groups = secret_groups(dict.fromkeys(result.removed, ""))
    return {
        "changed": result.changed,
        "certificates": result.certificates,
        "changes": result.changes,
        "removed": result.removed,
        "pki_warnings": result.warnings,
        "rotation": result.rotation,
        "files": result.files,
        "secret_groups": secret_groups(result.files),
        # JSON merge patches (key: null) that drop removed files from the stored Secrets
        "secret_removals": {g: dict.fromkeys(keys) for g, keys in removed_groups.items()},
    }
