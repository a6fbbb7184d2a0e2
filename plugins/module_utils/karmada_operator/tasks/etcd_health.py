"""etcd_health: every member's health, the leader, alarms and quorum (plugins/modules/etcd_health.py)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from karmada_operator.etcd.gateway import CONNECTION_ARGS, EtcdError, client_from_params, tls_files
from karmada_operator.etcd.health import cluster_health
from karmada_operator.task import ModuleFailed

ARGUMENT_SPEC: dict[str, Any] = {**CONNECTION_ARGS, "fail_without_quorum": {"type": "bool", "default": False}}
SUPPORTS_CHECK_MODE = True


def report(params: dict[str, Any], check_mode: bool = False) -> dict[str, Any]:
    """The health report; EtcdError or ValueError (bad TLS input) when etcd cannot be asked."""
    with tls_files(params.get("tls"), prefix="etcd-health-") as paths:
        result = cluster_health(client_from_params({**params, **paths}))
    result["changed"] = False
    return result


def run(params: dict[str, Any], check_mode: bool = False, warn: Callable[[str], None] = print) -> dict[str, Any]:
    try:
        result = report(params, check_mode)
    except EtcdError as exc:
        raise ModuleFailed(str(exc), error=type(exc).__name__) from exc
    except ValueError as exc:  # bad input, e.g. a tls option without its key
        raise ModuleFailed(str(exc), error="InvalidInput") from exc
    if params["fail_without_quorum"] and not result["has_quorum"]:
        bad = [f"{m['name'] or m['id']}: {m['error']}" for m in result["members"] if not m["healthy"]]
        raise ModuleFailed("etcd has no quorum; bring members back or restore from a backup. " + "; ".join(bad),
                           **result)
    return result
