"""Running pods read a certificate the certificates step wrote now, not at the kubelet's next sync.

karmada-apiserver and etcd reload their serving pairs (etcd its peer pair too) from disk, so a
renewed leaf restarts neither (pki/cert_rollout.py). The files come from a Secret volume, which
the kubelet refreshes on its own sync of the pod: 85 s after the Secret's change, measured on the
test bed, while a change to the pod itself makes it sync that pod's volumes at once (0.8 s).
Until then the pod serves the certificate it had: after an edit that adds an address to
karmada-apiserver's certificate (spec.apiServer.externalLoadBalancer), a Pull member's agent
dialling that address failed TLS ("certificate is valid for 127.0.0.1, not 192.0.2.2") and
crash-looped for that minute and a half while the pass reported Running.

So, after the step writes a Secret, each running pod that mounts it gets the hash of what it
mounts as an annotation (``MOUNTED``), which is the change that makes the kubelet sync it; then
the step waits until every Ready karmada-apiserver pod serves the certificate stored, read from
its own TLS handshake. A pod that already carries the hash is left alone (a second pass writes
nothing). Only pods are annotated, never their Deployment or StatefulSet: nothing restarts.
"""

from __future__ import annotations

import hashlib
import socket
import ssl
import time
from collections.abc import Callable, Mapping
from typing import Any

from cryptography import x509
from cryptography.hazmat.primitives.serialization import Encoding

from karmada_operator.kube.client import Kube

MOUNTED = "operator.karmada.io/pki-mounted"
SERVED_WAIT = 30.0  # seconds for karmada-apiserver to serve what the kubelet wrote (1-2 s seen)


def mounted_hash(data: Mapping[str, str], keys: list[str] | None = None) -> str:
    """A short hash of the Secret keys a pod mounts (``keys``; None: every key)."""
    picked = sorted(data) if keys is None else sorted(k for k in keys if k in data)
    digest = hashlib.sha256()
    for key in picked:
        digest.update(key.encode() + b"\0" + data[key].encode() + b"\0")
    return digest.hexdigest()[:16]


def _running(kube: Kube, namespace: str, selector: Mapping[str, str]) -> list[dict[str, Any]]:
    pods = kube.list("v1", "Pod", namespace, label_selector=",".join(f"{k}={v}" for k, v in selector.items()))
    return [p for p in pods if not p["metadata"].get("deletionTimestamp")
            and (p.get("status") or {}).get("phase") in ("Pending", "Running")]


def annotate(kube: Kube, namespace: str, selector: Mapping[str, str], value: str) -> list[str]:
    """Give every running pod ``selector`` picks the ``MOUNTED`` annotation ``value``; the pods
    annotated (those that had it are skipped)."""
    done = []
    for pod in _running(kube, namespace, selector):
        meta = pod["metadata"]
        if (meta.get("annotations") or {}).get(MOUNTED) == value:
            continue
        kube.merge_patch("v1", "Pod", meta["name"], {"metadata": {"annotations": {MOUNTED: value}}},
                         namespace=namespace)
        done.append(meta["name"])
    return done


def served_certificate(ip: str, port: int, timeout: float = 5.0) -> bytes:
    """The DER of the leaf certificate ``ip:port`` presents (not verified: only read)."""
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    with socket.create_connection((ip, port), timeout=timeout) as sock, \
            context.wrap_socket(sock, server_hostname=None) as tls:
        return tls.getpeercert(binary_form=True) or b""


def _ready(pod: Mapping[str, Any]) -> bool:
    conditions = (pod.get("status") or {}).get("conditions") or []
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)


def wait_served(kube: Kube, namespace: str, selector: Mapping[str, str], port: int, certificate_pem: str,
                timeout: float = SERVED_WAIT, read: Callable[[str, int], bytes] = served_certificate,
                clock: Callable[[], float] = time.monotonic, sleep: Callable[[float], None] = time.sleep) -> list[str]:
    """Wait until every Ready pod ``selector`` picks serves ``certificate_pem`` on ``port``; the
    pods still serving another one (or not answering) at ``timeout``, as "name: why"."""
    wanted = x509.load_pem_x509_certificate(certificate_pem.encode()).public_bytes(Encoding.DER)
    deadline = clock() + timeout
    while True:
        behind = []
        for pod in _running(kube, namespace, selector):
            ip = (pod.get("status") or {}).get("podIP")
            if not ip or not _ready(pod):
                continue
            try:
                if read(ip, port) != wanted:
                    behind.append(f"{pod['metadata']['name']}: serves an older certificate")
            except OSError as exc:
                behind.append(f"{pod['metadata']['name']}: {exc}")
        if not behind or clock() >= deadline:
            return behind
        sleep(0.5)
