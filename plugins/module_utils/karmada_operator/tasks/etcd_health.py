"""etcd_health: every member's health, the leader, alarms and quorum (plugins/modules/etcd_health.py).

Two forms. Given ``endpoints`` (and ``tls`` or ``ca``/``cert``/``key``), one look. Given the
plan's etcd slice (``etcd``), the etcd step's quorum gate: it reads the client pair from its
Secret (plan.etcd.clientSecret), dials a local etcd's members at their pod addresses (members
advertise names only the cluster resolves), and waits up to ``timeout`` seconds for a quorum
with ``expect`` members healthy (an external etcd: six looks); without a quorum by then it fails
with the spec field to look at.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from karmada_operator.etcd.client_secret import pod_addresses, step_client_tls
from karmada_operator.etcd.gateway import CONNECTION_ARGS, EtcdError, client_from_params, tls_files
from karmada_operator.etcd.health import cluster_health
from karmada_operator.kube.client import Kube, KubeConfigError, KubeError
from karmada_operator.task import ModuleFailed

ARGUMENT_SPEC: dict[str, Any] = {
    **CONNECTION_ARGS,
    "endpoints": {"type": "list", "elements": "str"},
    "fail_without_quorum": {"type": "bool", "default": False},
    # the quorum gate: the plan's etcd slice, the members expected healthy, how long to wait
    "etcd": {"type": "dict"},
    "expect": {"type": "int"},  # default: the slice's replicas (an external etcd: 1)
    "wait": {"type": "float", "default": 600.0},
    "poll": {"type": "float", "default": 5.0},
    "kubeconfig": {"type": "path"},
}
SUPPORTS_CHECK_MODE = True
# An external etcd is someone else's: the gate looks this many times, not for the whole wait.
EXTERNAL_LOOKS = 6


def report(params: dict[str, Any], check_mode: bool = False) -> dict[str, Any]:
    """The health report; EtcdError or ValueError (bad TLS input) when etcd cannot be asked."""
    with tls_files(params.get("tls"), prefix="etcd-health-") as paths:
        result = cluster_health(client_from_params({**params, **paths}))
    result["changed"] = False
    return result


def run(params: dict[str, Any], check_mode: bool = False, warn: Callable[[str], None] = print) -> dict[str, Any]:
    if params.get("etcd"):
        return gate(params)
    if not params.get("endpoints"):
        raise ModuleFailed("endpoints or etcd is required", error="InvalidInput")
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


def gate(params: dict[str, Any]) -> dict[str, Any]:
    """Wait for a quorum with ``expect`` members healthy (module docstring)."""
    etcd = params["etcd"]
    local = etcd["mode"] == "local"
    endpoints = list(etcd["memberEndpoints"] if local else etcd["endpoints"])
    field = "spec.etcd.local" if local else "spec.etcd.external.endpoints"
    expect = int(params["expect"] or max(int(etcd.get("replicas") or 0), 1))
    poll = max(float(params["poll"]), 0.1)
    looks = max(int(float(params["wait"]) // poll), 1) if local else EXTERNAL_LOOKS
    try:
        live = Kube.default(params["kubeconfig"], in_cluster_first=True)
    except KubeConfigError as exc:
        raise ModuleFailed(str(exc)) from exc
    with live:
        tls = step_client_tls(live, etcd)
        result: dict[str, Any] = {}
        error = ""
        for look in range(looks):
            if look:
                time.sleep(poll)
            try:
                resolve = pod_addresses(live, etcd) if local else {}
                result = report({"endpoints": endpoints, "tls": tls, "resolve": resolve, "timeout": 5.0})
                error = ""
            except (EtcdError, KubeError) as exc:
                result, error = {}, str(exc)
                continue
            if result["has_quorum"] and result["healthy_count"] >= expect:
                return result
    if result.get("has_quorum"):
        return result  # a quorum, short of every member: the status step reports the rest
    why = error or "; ".join(str(m.get("error") or "") for m in result.get("members", []) if not m.get("healthy"))
    raise ModuleFailed(f"{field}: etcd at {','.join(endpoints)} has no quorum: {why}", field=field,
                       **{k: v for k, v in result.items() if k != "changed"})
