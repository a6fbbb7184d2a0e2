"""Session fixtures for the tier-3 test bed built by ``hack/testenv`` (docs/testing.md).

``host_cluster`` brings the host cluster up once per session with ``hack/testenv/up.sh``
and takes it down with ``hack/testenv/down.sh`` at the end; ``member_clusters`` does the
same for kwok member clusters with ``hack/testenv/members.sh N M``. With
``KO_TESTENV_REUSE=1`` a running environment is reused (and one that had to be started is
left running afterwards), which is what you want while iterating:

    make testenv-up testenv-members && KO_TESTENV_REUSE=1 pytest -m e2e

``KO_TESTENV_MEMBERS`` / ``KO_TESTENV_NODES`` set the member count and nodes per member
(default 2 and 3). Register the fixtures with ``pytest_plugins = ["support.testenv"]``
or import them into a test module.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
import uuid
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
HACK = ROOT / "hack" / "testenv"


@cache
def settings() -> dict[str, str]:
    """The values hack/testenv/env.sh computes (paths, ports, node address, versions)."""
    names = [
        "KO_STATE",
        "KO_RUN",
        "KO_LOGS",
        "KO_LINKS",
        "KO_KUBECONFIG",
        "KO_CONTAINERD_SOCK",
        "KO_CONTAINERD_ROOT",
        "KO_KUBELET_ROOT",
        "KO_CNI_BRIDGE",
        "KO_NODE_IP",
        "KO_NODE_NAME",
        "KO_SERVICE_CIDR",
        "KO_MEMBER_SECRET_NAMESPACE",
        "KO_MEMBER_PORT_BASE",
        "KUBERNETES_VERSION",
        "KO_HOSTPATH_PV_DIR",
    ]
    script = f'. "{HACK}/env.sh" >/dev/null; ' + "; ".join(f'echo "{n}=${{{n}}}"' for n in names)
    out = subprocess.run(["bash", "-c", script], check=True, capture_output=True, text=True).stdout
    return dict(line.split("=", 1) for line in out.splitlines() if "=" in line)


def run_script(*argv: str, timeout: float = 900) -> subprocess.CompletedProcess:
    """Run a hack/testenv script; fail the test with its output when it fails."""
    start = time.monotonic()
    proc = subprocess.run([str(HACK / argv[0]), *argv[1:]], capture_output=True, text=True, timeout=timeout)
    proc.elapsed = time.monotonic() - start  # type: ignore[attr-defined]
    if proc.returncode != 0:
        pytest.fail(f"{' '.join(argv)} failed ({proc.returncode}):\n{proc.stdout[-4000:]}\n{proc.stderr[-6000:]}")
    return proc


@dataclass
class Cluster:
    """A cluster reachable with one kubeconfig, driven through the pinned kubectl."""

    name: str
    kubeconfig: Path

    def kubectl(
        self, *args: str, input: str | None = None, check: bool = True, timeout: float = 120
    ) -> subprocess.CompletedProcess:
        kubectl = str(Path(settings()["KO_LINKS"]) / "kubectl")
        proc = subprocess.run(
            [kubectl, "--kubeconfig", str(self.kubeconfig), *args],
            input=input,
            capture_output=True,
            text=True,
            timeout=timeout,
        )
        if check and proc.returncode != 0:
            raise AssertionError(f"kubectl {' '.join(args)} failed on {self.name}: {proc.stderr.strip()}")
        return proc

    def apply(self, manifest: str | list | dict, namespace: str | None = None) -> None:
        text = (
            manifest
            if isinstance(manifest, str)
            else json.dumps(
                {"apiVersion": "v1", "kind": "List", "items": manifest} if isinstance(manifest, list) else manifest
            )
        )
        self.kubectl(*(["-n", namespace] if namespace else []), "apply", "-f", "-", input=text)

    def get(self, *args: str) -> dict:
        return json.loads(self.kubectl("get", *args, "-o", "json").stdout)

    def ready(self) -> bool:
        return self.kubectl("get", "--raw", "/readyz", check=False, timeout=15).returncode == 0

    def wait(self, *args: str, timeout: int = 120) -> None:
        self.kubectl("wait", *args, f"--timeout={timeout}s", timeout=timeout + 30)

    def namespace(self, prefix: str = "t") -> str:
        """Create a throwaway namespace (deleted by the caller or with the environment)."""
        name = f"{prefix}-{uuid.uuid4().hex[:6]}"
        self.kubectl("create", "namespace", name)
        return name

    def pod_logs(self, name: str, namespace: str) -> str:
        return self.kubectl("-n", namespace, "logs", name).stdout

    def run_pod(
        self,
        namespace: str,
        name: str,
        image: str,
        command: list[str],
        timeout: int = 120,
        volumes: list | None = None,
        mounts: list | None = None,
    ) -> str:
        """Run a one-shot pod to completion; return its log (fail with it if it failed)."""
        container = {"name": "main", "image": image, "imagePullPolicy": "IfNotPresent", "command": command}
        spec: dict = {"restartPolicy": "Never", "terminationGracePeriodSeconds": 1, "containers": [container]}
        if volumes:
            spec["volumes"] = volumes
        if mounts:
            container["volumeMounts"] = mounts
        pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": namespace}, "spec": spec}
        self.apply(pod)
        deadline = time.monotonic() + timeout
        phase = ""
        while time.monotonic() < deadline:
            phase = self.get("-n", namespace, "pod", name).get("status", {}).get("phase", "")
            if phase in ("Succeeded", "Failed"):
                break
            time.sleep(1)
        logs = self.kubectl("-n", namespace, "logs", name, check=False).stdout
        if phase != "Succeeded":
            events = self.kubectl("-n", namespace, "get", "events", check=False).stdout
            raise AssertionError(f"pod {namespace}/{name} ended {phase or 'not at all'}:\n{logs}\n{events}")
        return logs


@dataclass
class HostCluster(Cluster):
    node_name: str = ""
    node_ip: str = ""
    settings: dict = field(default_factory=dict)
    up_seconds: float | None = None

    @staticmethod
    def script(*argv: str, timeout: float = 900) -> subprocess.CompletedProcess:
        """Run hack/testenv/<argv[0]> (e.g. "down.sh"); fails the test when it fails."""
        return run_script(*argv, timeout=timeout)

    @staticmethod
    def leftovers() -> list[str]:
        """What of the test bed is still on the machine (empty after down.sh)."""
        return leftovers()

    @property
    def busybox_image(self) -> str:
        return next(i for i in images() if i.startswith("ko-testenv.local/busybox:"))

    @property
    def kms_plugin_image(self) -> str:
        """The bed's KMS v2 plugin (hack/testenv/kms-plugin): KMS_KEY in its environment."""
        return f"ko-testenv.local/kms-plugin:{self.settings['KUBERNETES_VERSION']}"

    @property
    def kubectl_image(self) -> str:
        return f"ko-testenv.local/kubectl:{self.settings['KUBERNETES_VERSION']}"


