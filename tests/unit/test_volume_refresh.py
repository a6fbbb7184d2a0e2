"""pki/volume_refresh: which pods get the annotation that makes the kubelet sync their certificate
volume, and the wait that reads what karmada-apiserver serves from a real TLS handshake."""

from __future__ import annotations

import copy
import datetime as dt
import socket
import ssl
import threading
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from karmada_operator.pki import volume_refresh

SELECTOR = {"app.kubernetes.io/name": "karmada-apiserver", "app.kubernetes.io/instance": "karmada"}


def pod(name, ip="", ready=True, annotations=None, deleting=False, phase="Running", labels=SELECTOR):
    meta = {"name": name, "labels": dict(labels), "annotations": dict(annotations or {})}
    if deleting:
        meta["deletionTimestamp"] = "2026-12-06T00:00:00Z"
    return {"metadata": meta, "status": {"phase": phase, "podIP": ip,
                                         "conditions": [{"type": "Ready", "status": str(ready)}]}}


class Pods:
    """The host's pods as a list; every patch recorded and applied."""

    def __init__(self, *pods):
        self.pods = list(pods)
        self.patches = []

    def list(self, api_version, kind, namespace=None, label_selector=""):
        want = dict(p.split("=", 1) for p in label_selector.split(",") if p)
        return [copy.deepcopy(p) for p in self.pods
                if all(p["metadata"]["labels"].get(k) == v for k, v in want.items())]

    def merge_patch(self, api_version, kind, name, patch, namespace=None):
        self.patches.append((kind, name, patch))
        target = next(p for p in self.pods if p["metadata"]["name"] == name)
        target["metadata"]["annotations"].update(patch["metadata"]["annotations"])


def test_the_hash_covers_only_the_keys_a_pod_mounts():
    data = {"apiserver.crt": "a", "apiserver.key": "k", "karmada-search.crt": "s"}
    mounted = volume_refresh.mounted_hash(data, ["apiserver.crt", "apiserver.key"])
    assert volume_refresh.mounted_hash({**data, "karmada-search.crt": "other"}, ["apiserver.crt", "apiserver.key"]) \
        == mounted
    assert volume_refresh.mounted_hash({**data, "apiserver.crt": "b"}, ["apiserver.crt", "apiserver.key"]) != mounted
    assert volume_refresh.mounted_hash(data) != mounted  # every key


def test_running_pods_are_annotated_once_and_no_other_pod_is():
    other = {"app.kubernetes.io/name": "etcd", "app.kubernetes.io/instance": "karmada"}
    kube = Pods(pod("api-0"), pod("api-1", annotations={volume_refresh.MOUNTED: "old"}),
                pod("api-2", annotations={volume_refresh.MOUNTED: "h1"}), pod("api-going", deleting=True),
                pod("api-done", phase="Succeeded"), pod("etcd-0", labels=other))
    assert volume_refresh.annotate(kube, "ns", SELECTOR, "h1") == ["api-0", "api-1"]
    assert [name for _, name, _ in kube.patches] == ["api-0", "api-1"]
    assert kube.patches[0][2] == {"metadata": {"annotations": {volume_refresh.MOUNTED: "h1"}}}
    # a second pass with the same Secret writes nothing
    assert volume_refresh.annotate(kube, "ns", SELECTOR, "h1") == []
    assert len(kube.patches) == 2


def certificate(common_name: str, path: Path) -> tuple[str, Path, Path]:
    key = ec.generate_private_key(ec.SECP256R1())
    now = dt.datetime.now(dt.UTC)
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
            .serial_number(x509.random_serial_number()).not_valid_before(now - dt.timedelta(minutes=1))
            .not_valid_after(now + dt.timedelta(hours=1)).sign(key, hashes.SHA256()))
    pem = cert.public_bytes(serialization.Encoding.PEM).decode()
    crt, key_file = path / f"{common_name}.crt", path / f"{common_name}.key"
    crt.write_text(pem)
    key_file.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                           serialization.NoEncryption()))
    return pem, crt, key_file


@pytest.fixture
def tls_server(tmp_path):
    """A TLS server on loopback; ``serve(name)`` switches the certificate it presents."""
    made = {name: certificate(name, tmp_path) for name in ("old", "new")}
    current = {"name": "old"}
    listener = socket.create_server(("127.0.0.1", 0))
    listener.settimeout(0.2)
    stop = threading.Event()

    def loop():
        while not stop.is_set():
            try:
                conn, _ = listener.accept()
            except TimeoutError:
                continue
            context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            _, crt, key = made[current["name"]]
            context.load_cert_chain(crt, key)
            try:
                with context.wrap_socket(conn, server_side=True):
                    pass
            except (ssl.SSLError, OSError):
                pass

    thread = threading.Thread(target=loop, daemon=True)
    thread.start()
    yield {"port": listener.getsockname()[1], "pem": {n: m[0] for n, m in made.items()}, "current": current}
    stop.set()
    thread.join()
    listener.close()


def test_the_wait_reads_the_served_certificate_and_names_a_pod_still_behind(tls_server):
    kube = Pods(pod("api-0", ip="127.0.0.1"), pod("api-starting", ip="127.0.0.2", ready=False))
    clock = iter(range(100))
    port, pem = tls_server["port"], tls_server["pem"]
    behind = volume_refresh.wait_served(kube, "ns", SELECTOR, port, pem["new"], timeout=3,
                                        clock=lambda: next(clock), sleep=lambda s: None)
    assert behind == ["api-0: serves an older certificate"]  # the pod not Ready is not asked
    tls_server["current"]["name"] = "new"
    assert volume_refresh.wait_served(kube, "ns", SELECTOR, port, pem["new"], timeout=3) == []


def test_the_wait_ends_as_soon_as_every_pod_serves_it(tls_server):
    kube = Pods(pod("api-0", ip="127.0.0.1"))
    port, pem = tls_server["port"], tls_server["pem"]
    reads = []

    def sleep(_):  # the kubelet's sync lands while the step waits
        reads.append("slept")
        tls_server["current"]["name"] = "new"

    assert volume_refresh.wait_served(kube, "ns", SELECTOR, port, pem["new"], timeout=30, sleep=sleep) == []
    assert reads == ["slept"]
