"""A throwaway real kube-apiserver (with its own etcd) for plugin and schema tests.

Plain-HTTP etcd on loopback, kube-apiserver with a self-signed serving cert (written by
the apiserver itself into --cert-dir) and a static token in group system:masters. The
tier-3 host cluster (hack/testenv) is heavier; this starts in a few seconds.
"""

from __future__ import annotations

import json
import os
import secrets
import socket
import subprocess
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import requests


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@dataclass
class KubeAPIServer:
    """Handle on a running etcd + kube-apiserver pair."""

    workdir: Path
    port: int
    token: str
    kubeconfig: Path
    kubectl_bin: str
    procs: list[subprocess.Popen] = field(default_factory=list)
    etcd_url: str = ""  # its etcd (plain HTTP on loopback), to read what it stores

    @property
    def url(self) -> str:
        return f"https://127.0.0.1:{self.port}"

    def kubectl(self, *args: str, input_text: str | None = None, check: bool = True,
                timeout: float = 60) -> subprocess.CompletedProcess:
        cmd = [self.kubectl_bin, "--kubeconfig", str(self.kubeconfig), *args]
        result = subprocess.run(cmd, input=input_text, capture_output=True, text=True, timeout=timeout)
        if check and result.returncode != 0:
            raise AssertionError(f"{' '.join(cmd)} failed ({result.returncode}):\n{result.stderr}")
        return result

    def stand_in_crd(self, group: str, kind: str, plural: str, scope: str = "Namespaced") -> None:
        """A CRD standing in for one of Karmada's kinds (version v1alpha1, any content, a status
        subresource), applied and Established."""
        from support.waiting import crds_established

        crd = {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
               "metadata": {"name": f"{plural}.{group}"},
               "spec": {"group": group, "scope": scope,
                        "names": {"kind": kind, "plural": plural, "singular": kind.lower()},
                        "versions": [{"name": "v1alpha1", "served": True, "storage": True,
                                      "schema": {"openAPIV3Schema": {"type": "object",
                                                                     "x-kubernetes-preserve-unknown-fields": True}},
                                      "subresources": {"status": {}}}]}}
        self.kubectl("apply", "-f", "-", input_text=json.dumps(crd))
        crds_established(self.kubectl, [f"{plural}.{group}"])

    def stop(self) -> None:
        for proc in reversed(self.procs):
            if proc.poll() is None:
                proc.terminate()
                try:
                    proc.wait(timeout=20)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait()


def start(etcd_bin: str, apiserver_bin: str, kubectl_bin: str, workdir: Path | None = None,
          timeout: float = 90, extra_args: Sequence[str] = (), etcd_url: str = "",
          wait_ready: bool = True) -> KubeAPIServer:
    """Start etcd and kube-apiserver (with ``extra_args`` last; on ``etcd_url``, another one's
    etcd, when given); return once /readyz answers ok (at once with ``wait_ready`` False)."""
    work = Path(workdir or tempfile.mkdtemp(prefix="ko-apiserver-"))
    work.mkdir(parents=True, exist_ok=True)
    etcd_port, peer_port, api_port = free_port(), free_port(), free_port()
    token = secrets.token_hex(16)
    (work / "tokens.csv").write_text(f'{token},admin,admin,"system:masters"\n')
    # Service-account signing key: the apiserver refuses to start without one.
    sa_key = work / "sa.key"
    subprocess.run(["openssl", "genrsa", "-out", str(sa_key), "2048"], check=True, capture_output=True)
    logs = {name: open(work / f"{name}.log", "w") for name in ("etcd", "kube-apiserver")}  # noqa: SIM115
    procs = [] if etcd_url else [subprocess.Popen(
        [etcd_bin, "--data-dir", str(work / "etcd"), "--listen-client-urls", f"http://127.0.0.1:{etcd_port}",
         "--advertise-client-urls", f"http://127.0.0.1:{etcd_port}",
         "--listen-peer-urls", f"http://127.0.0.1:{peer_port}",
         "--initial-advertise-peer-urls", f"http://127.0.0.1:{peer_port}",
         "--initial-cluster", f"default=http://127.0.0.1:{peer_port}", "--log-level", "warn"],
        stdout=logs["etcd"], stderr=subprocess.STDOUT)]
    procs.append(subprocess.Popen(
        [apiserver_bin, f"--etcd-servers={etcd_url or f'http://127.0.0.1:{etcd_port}'}", f"--secure-port={api_port}",
         # an address of its own: in a network namespace with only loopback there is no default route to guess from
         "--bind-address=127.0.0.1", "--advertise-address=127.0.0.1",
         f"--cert-dir={work / 'certs'}", f"--token-auth-file={work / 'tokens.csv'}",
         "--authorization-mode=RBAC", f"--service-account-key-file={sa_key}",
         f"--service-account-signing-key-file={sa_key}", "--service-account-issuer=https://kubernetes.default.svc",
         "--service-cluster-ip-range=10.96.0.0/16", "--enable-priority-and-fairness=false", "--v=1", *extra_args],
        stdout=logs["kube-apiserver"], stderr=subprocess.STDOUT))
    kubeconfig = work / "kubeconfig"
    kubeconfig.write_text(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: test\n  cluster:\n"
        f"    server: https://127.0.0.1:{api_port}\n    insecure-skip-tls-verify: true\n"
        f"users:\n- name: admin\n  user:\n    token: {token}\n"
        "contexts:\n- name: test\n  context: {cluster: test, user: admin}\ncurrent-context: test\n")
    os.chmod(kubeconfig, 0o600)
    server = KubeAPIServer(work, api_port, token, kubeconfig, kubectl_bin, procs, etcd_url or f"http://127.0.0.1:{etcd_port}")
    if not wait_ready:
        return server
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if any(p.poll() is not None for p in procs):
            break
        try:
            resp = requests.get(f"{server.url}/readyz", verify=False, timeout=2,
                                headers={"Authorization": f"Bearer {token}"})
            if resp.status_code == 200:
                return server
        except requests.RequestException:
            pass
        time.sleep(0.5)
    server.stop()
    log_tail = (work / "kube-apiserver.log").read_text()[-4000:]
    raise RuntimeError(f"kube-apiserver did not become ready in {timeout}s; log tail:\n{log_tail}")