@dataclass
class MemberCluster(Cluster):
    server: str = ""
    secret_name: str = ""
    secret_namespace: str = ""
    nodes: int = 0


@cache
def images() -> tuple[str, ...]:
    out = subprocess.run([str(HACK / "images.sh"), "--list"], check=True, capture_output=True, text=True).stdout
    return tuple(out.split())


def reuse() -> bool:
    return os.environ.get("KO_TESTENV_REUSE", "") in ("1", "true", "yes")


def host_handle() -> HostCluster:
    s = settings()
    return HostCluster(
        name="host",
        kubeconfig=Path(s["KO_KUBECONFIG"]),
        node_name=s["KO_NODE_NAME"],
        node_ip=s["KO_NODE_IP"],
        settings=s,
    )


def member_handles(count: int, nodes: int) -> list[MemberCluster]:
    s = settings()
    return [
        MemberCluster(
            name=f"member{i}",
            kubeconfig=Path(s["KO_STATE"]) / "members" / f"member{i}" / "kubeconfig",
            server=f"https://{s['KO_NODE_IP']}:{int(s['KO_MEMBER_PORT_BASE']) + i}",
            secret_name=f"member{i}-kubeconfig",
            secret_namespace=s["KO_MEMBER_SECRET_NAMESPACE"],
            nodes=nodes,
        )
        for i in range(1, count + 1)
    ]


def leftovers() -> list[str]:
    """What of the test bed still exists on the machine (empty after down.sh)."""
    s = settings()
    marks = [s["KO_STATE"], s["KO_RUN"]]
    found = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit() or int(proc.name) == os.getpid():
            continue
        try:
            cmdline = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            state = (proc / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if state != "Z" and any(m in cmdline for m in marks):
            found.append(f"process {proc.name}: {cmdline[:200]}")
    for line in Path("/proc/self/mountinfo").read_text().splitlines():
        mount_point = line.split()[4]
        if any(mount_point == m or mount_point.startswith(m + "/") for m in marks + [s["KO_CONTAINERD_ROOT"]]):
            found.append(f"mount {mount_point}")
    for path in (s["KO_STATE"], s["KO_RUN"], s["KO_HOSTPATH_PV_DIR"]):
        if Path(path).exists():
            found.append(f"path {path}")
    if subprocess.run(["ip", "link", "show", s["KO_CNI_BRIDGE"]], capture_output=True).returncode == 0:
        found.append(f"link {s['KO_CNI_BRIDGE']}")
    links = subprocess.run(["ip", "-o", "link", "show", "type", "veth"], capture_output=True, text=True).stdout
    found += [f"veth {line.split(':')[1].strip()}" for line in links.splitlines() if line.strip()]
    netns = Path("/run/netns")
    if netns.is_dir():
        found += [f"netns {p.name}" for p in netns.iterdir() if p.name.startswith("cni-")]
    for tool in ("iptables-save", "ip6tables-save"):
        for table in ("filter", "nat", "mangle"):
            out = subprocess.run([tool, "-t", table], capture_output=True, text=True).stdout
            found += [
                f"{tool} {table} chain {line[1:].split()[0]}"
                for line in out.splitlines()
                if line.startswith((":KUBE-", ":CNI-"))
            ]
    return found


@pytest.fixture(scope="session")
def host_cluster() -> HostCluster:
    """The running host cluster (started for this session unless KO_TESTENV_REUSE=1 finds one)."""
    host = host_handle()
    started = False
    if not (reuse() and host.kubeconfig.exists() and host.ready()):
        proc = run_script("up.sh")
        host.up_seconds = proc.elapsed  # type: ignore[attr-defined]
        started = True
    yield host
    if started and not reuse():
        run_script("down.sh")


@pytest.fixture(scope="session")
def member_clusters(host_cluster: HostCluster) -> list[MemberCluster]:
    """KO_TESTENV_MEMBERS kwok member clusters (default 3) with KO_TESTENV_NODES nodes each (3)."""
    count = int(os.environ.get("KO_TESTENV_MEMBERS", "3"))
    nodes = int(os.environ.get("KO_TESTENV_NODES", "3"))
    members = member_handles(count, nodes)
    started = False
    if not (reuse() and all(m.kubeconfig.exists() and m.ready() for m in members)):
        run_script("members.sh", str(count), str(nodes))
        started = True
    yield members
    if started and not reuse() and host_cluster.ready():
        run_script("members.sh", "--down")
