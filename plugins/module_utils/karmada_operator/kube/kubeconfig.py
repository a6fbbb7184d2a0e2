"""Small kubeconfig edits the install needs, as plain functions."""

from __future__ import annotations

from typing import Any

import yaml


def with_server(kubeconfig: str, server: str, tls_server_name: str = "") -> str:
    """The same kubeconfig pointing every cluster at ``server``; ``tls_server_name`` keeps the
    certificate check on the name the serving certificate carries (e.g. when dialling a ClusterIP)."""
    data: dict[str, Any] = yaml.safe_load(kubeconfig) or {}
    clusters = data.get("clusters") or []
    if not clusters:
        raise ValueError("kubeconfig has no clusters")
    for entry in clusters:
        cluster = entry.setdefault("cluster", {})
        cluster["server"] = server
        if tls_server_name:
            cluster["tls-server-name"] = tls_server_name
        else:
            cluster.pop("tls-server-name", None)
    return yaml.safe_dump(data, sort_keys=False)
