"""The etcd client pair the operator's etcd steps dial with, read from its Secret when a step
runs (plan.etcd.clientSecret: the local etcd's health-check client, or the user's Secret for an
external etcd). The pair never passes through the pass's facts, so it cannot reach a log."""

from __future__ import annotations

import base64
import binascii
import contextlib
from collections.abc import Iterator, Mapping
from typing import Any

from karmada_operator.etcd.gateway import EtcdClient, tls_files
from karmada_operator.kube.client import Kube, KubeError
from karmada_operator.task import ModuleFailed


class ClientSecretError(Exception):
    """The Secret or one of its keys is missing; ``field`` is the spec path to look at."""

    def __init__(self, message: str, field: str) -> None:
        super().__init__(message)
        self.field = field


def client_tls(kube: Kube, etcd: Mapping[str, Any]) -> dict[str, str]:
    """The PEMs (``ca.crt``, ``tls.crt``, ``tls.key``) of ``etcd["clientSecret"]`` in
    ``etcd["namespace"]``; ClientSecretError naming the Secret and what it lacks."""
    ref, namespace = etcd["clientSecret"], etcd["namespace"]
    secret = kube.get("v1", "Secret", ref["name"], namespace)
    wanted = ", ".join(ref["keys"].values())
    if secret is None:
        raise ClientSecretError(f"{ref['field']}: Secret {ref['name']} must exist in {namespace} with keys {wanted}",
                                ref["field"])
    data = secret.get("data") or {}
    missing = [key for key in ref["keys"].values() if not data.get(key)]
    if missing:
        raise ClientSecretError(f"{ref['field']}: Secret {ref['name']} must exist in {namespace} with keys {wanted} "
                                f"({', '.join(missing)} missing)", ref["field"])
    try:
        return {option: base64.b64decode(data[key]).decode() for option, key in ref["keys"].items()}
    except (binascii.Error, UnicodeDecodeError) as exc:
        raise ClientSecretError(f"{ref['field']}: Secret {ref['name']} holds data that is not PEM text",
                                ref["field"]) from exc


def step_client_tls(kube: Kube, etcd: Mapping[str, Any]) -> dict[str, str]:
    """:func:`client_tls` for an etcd task: a missing Secret or key fails the task naming the
    spec field, an API error with its status."""
    try:
        return client_tls(kube, etcd)
    except ClientSecretError as exc:
        raise ModuleFailed(str(exc), field=exc.field) from exc
    except KubeError as exc:
        raise ModuleFailed(f"{exc.status} {exc.reason}: {exc.message}") from exc


def pod_addresses(live: Kube, etcd: Mapping[str, Any]) -> dict[str, str]:
    """Member DNS name -> pod IP, for a local etcd's members (they advertise names only the
    cluster resolves; the operator may run outside it)."""
    pods = live.list("v1", "Pod", etcd["namespace"], label_selector=etcd["selector"])
    return {f"{pod['metadata']['name']}.{etcd['memberDomain']}": (pod.get("status") or {}).get("podIP")
            for pod in pods if (pod.get("status") or {}).get("podIP")}


@contextlib.contextmanager
def etcd_client(kube: Kube, etcd: Mapping[str, Any], *, timeout: float = 5.0, prefix: str = "etcd-client-",
                tls: Mapping[str, str] | None = None) -> Iterator[EtcdClient]:
    """The operator's client of a plan's etcd (``plan["etcd"]``): a local etcd's members by
    their names, dialled at their pods' addresses, or an external etcd's endpoints; the client
    pair from its Secret (:func:`step_client_tls`, or ``tls`` when the caller read it), in
    files that exist while the block runs."""
    local = etcd["mode"] == "local"
    pems = tls if tls is not None else step_client_tls(kube, etcd)
    resolve = pod_addresses(kube, etcd) if local else None
    with tls_files(pems, prefix=prefix) as files:
        yield EtcdClient(etcd["memberEndpoints"] if local else etcd["endpoints"], cert=files.get("cert"),
                         key=files.get("key"), ca=files.get("ca"), timeout=timeout, resolve=resolve)
