"""Real-process helpers for PKI tests: a TLS etcd cluster, a kube-apiserver and a TCP proxy.

Everything listens on loopback with free ports and temporary directories, and is killed on
exit. The certificates come from ``karmada_pki`` written in kubeadm layout (``write_pki_dir``).
"""

from __future__ import annotations

import contextlib
import socket
import subprocess
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import requests

ROOT = Path(__file__).resolve().parents[2]




def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return sock.getsockname()[1]


def pki_input(**overrides: Any) -> dict[str, Any]:
    """A small but complete input dict (ECDSA P-256: fast), overridable per key."""
    data: dict[str, Any] = {
        "namespace": "karmada-system",
        "name": "karmada",
        "clusterDomain": "cluster.local",
        "etcd": {"replicas": 3},
        "apiServer": {
            "externalLoadBalancer": {
                "addresses": ["127.0.0.2"],
                "dnsNames": ["karmada.example.test"],
                "port": 443,
            },
            "certSANs": ["10.96.0.1", "extra.example.test"],
        },
        "certificates": {"keyAlgorithm": "ECDSA", "keySize": 256},
    }
    data.update(overrides)
    return data


def wait_until(check: Callable[[], bool], timeout: float, what: str, log: Callable[[], str] = str) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return
        time.sleep(0.3)
    raise AssertionError(f"timed out after {timeout:.0f}s waiting for {what}\n{log()}")


@dataclass
class Process:
    name: str
    args: list[str]
    log_path: Path
    proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        log = self.log_path.open("wb")
        self.proc = subprocess.Popen(self.args, stdout=log, stderr=subprocess.STDOUT)
        log.close()

    def log_tail(self, chars: int = 6000) -> str:
        text = self.log_path.read_text(errors="replace") if self.log_path.exists() else ""
        return f"--- {self.name} log ({self.log_path}) ---\n{text[-chars:]}"

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def stop(self) -> None:
        if self.proc is None or self.proc.poll() is not None:
            return
        self.proc.terminate()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(timeout=10)


@dataclass
class EtcdCluster:
    """An etcd cluster on 127.0.0.1 using the generated etcd/ca, etcd/server and etcd/peer."""

    etcd: str
    pki: Path
    workdir: Path
    members: list[str]
    client_ports: list[int] = field(default_factory=list)
    processes: list[Process] = field(default_factory=list)

    @property
    def endpoints(self) -> list[str]:
        return [f"https://127.0.0.1:{p}" for p in self.client_ports]

    def start(self, timeout: float = 60) -> None:
        self.client_ports = [free_port() for _ in self.members]
        peer_ports = [free_port() for _ in self.members]
        cluster = ",".join(
            f"{m}=https://127.0.0.1:{p}" for m, p in zip(self.members, peer_ports, strict=True)
        )
        for member, client, peer in zip(self.members, self.client_ports, peer_ports, strict=True):
            proc = Process(member, self._args(member, client, peer, cluster), self.workdir / f"{member}.log")
            proc.start()
            self.processes.append(proc)
        wait_until(self.healthy, timeout, "etcd cluster health", self.logs)

    def _args(self, member: str, client: int, peer: int, cluster: str) -> list[str]:
        etcd_pki = self.pki / "etcd"
        return [
            self.etcd,
            f"--name={member}",
            f"--data-dir={self.workdir / member}",
            f"--listen-client-urls=https://127.0.0.1:{client}",
            f"--advertise-client-urls=https://127.0.0.1:{client}",
            f"--listen-peer-urls=https://127.0.0.1:{peer}",
            f"--initial-advertise-peer-urls=https://127.0.0.1:{peer}",
            f"--initial-cluster={cluster}",
            "--initial-cluster-state=new",
            "--initial-cluster-token=karmada-pki-test",
            f"--cert-file={etcd_pki / 'server.crt'}",
            f"--key-file={etcd_pki / 'server.key'}",
            "--client-cert-auth",
            f"--trusted-ca-file={etcd_pki / 'ca.crt'}",
            f"--peer-cert-file={etcd_pki / 'peer.crt'}",
            f"--peer-key-file={etcd_pki / 'peer.key'}",
            "--peer-client-cert-auth",
            f"--peer-trusted-ca-file={etcd_pki / 'ca.crt'}",
            "--listen-metrics-urls=",
            "--log-level=warn",
        ]

    def health(self, endpoint: str, cert: str, key: str) -> requests.Response:
        """GET /health with a client certificate (raises on a refused TLS handshake)."""
        return requests.get(
            f"{endpoint}/health",
            cert=(str(self.pki / cert), str(self.pki / key)),
            verify=str(self.pki / "etcd" / "ca.crt"),
            timeout=5,
        )

    def healthy(self) -> bool:
        for endpoint in self.endpoints:
            try:
                reply = self.health(endpoint, "etcd/healthcheck-client.crt", "etcd/healthcheck-client.key")
            except requests.RequestException:
                return False
            if reply.status_code != 200 or reply.json().get("health") != "true":
                return False
        return True

    def logs(self, chars: int = 3000) -> str:
        return "\n".join(p.log_tail(chars) for p in self.processes)

    def stop(self) -> None:
        for proc in self.processes:
            proc.stop()


