"""Kubernetes from Python, for every plugin of this project: one loader, one client.

A thin layer over the ``kubernetes`` package's dynamic client (``kubernetes.dynamic``, what
kubernetes.core builds on):

* credentials: :meth:`Kube.from_kubeconfig` (a parsed kubeconfig or its text, e.g. from a
  Secret), :meth:`Kube.from_file`, :meth:`Kube.in_cluster`, and :meth:`Kube.default`, the one
  place that decides where the operator's own credentials come from;
* resources are found by API discovery (cached per client), so any kind the server serves can
  be addressed by ``(apiVersion, kind)``, including CRDs created a moment ago and aggregated
  APIs such as Karmada's ``cluster.karmada.io``;
* :meth:`Kube.apply` is server-side apply with field manager ``karmada-operator``: only the
  fields in the manifest are ours, fields other writers own (a service-account token's data,
  an agent's Cluster spec) are left to them. It reports a change only when the apply changed
  the object (its content; status and bookkeeping aside): a second run with the same input
  changes nothing;
* every failed call is a :class:`KubeError` (HTTP status, reason, one-line message; status 0
  when the server was not reached). Messages never carry object contents.
"""

from __future__ import annotations

import base64
import binascii
import json
import os
import shutil
import tempfile
import time
import weakref
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml

FIELD_MANAGER = "karmada-operator"
# Fields the API server owns: never sent by apply.
_SERVER_FIELDS = ("status",)
_SERVER_METADATA = ("resourceVersion", "uid", "creationTimestamp", "generation", "managedFields",
                    "deletionTimestamp", "selfLink")
PAGE_SIZE = 500


class KubeError(Exception):
    """A failed call, with the HTTP status (0 when the server was not reached) and a short reason."""

    def __init__(self, status: int, reason: str, message: str, server: str = ""):
        super().__init__(message)
        self.status = status
        self.reason = reason
        self.message = message
        self.server = server  # the API server not reached (status 0), when known


class KubeConfigError(ValueError):
    """Credentials could not be loaded (no kubeconfig found, or not a usable one)."""


def root_cause(exc: BaseException) -> str:
    """The innermost reason of a (connection) error, in one line."""
    seen = exc
    while True:
        nxt = getattr(seen, "reason", None) or seen.__cause__ or seen.__context__
        if not isinstance(nxt, BaseException) or nxt is seen:
            break
        seen = nxt
    text = str(seen).strip() or type(seen).__name__
    return text.split("\n")[0][:300]


# --------------------------------------------------------------------------- kubeconfig data


def content(obj: dict[str, Any] | None) -> dict[str, Any]:
    """An object without its status and the server's bookkeeping (resourceVersion, managedFields...)."""
    obj = obj or {}
    meta = {k: v for k, v in (obj.get("metadata") or {}).items() if k not in _SERVER_METADATA}
    return {**{k: v for k, v in obj.items() if k not in _SERVER_FIELDS}, "metadata": meta}


def content_changed(before: dict[str, Any] | None, after: dict[str, Any] | None) -> bool:
    """Whether a write changed what the object says (not only its status or resourceVersion)."""
    return content(before) != content(after)


def owner_reference(owner: dict[str, Any], *, block_owner_deletion: bool | None = None) -> dict[str, Any]:
    """An ownerReference to ``owner`` (a full object: apiVersion, kind, metadata.name and uid),
    so garbage collection removes the dependant with its owner.

    Objects the operator creates with a plain create through the runtime's proxy get one from
    the proxy, but the proxy injects it into POST requests only: an object made by server-side
    apply (a PATCH) must carry its own. The fields match the proxy's, so applying it to an
    object the proxy created changes nothing."""
    meta = owner["metadata"]
    ref = {"apiVersion": owner["apiVersion"], "kind": owner["kind"], "name": meta["name"], "uid": meta["uid"]}
    if block_owner_deletion is not None:
        ref["blockOwnerDeletion"] = block_owner_deletion
    return ref


def load_kubeconfig_text(text: str) -> dict[str, Any]:
    """Parse a kubeconfig; ValueError with a reason when it is not one."""
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise ValueError(f"not YAML: {str(exc).splitlines()[0]}") from None
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


