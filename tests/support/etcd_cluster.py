"""Real TLS etcd clusters on loopback for the etcd plugin tests and the benchmark.

Every member gets random free ports and its own data dir under a tmp work dir; certificates
come from ``karmada_pki`` (kubeadm layout: ``etcd/ca.crt``, ``etcd/server.crt``,
``etcd/peer.crt``, ``etcd/healthcheck-client.crt``) and client-cert auth is required on both
client and peer ports, as in a Karmada install. Scaling goes through ``etcd_membership``'s
functions, the same code the ``etcd_member`` module runs.
"""

from __future__ import annotations

import importlib
import importlib.util
import itertools
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

from karmada_operator.etcd.gateway import EtcdClient, EtcdError
from karmada_operator.etcd.snapshots import verify_snapshot
from support.processes import stop_process

ROOT = Path(__file__).resolve().parents[2]
_used_ports: set[int] = set()


def free_port() -> int:
    """A free loopback port not handed out before in this process (etcd binds late)."""
    while True:
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            port = sock.getsockname()[1]
        if port not in _used_ports:
            _used_ports.add(port)
            return port


@dataclass(frozen=True)
class EtcdCerts:
    """Paths of the etcd PKI files: server/peer certs and the client pair the tests use."""

    ca: str
    server_cert: str
    server_key: str
    peer_cert: str
    peer_key: str
    client_cert: str
    client_key: str


def make_certs(directory: str | os.PathLike[str]) -> EtcdCerts:
    """Issue the etcd PKI with karmada_pki (ECDSA keys: fast) and write it in kubeadm layout."""
    from karmada_operator.pki import pki as karmada_pki

    result = karmada_pki.reconcile_pki(
        {
            "name": "karmada",
            "namespace": "karmada-system",
            "certificates": {"keyAlgorithm": "ECDSA", "keySize": 256},
        }
    )
    root = karmada_pki.write_pki_dir(result.files, directory)
    etcd = root / "etcd"
    return EtcdCerts(
        ca=str(etcd / "ca.crt"),
        server_cert=str(etcd / "server.crt"),
        server_key=str(etcd / "server.key"),
        peer_cert=str(etcd / "peer.crt"),
        peer_key=str(etcd / "peer.key"),
        client_cert=str(etcd / "healthcheck-client.crt"),
        client_key=str(etcd / "healthcheck-client.key"),
    )


@dataclass
class EtcdNode:
    name: str
    client_port: int
    peer_port: int
    data_dir: Path
    log_path: Path
    proc: subprocess.Popen | None = None

    @property
    def client_url(self) -> str:
        return f"https://127.0.0.1:{self.client_port}"

    @property
    def peer_url(self) -> str:
        return f"https://127.0.0.1:{self.peer_port}"

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None


