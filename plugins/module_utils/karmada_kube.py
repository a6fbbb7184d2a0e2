"""A small Kubernetes REST client for modules that talk to several clusters at once.

Built on the ``kubernetes`` package's ApiClient (which handles kubeconfig auth: client
certificates, tokens, exec plugins), but addressed by kind so a module can apply a list of
plain-dict manifests to any cluster without discovery. ``apply`` is create-or-patch with
change detection: a JSON merge patch is sent only when a field we set differs, so a second
run with the same input changes nothing.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from dataclasses import dataclass
from typing import Any

import yaml

# (apiVersion, kind) -> (plural, namespaced)
KINDS: dict[tuple[str, str], tuple[str, bool]] = {
    ("v1", "Namespace"): ("namespaces", False),
    ("v1", "ServiceAccount"): ("serviceaccounts", True),
    ("v1", "Secret"): ("secrets", True),
    ("v1", "ConfigMap"): ("configmaps", True),
    ("apps/v1", "Deployment"): ("deployments", True),
    ("rbac.authorization.k8s.io/v1", "ClusterRole"): ("clusterroles", False),
    ("rbac.authorization.k8s.io/v1", "ClusterRoleBinding"): ("clusterrolebindings", False),
    ("rbac.authorization.k8s.io/v1", "Role"): ("roles", True),
    ("rbac.authorization.k8s.io/v1", "RoleBinding"): ("rolebindings", True),
    ("cluster.karmada.io/v1alpha1", "Cluster"): ("clusters", False),
    ("work.karmada.io/v1alpha1", "Work"): ("works", True),
}

# Fields the API server owns: never compared, never sent.
_SERVER_FIELDS = ("status",)


class KubeError(Exception):
    """A failed call, with the HTTP status (0 when the server was not reached) and a short reason."""

    def __init__(self, status: int, reason: str, message: str):
        super().__init__(message)
        self.status = status
        self.reason = reason
        self.message = message


def contains(have: Any, want: Any) -> bool:
    """True when every field of ``want`` is in ``have`` with the same value (lists compared whole).

    An empty value wanted ("", [], {}) matches a missing field: the API server drops empty
    optional fields (omitempty), so asking for them again is not a change.
    """
    if have is None and want in ("", [], {}):
        return True
    if isinstance(want, dict):
        if not isinstance(have, dict):
            return False
        return all(contains(have.get(k), v) for k, v in want.items())
    if isinstance(want, list):
        if not isinstance(have, list) or len(have) != len(want):
            return False
        return all(contains(h, w) for h, w in zip(have, want, strict=True))
    return have == want


def path_of(api_version: str, kind: str, namespace: str | None = None, name: str | None = None) -> str:
    try:
        plural, namespaced = KINDS[(api_version, kind)]
    except KeyError as exc:
        raise ValueError(f"karmada_kube does not know {kind} ({api_version})") from exc
    base = "/api/v1" if api_version == "v1" else f"/apis/{api_version}"
    if namespaced:
        if not namespace:
            raise ValueError(f"{kind} {name} needs a namespace")
        base += f"/namespaces/{namespace}"
    base += f"/{plural}"
    return f"{base}/{name}" if name else base


def load_kubeconfig_text(text: str) -> dict[str, Any]:
    """Parse a kubeconfig; ValueError with a reason when it is not one."""
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise ValueError(f"not YAML: {str(exc).splitlines()[0]}") from exc
    if not isinstance(data, dict) or not data.get("clusters") or not data.get("users"):
        raise ValueError("not a kubeconfig (no clusters or users)")
    context_name = data.get("current-context") or ""
    contexts = {c.get("name"): c.get("context") or {} for c in data.get("contexts") or []}
    if context_name and context_name not in contexts:
        raise ValueError(f"current-context {context_name!r} is not in contexts")
    return data


def kubeconfig_cluster(data: dict[str, Any]) -> dict[str, Any]:
    """The cluster entry the current context points at (the first one without contexts)."""
    contexts = {c.get("name"): c.get("context") or {} for c in data.get("contexts") or []}
    cluster_name = (contexts.get(data.get("current-context") or "") or {}).get("cluster")
    clusters = {c.get("name"): c.get("cluster") or {} for c in data.get("clusters") or []}
    if cluster_name and cluster_name in clusters:
        return clusters[cluster_name]
    return (data.get("clusters") or [{}])[0].get("cluster") or {}


@dataclass
class Kube:
    """One cluster. ``api`` is a kubernetes.client.ApiClient."""

    api: Any
    server: str
    timeout: float = 20
    tmp: str = ""

    # ---------------------------------------------------------------------------- construction

    @classmethod
    def from_kubeconfig(cls, data: dict[str, Any], timeout: float = 20, server: str = "",
                        tls_server_name: str = "") -> Kube:
        from kubernetes import client as k8s_client
        from kubernetes import config as k8s_config

        data = json.loads(json.dumps(data))
        if server or tls_server_name:
            for entry in data.get("clusters") or []:
                if server:
                    entry.setdefault("cluster", {})["server"] = server
                if tls_server_name:
                    entry.setdefault("cluster", {})["tls-server-name"] = tls_server_name
        configuration = k8s_client.Configuration()
        # The loader writes embedded certificates to files that are read at each new TLS
        # connection: keep them in a private directory for the client's lifetime.
        tmp = tempfile.mkdtemp(prefix="karmada-kube-")
        k8s_config.load_kube_config_from_dict(data, client_configuration=configuration, temp_file_path=tmp)
        configuration.retries = 1
        return cls(api=k8s_client.ApiClient(configuration), server=configuration.host, timeout=timeout, tmp=tmp)

    @classmethod
    def default(cls, timeout: float = 20) -> Kube:
        """The cluster the operator runs against: K8S_AUTH_KUBECONFIG, KUBECONFIG, in-cluster, ~/.kube/config."""
        from kubernetes import client as k8s_client
        from kubernetes import config as k8s_config

        configuration = k8s_client.Configuration()
        path = os.environ.get("K8S_AUTH_KUBECONFIG") or os.environ.get("KUBECONFIG")
        if path:
            k8s_config.load_kube_config(config_file=path.split(os.pathsep)[0], client_configuration=configuration)
        elif os.environ.get("KUBERNETES_SERVICE_HOST"):
            k8s_config.load_incluster_config(client_configuration=configuration)
        else:
            k8s_config.load_kube_config(client_configuration=configuration)
        configuration.retries = 1
        return cls(api=k8s_client.ApiClient(configuration), server=configuration.host, timeout=timeout)

    def close(self) -> None:
        self.api.close()
        if self.tmp:
            shutil.rmtree(self.tmp, ignore_errors=True)

    # ---------------------------------------------------------------------------- raw calls

    def request(self, method: str, path: str, body: Any = None, content_type: str = "application/json",
                query: list[tuple[str, str]] | None = None) -> dict[str, Any]:
        from kubernetes.client.exceptions import ApiException
        from urllib3.exceptions import HTTPError

        headers = {"Accept": "application/json", "Content-Type": content_type}
        try:
            resp = self.api.call_api(path, method, query_params=query or [], header_params=headers, body=body,
                                     auth_settings=["BearerToken"], _preload_content=False,
                                     _request_timeout=(min(self.timeout, 10), self.timeout))
        except ApiException as exc:
            try:
                detail = json.loads(exc.body or "{}")
            except ValueError:
                detail = {}
            raise KubeError(exc.status or 0, detail.get("reason") or exc.reason or "Error",
                            detail.get("message") or str(exc.body or exc.reason)) from exc
        except (HTTPError, OSError) as exc:
            raise KubeError(0, "Unreachable", f"cannot reach {self.server}: {root_cause(exc)}") from exc
        data = resp[0].data if isinstance(resp, tuple) else resp.data
        return json.loads(data) if data else {}

    def get(self, api_version: str, kind: str, name: str, namespace: str | None = None) -> dict[str, Any] | None:
        try:
            return self.request("GET", path_of(api_version, kind, namespace, name))
        except KubeError as exc:
            if exc.status == 404:
                return None
            raise

    def list(self, api_version: str, kind: str, namespace: str | None = None,
             label_selector: str = "") -> list[dict[str, Any]]:
        query = [("labelSelector", label_selector)] if label_selector else []
        return self.request("GET", path_of(api_version, kind, namespace), query=query).get("items") or []

    def version(self) -> dict[str, Any]:
        return self.request("GET", "/version")

    def apply(self, obj: dict[str, Any]) -> tuple[dict[str, Any], bool]:
        """Create ``obj`` or patch the fields it sets; (object, changed)."""
        meta = obj["metadata"]
        api_version, kind = obj["apiVersion"], obj["kind"]
        current = self.get(api_version, kind, meta["name"], meta.get("namespace"))
        want = {k: v for k, v in obj.items() if k not in _SERVER_FIELDS}
        if current is None:
            try:
                return self.request("POST", path_of(api_version, kind, meta.get("namespace")), want), True
            except KubeError as exc:
                if exc.status != 409:
                    raise
                current = self.get(api_version, kind, meta["name"], meta.get("namespace")) or {}
        if contains(current, want):
            return current, False
        patched = self.request("PATCH", path_of(api_version, kind, meta.get("namespace"), meta["name"]), want,
                               content_type="application/merge-patch+json")
        return patched, True

    def merge_patch(self, api_version: str, kind: str, name: str, patch: dict[str, Any],
                    namespace: str | None = None) -> dict[str, Any]:
        return self.request("PATCH", path_of(api_version, kind, namespace, name), patch,
                            content_type="application/merge-patch+json")

    def delete(self, api_version: str, kind: str, name: str, namespace: str | None = None) -> bool:
        """Delete if present; True when a delete was sent."""
        try:
            self.request("DELETE", path_of(api_version, kind, namespace, name),
                         {"kind": "DeleteOptions", "apiVersion": "v1", "propagationPolicy": "Background"})
            return True
        except KubeError as exc:
            if exc.status == 404:
                return False
            raise


def root_cause(exc: BaseException) -> str:
    """The innermost reason of a connection error, in one line."""
    seen = exc
    while True:
        nxt = getattr(seen, "reason", None) or seen.__cause__ or seen.__context__
        if not isinstance(nxt, BaseException) or nxt is seen:
            break
        seen = nxt
    text = str(seen).strip() or type(seen).__name__
    return text.split("\n")[0][:300]