# --------------------------------------------------------------------------- helpers


def _kubernetes():
    """The kubernetes package's parts, imported when a client is first made (not at import time:
    the filter plugin and the Jobs import this module without talking to a cluster)."""
    from kubernetes import client, config
    from kubernetes.config.config_exception import ConfigException

    return client, config, ConfigException


def _forget_temp_files(directory: str) -> None:
    """Drop the kubernetes loader's memo of certificate files under ``directory`` (being removed):
    it reuses a file by content, which would hand a later client a path that is gone."""
    from kubernetes.config import kube_config

    memo = getattr(kube_config, "_temp_files", None)
    if isinstance(memo, dict):
        for key, path in list(memo.items()):
            if str(path).startswith(directory + os.sep):
                memo.pop(key, None)


# Embedded credentials of a kubeconfig, and the key naming the same as a file.
_EMBEDDED = (("clusters", "cluster", "certificate-authority-data", "certificate-authority"),
             ("users", "user", "client-certificate-data", "client-certificate"),
             ("users", "user", "client-key-data", "client-key"))


def _embedded_to_files(data: dict[str, Any], directory: str) -> None:
    """Write every embedded certificate and key of ``data`` to a file of its own in ``directory``
    (0600) and name that file in ``data`` instead. The kubernetes loader would write them itself,
    but it memoizes its files by content across clients: two clients made at the same time from
    the same credentials (every member thread of one pass reaches karmada-apiserver with the same
    admin kubeconfig) would share one file, and the first one closed would remove it from under
    the other, whose next TLS connection then fails with "No such file or directory"."""
    for n, (section, entry_key, data_key, file_key) in enumerate(_EMBEDDED):
        for i, entry in enumerate(data.get(section) or []):
            body = entry.get(entry_key) if isinstance(entry, dict) else None
            if not isinstance(body, dict) or not body.get(data_key):
                continue
            try:
                content = base64.b64decode(body[data_key], validate=True)
            except (binascii.Error, TypeError, ValueError) as exc:
                raise KubeConfigError(f"{section}[{i}].{entry_key}.{data_key} is not base64: {exc}") from None
            path = os.path.join(directory, f"{section}-{i}-{n}")
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(fd, "wb") as out:
                out.write(content)
            del body[data_key]
            body[file_key] = path


def _remove_private_dir(directory: str) -> None:
    _forget_temp_files(directory)
    shutil.rmtree(directory, ignore_errors=True)


def _secret_values(obj: dict[str, Any]) -> list[str]:
    """The values of a Secret manifest (base64 and decoded), to keep them out of error messages."""
    if obj.get("kind") != "Secret":
        return []
    values = []
    for key in ("data", "stringData"):
        for value in (obj.get(key) or {}).values():
            if not isinstance(value, str) or len(value) < 8:
                continue
            values.append(value)
            if key == "data":
                try:
                    decoded = base64.b64decode(value).decode()
                except (binascii.Error, UnicodeDecodeError):
                    continue
                values.extend(line for line in [decoded, *decoded.splitlines()] if len(line) >= 8)
    return sorted(set(values), key=len, reverse=True)


def _api_error(exc: Any, hide: list[str] | None = None) -> KubeError:
    """A KubeError from an ApiException: the server's Status reason and message, one line."""
    body = exc.body
    if isinstance(body, bytes):
        body = body.decode("utf-8", "replace")
    detail: dict[str, Any] = {}
    try:
        parsed = json.loads(body or "{}")
        if isinstance(parsed, dict):
            detail = parsed
    except ValueError:
        pass
    reason = detail.get("reason") or exc.reason or "Error"
    message = detail.get("message") or exc.reason or f"HTTP {exc.status}"
    for value in hide or []:
        message = message.replace(value, "<redacted>")
    return KubeError(exc.status or 0, str(reason), str(message).split("\n")[0][:1000])


def _dynamic_client_class():
    from kubernetes.dynamic import DynamicClient

    class TimedDynamicClient(DynamicClient):
        """The dynamic client with a timeout on every request, discovery included."""

        def __init__(self, client, timeout, cache_file):
            self._karmada_timeout = timeout
            super().__init__(client, cache_file=cache_file)

        def request(self, method, path, body=None, **params):
            params.setdefault("_request_timeout", self._karmada_timeout)
            return super().request(method, path, body, **params)

    return TimedDynamicClient