@dataclass
class EtcdTestCluster:
    """A set of etcd processes; ``nodes`` are the members this helper believes are in the cluster."""

    etcd_bin: str
    workdir: Path
    certs: EtcdCerts
    extra_args: Sequence[str] = ()
    nodes: dict[str, EtcdNode] = field(default_factory=dict)
    stopped: list[EtcdNode] = field(default_factory=list)
    _names: itertools.count = field(default_factory=itertools.count)
    remove_workdir: bool = False  # set when the helper made the work dir itself

    # ---- nodes

    def new_node(self, name: str | None = None) -> EtcdNode:
        name = name or f"etcd-{next(self._names)}"
        data = self.workdir / f"{name}-{time.monotonic_ns()}"
        return EtcdNode(name, free_port(), free_port(), data / "data", data.with_suffix(".log"))

    def start_node(
        self,
        node: EtcdNode,
        initial_cluster: str,
        state: str = "new",
        token: str = "test",
        data_dir: Path | None = None,
    ) -> EtcdNode:
        c = self.certs
        data = data_dir or node.data_dir
        data.parent.mkdir(parents=True, exist_ok=True)
        argv = [
            self.etcd_bin,
            "--name",
            node.name,
            "--data-dir",
            str(data),
            "--listen-client-urls",
            node.client_url,
            "--advertise-client-urls",
            node.client_url,
            "--listen-peer-urls",
            node.peer_url,
            "--initial-advertise-peer-urls",
            node.peer_url,
            "--initial-cluster",
            initial_cluster,
            "--initial-cluster-state",
            state,
            "--initial-cluster-token",
            token,
            "--cert-file",
            c.server_cert,
            "--key-file",
            c.server_key,
            "--trusted-ca-file",
            c.ca,
            "--client-cert-auth",
            "--peer-cert-file",
            c.peer_cert,
            "--peer-key-file",
            c.peer_key,
            "--peer-trusted-ca-file",
            c.ca,
            "--peer-client-cert-auth",
            "--listen-metrics-urls",
            "",
            "--log-level",
            "warn",
            # a shared 2-core test box: give elections some slack
            "--heartbeat-interval",
            "100",
            "--election-timeout",
            "1500",
            *self.extra_args,
        ]
        log = open(node.log_path, "ab")  # noqa: SIM115 - owned by the process for its lifetime
        node.proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        log.close()
        self.nodes[node.name] = node
        return node

    def bootstrap(self, count: int, token: str = "test") -> list[EtcdNode]:
        nodes = [self.new_node() for _ in range(count)]
        initial = ",".join(f"{n.name}={n.peer_url}" for n in nodes)
        for node in nodes:
            self.start_node(node, initial, "new", token)
        self.wait_ready(nodes)
        return nodes

    def wait_ready(self, nodes: Sequence[EtcdNode], timeout: float = 60.0, leader: bool = True) -> None:
        deadline = time.monotonic() + timeout
        for node in nodes:
            client = self.client([node])
            while True:
                if node.proc is not None and node.proc.poll() is not None:
                    raise AssertionError(
                        f"etcd {node.name} exited ({node.proc.returncode}):\n{self.log(node)}"
                    )
                try:
                    if client.status(node.client_url).leader or not leader:
                        break
                except EtcdError:
                    pass
                if time.monotonic() > deadline:
                    raise AssertionError(f"etcd {node.name} not ready after {timeout}s:\n{self.log(node)}")
                time.sleep(0.2)

    def log(self, node: EtcdNode, tail: int = 3000) -> str:
        try:
            return node.log_path.read_text(errors="replace")[-tail:]
        except OSError:
            return ""

    def kill(self, name: str) -> EtcdNode:
        """SIGKILL a member's process (a crash); it stays in the cluster's member list."""
        node = self.nodes[name]
        if node.proc is not None and node.proc.poll() is None:
            node.proc.send_signal(signal.SIGKILL)
            node.proc.wait(timeout=10)
        return node

    def stop_node(self, node: EtcdNode) -> None:
        stop_process(node.proc, 15)

    def close(self) -> None:
        for node in list(self.nodes.values()) + self.stopped:
            self.stop_node(node)
        if self.remove_workdir:
            shutil.rmtree(self.workdir, ignore_errors=True)

    # ---- clients

    def endpoints(self, nodes: Sequence[EtcdNode] | None = None) -> list[str]:
        return [n.client_url for n in (nodes if nodes is not None else self.nodes.values())]

    def client(self, nodes: Sequence[EtcdNode] | None = None, timeout: float = 5.0) -> EtcdClient:
        c = self.certs
        return EtcdClient(
            self.endpoints(nodes), cert=c.client_cert, key=c.client_key, ca=c.ca, timeout=timeout
        )

    def conn_params(self, nodes: Sequence[EtcdNode] | None = None) -> dict[str, object]:
        """The connection options of the etcd_* modules."""
        c = self.certs
        return {
            "endpoints": self.endpoints(nodes),
            "cert": c.client_cert,
            "key": c.client_key,
            "ca": c.ca,
            "timeout": 5.0,
        }

    # ---- scaling through the etcd_member logic

    def add_member(self, name: str | None = None) -> EtcdNode:
        """Add a member the way the role does: add as learner, start it, promote when caught up."""
        member_module = load_module("etcd_member")
        node = self.new_node(name)
        running = [n for n in self.nodes.values() if n.running]
        params = {
            **self.conn_params(running),
            "name": node.name,
            "peer_urls": [node.peer_url],
            "state": "present",
            "promote": False,
        }
        added = member_module.run_module(params)
        self.start_node(node, added["initial_cluster"], "existing")
        self.wait_ready([node], leader=False)
        promoted = member_module.run_module({**params, "promote": True, "wait_timeout": 60})
        assert not promoted["learner"], promoted
        return node

    def remove_member(self, name: str, force: bool = False) -> dict[str, object]:
        member_module = load_module("etcd_member")
        running = [n for n in self.nodes.values() if n.running and n.name != name] or list(
            self.nodes.values()
        )
        result = member_module.run_module(
            {**self.conn_params(running), "name": name, "state": "absent", "force": force}
        )
        node = self.nodes.pop(name)
        self.stopped.append(node)
        self.stop_node(node)  # a removed member exits by itself; make sure
        return result