@dataclass
class KubeApiserver:
    """kube-apiserver on 127.0.0.1 with the generated serving, etcd-client, SA and front-proxy material."""

    binary: str
    pki: Path
    workdir: Path
    etcd_endpoints: list[str]
    port: int = 0
    process: Process | None = None

    def start(self, timeout: float = 90) -> None:
        self.port = free_port()
        self.process = Process("kube-apiserver", self._args(), self.workdir / "kube-apiserver.log")
        self.process.start()
        try:
            wait_until(self.ready, timeout, "kube-apiserver /readyz", self.process.log_tail)
        except AssertionError:
            self.stop()
            raise

    def _args(self) -> list[str]:
        pki = self.pki
        return [
            self.binary,
            "--bind-address=127.0.0.1",
            "--advertise-address=127.0.0.1",  # no default route to guess from in a network namespace of its own
            f"--secure-port={self.port}",
            f"--cert-dir={self.workdir / 'apiserver-certs'}",
            f"--tls-cert-file={pki / 'apiserver.crt'}",
            f"--tls-private-key-file={pki / 'apiserver.key'}",
            f"--client-ca-file={pki / 'ca.crt'}",
            f"--etcd-servers={','.join(self.etcd_endpoints)}",
            f"--etcd-cafile={pki / 'etcd' / 'ca.crt'}",
            f"--etcd-certfile={pki / 'apiserver-etcd-client.crt'}",
            f"--etcd-keyfile={pki / 'apiserver-etcd-client.key'}",
            f"--service-account-key-file={pki / 'sa.pub'}",
            f"--service-account-signing-key-file={pki / 'sa.key'}",
            "--service-account-issuer=https://kubernetes.default.svc.cluster.local",
            f"--requestheader-client-ca-file={pki / 'front-proxy-ca.crt'}",
            "--requestheader-allowed-names=front-proxy-client",
            "--requestheader-username-headers=X-Remote-User",
            "--requestheader-group-headers=X-Remote-Group",
            "--requestheader-extra-headers-prefix=X-Remote-Extra-",
            f"--proxy-client-cert-file={pki / 'front-proxy-client.crt'}",
            f"--proxy-client-key-file={pki / 'front-proxy-client.key'}",
            "--authorization-mode=Node,RBAC",
            "--service-cluster-ip-range=10.96.0.0/12",
            # loopback is not a valid Endpoints address; nothing here needs the kubernetes Service
            "--endpoint-reconciler-type=none",
            "--enable-priority-and-fairness=false",
            "--v=1",
        ]

    def ready(self) -> bool:
        if self.process is None or not self.process.alive():
            raise AssertionError(f"kube-apiserver exited\n{self.process.log_tail() if self.process else ''}")
        try:
            reply = requests.get(
                f"https://127.0.0.1:{self.port}/readyz",
                cert=(str(self.pki / "admin.crt"), str(self.pki / "admin.key")),
                verify=str(self.pki / "ca.crt"),
                timeout=5,
            )
        except requests.RequestException:
            return False
        return reply.status_code == 200 and reply.text.strip() == "ok"

    def stop(self) -> None:
        if self.process is not None:
            self.process.stop()


class TcpProxy:
    """A plain TCP forwarder standing in for an external load balancer (no TLS termination)."""

    def __init__(self, listen_host: str, target: tuple[str, int]) -> None:
        self.target = target
        self.server = socket.create_server((listen_host, 0))
        self.address = self.server.getsockname()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._accept, daemon=True)

    def __enter__(self) -> TcpProxy:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self.server.close()

    def _accept(self) -> None:
        while not self._stop.is_set():
            try:
                client, _ = self.server.accept()
            except OSError:
                return
            upstream = socket.create_connection(self.target)
            for src, dst in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pipe, args=(src, dst), daemon=True).start()

    @staticmethod
    def _pipe(src: socket.socket, dst: socket.socket) -> None:
        with contextlib.suppress(OSError):
            while data := src.recv(65536):
                dst.sendall(data)
        with contextlib.suppress(OSError):
            dst.shutdown(socket.SHUT_WR)


def signed_by(cert: Any, ca: Any) -> bool:
    """The certificate's signature checks out with the CA's public key (not a name comparison)."""
    try:
        cert.verify_directly_issued_by(ca)
    except Exception:  # noqa: BLE001 - any failure means: not signed by it
        return False
    return True