# --------------------------------------------------------------------------- the client


class Kube:
    """One cluster, reached through the dynamic client.

    ``where`` says where the credentials came from (for messages); ``server`` is the API URL.
    Build with the class methods; ``close()`` (or ``with``) removes the private directory
    that holds the certificate files the loader wrote.
    """

    def __init__(self, configuration: Any, where: str, timeout: float = 20, tmp: str = "",
                 discovery_wait: float = 5):
        k8s_client, _, _ = _kubernetes()
        configuration.retries = 1  # fail fast on an unreachable server; the operator retries the reconcile
        self.configuration = configuration
        self.api = k8s_client.ApiClient(configuration)
        self.where = where
        self.timeout = timeout
        # Private directory (0700) for certificate files and the discovery cache, removed by close().
        self.tmp = tmp or tempfile.mkdtemp(prefix="karmada-kube-")
        self._finalizer = weakref.finalize(self, _remove_private_dir, self.tmp)
        self.discovery_wait = discovery_wait
        self._dynamic: Any = None
        self._resources: dict[tuple[str, str], Any] = {}

    def __repr__(self) -> str:
        return f"Kube({self.server!r}, credentials from {self.where})"

    @property
    def server(self) -> str:
        return self.configuration.host

    # ---------------------------------------------------------------------------- construction

    @classmethod
    def from_kubeconfig(cls, data: dict[str, Any] | str, *, context: str | None = None, server: str = "",
                        tls_server_name: str = "", timeout: float = 20, where: str = "a kubeconfig") -> Kube:
        """A parsed kubeconfig (or its text); ``server``/``tls_server_name`` override every cluster's."""
        k8s_client, k8s_config, config_exception = _kubernetes()
        try:
            data = load_kubeconfig_text(data) if isinstance(data, str) else json.loads(json.dumps(data))
        except ValueError as exc:
            raise KubeConfigError(f"cannot load Kubernetes credentials from {where}: {exc}") from None
        if server or tls_server_name:
            for entry in data.get("clusters") or []:
                if server:
                    entry.setdefault("cluster", {})["server"] = server
                if tls_server_name:
                    entry.setdefault("cluster", {})["tls-server-name"] = tls_server_name
        configuration = k8s_client.Configuration()
        # Certificates and keys are read from files at each new TLS connection: this client's
        # own files, in a private directory for its lifetime (_embedded_to_files says why the
        # loader does not write them).
        tmp = tempfile.mkdtemp(prefix="karmada-kube-")
        try:
            _embedded_to_files(data, tmp)
            k8s_config.load_kube_config_from_dict(data, context=context, client_configuration=configuration,
                                                  temp_file_path=tmp)
        except KubeConfigError as exc:
            _remove_private_dir(tmp)
            raise KubeConfigError(f"cannot load Kubernetes credentials from {where}: {exc}") from None
        except (config_exception, OSError, TypeError, ValueError, KeyError, AttributeError) as exc:
            _remove_private_dir(tmp)
            raise KubeConfigError(f"cannot load Kubernetes credentials from {where}: {root_cause(exc)}") from None
        return cls(configuration, where, timeout=timeout, tmp=tmp)

    @classmethod
    def from_file(cls, path: str, *, context: str | None = None, timeout: float = 20, where: str = "") -> Kube:
        """A kubeconfig file; several joined by ':' (like KUBECONFIG) are merged."""
        k8s_client, k8s_config, config_exception = _kubernetes()
        where = where or f"kubeconfig {path}"
        configuration = k8s_client.Configuration()
        tmp = tempfile.mkdtemp(prefix="karmada-kube-")
        try:
            k8s_config.load_kube_config(config_file=path, context=context, client_configuration=configuration,
                                        temp_file_path=tmp)
        except (config_exception, OSError, TypeError, ValueError, KeyError, AttributeError,
                yaml.YAMLError) as exc:
            _remove_private_dir(tmp)
            raise KubeConfigError(f"cannot load Kubernetes credentials from {where}: {root_cause(exc)}") from None
        return cls(configuration, where, timeout=timeout, tmp=tmp)

    @classmethod
    def in_cluster(cls, *, timeout: float = 20) -> Kube:
        """The pod's service account."""
        k8s_client, k8s_config, config_exception = _kubernetes()
        where = "the in-cluster service account"
        configuration = k8s_client.Configuration()
        try:
            k8s_config.load_incluster_config(client_configuration=configuration)
        except (config_exception, OSError, ValueError) as exc:
            raise KubeConfigError(f"cannot load Kubernetes credentials from {where}: {root_cause(exc)}") from None
        return cls(configuration, where, timeout=timeout)

    @classmethod
    def default(cls, kubeconfig: str | None = None, *, context: str | None = None, timeout: float = 20,
                in_cluster_first: bool = False) -> Kube:
        """The cluster the operator works in. The first that is set: ``kubeconfig`` (a path),
        K8S_AUTH_KUBECONFIG, KUBECONFIG (several files are merged), the in-cluster service
        account (KUBERNETES_SERVICE_HOST), ~/.kube/config. ``context`` defaults to K8S_AUTH_CONTEXT,
        then the kubeconfig's current context.

        ``in_cluster_first`` asks for the API server itself rather than the runtime's proxy: the
        service account, else KUBECONFIG, before K8S_AUTH_KUBECONFIG. ansible-operator points
        K8S_AUTH_KUBECONFIG at its API proxy, which answers GETs of watched kinds from its
        informer cache, a moment behind a write; a caller that reads an object to write it back
        (k8s_status), or that waits for what a write started (a rollout), wants the live object.
        The operator's own credentials are the service account in its pod, and KUBECONFIG when
        it runs on a host (`make run`)."""
        context = context or os.environ.get("K8S_AUTH_CONTEXT") or None
        if kubeconfig:
            return cls.from_file(os.path.expanduser(kubeconfig), context=context, timeout=timeout)
        if in_cluster_first and os.environ.get("KUBERNETES_SERVICE_HOST"):
            return cls.in_cluster(timeout=timeout)
        if in_cluster_first and os.environ.get("KUBECONFIG") and os.environ.get("K8S_AUTH_KUBECONFIG"):
            return cls.from_file(os.environ["KUBECONFIG"], context=context, timeout=timeout,
                                 where=f"KUBECONFIG={os.environ['KUBECONFIG']}")
        for var in ("K8S_AUTH_KUBECONFIG", "KUBECONFIG"):
            if os.environ.get(var):
                return cls.from_file(os.environ[var], context=context, timeout=timeout,
                                     where=f"{var}={os.environ[var]}")
        if os.environ.get("KUBERNETES_SERVICE_HOST"):
            return cls.in_cluster(timeout=timeout)
        home = Path.home() / ".kube" / "config"
        if home.exists():
            return cls.from_file(str(home), context=context, timeout=timeout)
        raise KubeConfigError("no Kubernetes credentials: set K8S_AUTH_KUBECONFIG or KUBECONFIG (or the kubeconfig "
                              "option), or run inside a cluster")

    def close(self) -> None:
        self.api.close()
        self._finalizer()

    def __enter__(self) -> Kube:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ---------------------------------------------------------------------------- plumbing

    def _call(self, fn: Callable[[], Any], hide: list[str] | None = None) -> Any:
        """Run one client call; every failure becomes a KubeError."""
        from kubernetes.client.exceptions import ApiException
        from urllib3.exceptions import HTTPError

        try:
            return fn()
        except ApiException as exc:
            raise _api_error(exc, hide) from None  # the exception's body may echo what we sent
        except (HTTPError, OSError) as exc:
            raise KubeError(0, "Unreachable", f"cannot reach the Kubernetes API at {self.server}: {root_cause(exc)}",
                            server=self.server) from exc

    def dynamic(self) -> Any:
        """The kubernetes.dynamic.DynamicClient (made at first use: it reads discovery)."""
        if self._dynamic is None:
            # Discovery is cached for this client only (the library's default is a file per
            # server URL in /tmp, shared by every process and never expired).
            cache = os.path.join(self.tmp, "discovery.json")
            cls = _dynamic_client_class()
            self._dynamic = self._call(lambda: cls(self.api, (min(self.timeout, 10), self.timeout), cache))
        return self._dynamic

    def resource(self, api_version: str, kind: str) -> Any:
        """The discovered API resource for a kind. A kind missing from discovery is looked up
        again (fresh discovery) for up to ``discovery_wait`` seconds: a CRD created a moment ago
        is served a little later. KubeError 404 when the server does not serve it, or the
        server's own error (e.g. 503 from an aggregated API whose backend is down)."""
        from kubernetes.dynamic.exceptions import ResourceNotFoundError, ResourceNotUniqueError

        key = (api_version, kind)
        if key in self._resources:
            return self._resources[key]
        dyn = self.dynamic()
        # Narrow the search to the one group version: a bare "v1" would otherwise make the
        # lazy discoverer read every group that has a v1.
        group, _, version = api_version.rpartition("/")
        where = {"prefix": "apis" if group else "api", "group": group, "api_version": version, "kind": kind}
        base = f"/apis/{api_version}" if group else f"/api/{version}"
        deadline = time.monotonic() + self.discovery_wait
        while True:
            try:
                found = self._call(lambda: dyn.resources.get(**where))
            except ResourceNotFoundError:
                found = None
            except ResourceNotUniqueError as exc:
                raise KubeError(400, "Ambiguous", f"{kind} ({api_version}) names several resources: {exc}") from None
            if found is not None:
                self._resources[key] = found
                return found
            # Not discovered: ask the group version itself, which says why (404: not served;
            # 503: an aggregated API whose server is not ready; 0: unreachable).
            try:
                self._call(lambda: dyn.request("get", base, serialize=False))
            except KubeError as exc:
                if exc.status != 404:
                    raise
            if time.monotonic() >= deadline:
                raise KubeError(404, "NotFound", f"{self.server} does not serve {kind} ({api_version})")
            time.sleep(0.5)

    @staticmethod
    def _json(response: Any) -> dict[str, Any]:
        data = response.data
        return json.loads(data) if data else {}

    # ---------------------------------------------------------------------------- calls

    def version(self) -> dict[str, Any]:
        """The server's /version (a live request: also a reachability check)."""
        dyn = self.dynamic()
        return self._json(self._call(lambda: dyn.request("get", "/version", serialize=False)))

    def get(self, api_version: str, kind: str, name: str, namespace: str | None = None) -> dict[str, Any] | None:
        """The object, or None when it (or its kind) does not exist."""
        try:
            res = self.resource(api_version, kind)
            return self._json(self._call(lambda: res.get(name=name, namespace=namespace, serialize=False)))
        except KubeError as exc:
            if exc.status == 404:
                return None
            raise

    def list(self, api_version: str, kind: str, namespace: str | None = None, label_selector: str = "",
             field_selector: str = "") -> list[dict[str, Any]]:
        """Every object of a kind (in ``namespace``, or in all namespaces), page by page."""
        res = self.resource(api_version, kind)
        items: list[dict[str, Any]] = []
        token = None
        while True:
            kwargs: dict[str, Any] = {"limit": PAGE_SIZE, "serialize": False}
            if label_selector:
                kwargs["label_selector"] = label_selector
            if field_selector:
                kwargs["field_selector"] = field_selector
            if token:
                kwargs["_continue"] = token
            body = self._json(self._call(lambda kw=kwargs: res.get(namespace=namespace, **kw)))
            items.extend(body.get("items") or [])
            previous, token = token, (body.get("metadata") or {}).get("continue")
            # ansible-operator's proxy answers lists of cached kinds from its informer, ignoring
            # limit and continue but echoing a continue token: the whole list came in one page.
            if not token or token == previous or len(body.get("items") or []) < PAGE_SIZE:
                return items

    def apply(self, obj: dict[str, Any], *, field_manager: str = FIELD_MANAGER,
              force: bool = True) -> tuple[dict[str, Any], bool]:
        """Server-side apply of the fields ``obj`` sets; (object, changed).

        ``force`` takes over fields another manager set (ours by intent). Changed means the
        apply created the object or changed its content (``content_changed``): applying what is
        already there writes nothing, so a repeated apply reports no change, even while other
        controllers keep writing the object's status (which moves its resourceVersion).
        """
        meta = obj["metadata"]
        api_version, kind, name, namespace = obj["apiVersion"], obj["kind"], meta["name"], meta.get("namespace")
        body = {k: v for k, v in obj.items() if k not in _SERVER_FIELDS}
        body["metadata"] = {k: v for k, v in meta.items() if k not in _SERVER_METADATA}
        before = self.get(api_version, kind, name, namespace)
        res = self.resource(api_version, kind)
        out = self._json(self._call(
            lambda: res.server_side_apply(body=body, name=name, namespace=namespace, field_manager=field_manager,
                                          force_conflicts=force, serialize=False),
            hide=_secret_values(obj)))
        if before is None:
            return out, True
        return out, content_changed(before, out)

    def create(self, obj: dict[str, Any], *, dry_run: bool = False) -> dict[str, Any]:
        """Create the object (``metadata.generateName`` works); KubeError 409 when it exists.
        ``dry_run``: admission runs (webhooks included), nothing is stored."""
        meta = obj["metadata"]
        res = self.resource(obj["apiVersion"], obj["kind"])
        extra = {"dry_run": "All"} if dry_run else {}
        return self._json(self._call(
            lambda: res.create(body=obj, namespace=meta.get("namespace"), field_manager=FIELD_MANAGER,
                               serialize=False, **extra),
            hide=_secret_values(obj)))

    def replace(self, obj: dict[str, Any]) -> dict[str, Any]:
        """Replace the object; with ``metadata.resourceVersion`` set, KubeError 409 when it moved
        since it was read (optimistic concurrency: a Lease taken by someone else meanwhile)."""
        meta = obj["metadata"]
        res = self.resource(obj["apiVersion"], obj["kind"])
        return self._json(self._call(
            lambda: res.replace(body=obj, name=meta["name"], namespace=meta.get("namespace"),
                                field_manager=FIELD_MANAGER, serialize=False),
            hide=_secret_values(obj)))

    def pod_log(self, name: str, namespace: str, container: str = "", tail_lines: int = 0,
                previous: bool = False) -> str:
        """The log of a pod's container (its last ``tail_lines`` lines when > 0; ``previous``: of
        the container's last exit)."""
        from kubernetes.client import CoreV1Api

        kwargs: dict[str, Any] = {"_request_timeout": self.timeout}
        if container:
            kwargs["container"] = container
        if tail_lines > 0:
            kwargs["tail_lines"] = tail_lines
        if previous:
            kwargs["previous"] = True
        api = CoreV1Api(self.api)
        # Raw bytes: the client would otherwise parse a log that is JSON and hand back a dict.
        resp = self._call(lambda: api.read_namespaced_pod_log(name, namespace, _preload_content=False, **kwargs))
        return resp.data.decode(errors="replace")

    def merge_patch(self, api_version: str, kind: str, name: str, patch: dict[str, Any],
                    namespace: str | None = None, subresource: str = "") -> dict[str, Any]:
        """A JSON merge patch (of the object, or of a subresource such as ``status``)."""
        res = self.resource(api_version, kind)
        if subresource and subresource not in res.subresources:
            raise KubeError(404, "NotFound", f"{kind} ({api_version}) has no {subresource} subresource")
        target = res.subresources[subresource] if subresource else res
        return self._json(self._call(
            lambda: target.patch(body=patch, name=name, namespace=namespace,
                                 content_type="application/merge-patch+json", field_manager=FIELD_MANAGER,
                                 serialize=False),
            hide=_secret_values({"kind": kind, **patch})))

    def delete(self, api_version: str, kind: str, name: str, namespace: str | None = None, *,
               uid: str = "") -> bool:
        """Delete if present (dependents in the background); True when a delete was sent.
        ``uid``: only that incarnation of the object (KubeError 409 when it was replaced since)."""
        try:
            res = self.resource(api_version, kind)
            body = {"preconditions": {"uid": uid}} if uid else None
            self._call(lambda: res.delete(name=name, namespace=namespace, body=body,
                                          propagation_policy="Background", serialize=False))
            return True
        except KubeError as exc:
            if exc.status == 404:
                return False
            raise