def run_restore(plan: dict[str, Any], verify: bool = True) -> None:
    """Run a restore plan's etcdutl argv lists, after verifying the snapshot (the role's order)."""
    if verify:
        verify_snapshot(plan["snapshot"])
    for member in plan["members"]:
        done = subprocess.run(member["restore_argv"], capture_output=True, text=True, timeout=600)
        if done.returncode != 0:
            raise AssertionError(f"{' '.join(member['restore_argv'])} failed:\n{done.stderr[-2000:]}")


def start_restored(
    etcd_bin: str, plan: dict[str, Any], workdir: Path, certs: EtcdCerts, extra_args: Sequence[str] = ()
) -> EtcdTestCluster:
    """Start the members of a restored cluster from the plan's names, URLs, token and data dirs."""
    cluster = EtcdTestCluster(etcd_bin, workdir, certs, extra_args)
    try:
        nodes = []
        for member in plan["members"]:
            client_port = int(member["client_url"].rsplit(":", 1)[1])
            peer_port = int(member["peer_url"].rsplit(":", 1)[1])
            node = EtcdNode(
                member["name"],
                client_port,
                peer_port,
                Path(member["data_dir"]),
                workdir / f"{member['name']}.log",
            )
            cluster.start_node(node, plan["initial_cluster"], "new", plan["cluster_token"], node.data_dir)
            nodes.append(node)
        cluster.wait_ready(nodes)
    except BaseException:
        cluster.close()
        raise
    return cluster


def load_module(name: str) -> ModuleType:
    """An Ansible module from plugins/modules (its imports of karmada_operator are plain ones)."""
    key = f"ansible_modules.{name}"
    return sys.modules.get(key) or _load_path(key, ROOT / "plugins" / "modules" / f"{name}.py")


def _load_path(key: str, path: Path) -> ModuleType:
    spec = importlib.util.spec_from_file_location(key, path)
    assert spec is not None and spec.loader is not None, path
    module = importlib.util.module_from_spec(spec)
    sys.modules[key] = module
    spec.loader.exec_module(module)
    return module


def start_cluster(
    etcd_bin: str,
    count: int,
    workdir: str | os.PathLike[str] | None = None,
    certs: EtcdCerts | None = None,
    extra_args: Sequence[str] = (),
) -> EtcdTestCluster:
    work = Path(workdir or tempfile.mkdtemp(prefix="ko-etcd-"))
    work.mkdir(parents=True, exist_ok=True)
    cluster = EtcdTestCluster(etcd_bin, work, certs or make_certs(work / "pki"), extra_args)
    cluster.remove_workdir = workdir is None
    try:
        cluster.bootstrap(count)
    except BaseException:
        cluster.close()
        raise
    return cluster


__all__ = [
    "run_restore",
    "start_restored",
    "EtcdCerts",
    "EtcdNode",
    "EtcdTestCluster",
    "free_port",
    "load_module",
    "make_certs",
    "start_cluster",
]
