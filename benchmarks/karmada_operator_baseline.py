"""Karmada's own operator (github.com/karmada-io/karmada/operator) as the baseline of
benchmarks/bench_install.py: its binary run as a local process against the host cluster,
its CRD from the Karmada module source, and a ``Karmada`` CR equivalent to our sample.

The CR uses exactly the images the test bed put on the node (imagePullPolicy
IfNotPresent), 3 local etcd members on PersistentVolumeClaims (as our sample), Karmada's
CRDs from our local HTTP server, karmada-descheduler and karmada-search off (their
default, and off in our sample) and karmada-metrics-adapter at 0 replicas: Karmada's
operator always creates that Deployment, but skips waiting for it at 0 replicas, and the
test bed has no image for it. karmada-apiserver's Service is a NodePort: the operator runs
outside the cluster, where the ClusterIP Service's DNS name (what its admin kubeconfig
names for ClusterIP) does not resolve; with NodePort it names the node address instead.
"""

from __future__ import annotations

import os
import re
import socket
import subprocess
import time
from datetime import datetime
from pathlib import Path

from support.processes import stop_process  # bench_install.py puts tests/ on sys.path

KARMADA_CRD = "karmadas.operator.karmada.io"
DATA_DIR = Path("/var/lib/karmada")  # constants.KarmadaDataDir: where it caches the CRD tarball


def module_dir(version: str) -> Path:
    gomodcache = os.environ.get("GOMODCACHE") or str(Path(os.environ.get("GOPATH", Path.home() / "go")) / "pkg/mod")
    return Path(gomodcache) / "github.com" / "karmada-io" / f"karmada@{version}" / "operator"


def crd_file(version: str) -> Path:
    return module_dir(version) / "config" / "crds" / "operator.karmada.io_karmadas.yaml"


def required_images(karmada_version: str, kubernetes_version: str, etcd_tag: str) -> dict[str, tuple[str, str]]:
    """component -> (repository, tag) as the CR names them."""
    images = {
        "etcd": ("registry.k8s.io/etcd", etcd_tag),
        "karmadaAPIServer": ("registry.k8s.io/kube-apiserver", kubernetes_version),
        "kubeControllerManager": ("registry.k8s.io/kube-controller-manager", kubernetes_version),
    }
    for field, name in (("karmadaAggregatedAPIServer", "aggregated-apiserver"),
                        ("karmadaControllerManager", "controller-manager"),
                        ("karmadaScheduler", "scheduler"), ("karmadaWebhook", "webhook")):
        images[field] = (f"docker.io/karmada/karmada-{name}", karmada_version)
    return images


def node_images(containerd_sock: str) -> set[str]:
    out = subprocess.run(["ctr", "--address", containerd_sock, "-n", "k8s.io", "images", "ls", "-q"],
                         capture_output=True, text=True, timeout=60, check=True).stdout
    return {line.strip() for line in out.splitlines() if line.strip() and not line.startswith("sha256:")}


def karmada_cr(name: str, namespace: str, crd_url: str, images: dict[str, tuple[str, str]],
               etcd_replicas: int = 3, storage: str = "8Gi") -> dict:
    def common(component: str, **extra) -> dict:
        repo, tag = images[component]
        return {"imageRepository": repo, "imageTag": tag, "imagePullPolicy": "IfNotPresent", "replicas": 1, **extra}

    etcd = common("etcd", replicas=etcd_replicas)
    etcd["volumeData"] = {"volumeClaim": {"spec": {"accessModes": ["ReadWriteOnce"],
                                                   "resources": {"requests": {"storage": storage}}}}}
    repo, tag = images["karmadaControllerManager"]
    return {
        "apiVersion": "operator.karmada.io/v1alpha1",
        "kind": "Karmada",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "crdTarball": {"httpSource": {"url": crd_url}, "crdDownloadPolicy": "Always"},
            "components": {
                "etcd": {"local": etcd},
                "karmadaAPIServer": common("karmadaAPIServer", serviceType="NodePort"),
                "karmadaAggregatedAPIServer": common("karmadaAggregatedAPIServer"),
                "kubeControllerManager": common("kubeControllerManager"),
                "karmadaControllerManager": common("karmadaControllerManager"),
                "karmadaScheduler": common("karmadaScheduler"),
                "karmadaWebhook": common("karmadaWebhook"),
                # Always created by Karmada's operator; 0 replicas: no pod, no wait (no image here).
                "karmadaMetricsAdapter": {"imageRepository": "docker.io/karmada/karmada-metrics-adapter",
                                          "imageTag": tag, "imagePullPolicy": "IfNotPresent", "replicas": 0},
            },
        },
    }


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class KarmadaOperatorProcess:
    """``karmada-operator`` as a local process against a kubeconfig (leader election, metrics off)."""

    def __init__(self, binary: Path, kubeconfig: Path, workdir: Path):
        self.log_path = workdir / "karmada-operator.log"
        self._log = open(self.log_path, "w")  # noqa: SIM115 - closed in stop()
        env = dict(os.environ, KUBECONFIG=str(kubeconfig))
        self.proc = subprocess.Popen(
            [str(binary), "--kubeconfig", str(kubeconfig), "--leader-elect=false", "--metrics-bind-address=0",
             f"--health-probe-bind-address=127.0.0.1:{free_port()}", "--v=2"],
            env=env, stdout=self._log, stderr=subprocess.STDOUT)

    def running(self) -> bool:
        return self.proc.poll() is None

    def log_tail(self, lines: int = 12) -> str:
        return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])

    def stop(self) -> None:
        stop_process(self.proc, 30)
        self._log.close()

    def step_split(self) -> list[tuple[float, str]]:
        """Where its install went, from its own log: see ``log_steps``."""
        self._log.flush()
        return log_steps(self.log_path.read_text(errors="replace"))


# klog's header (I1202 15:20:01.123456   4242 file.go:55] ...), then a message whose first word is
# the workflow step in brackets: "[etcd] ...", "[karmada-apiserver] ...". Karmada's operator
# tags its task messages that way (operator/pkg/tasks/init/*.go).
KLOG_STEP = re.compile(r'^[IWE](\d{4}) (\d{2}:\d{2}:\d{2}\.\d+)\s+\d+ [^\]]+\] "?\[([A-Za-z0-9-]+)\]')


def log_steps(text: str) -> list[tuple[float, str]]:
    """Seconds per workflow step of Karmada's operator: from the first line tagged with a step to
    the first line of the next step (the last step ends at the last tagged line), summed over the
    step's appearances, longest first. Empty when the log has no tagged lines."""
    marks = []
    for line in text.splitlines():
        found = KLOG_STEP.match(line)
        if found:
            clock = datetime.strptime(found.group(2), "%H:%M:%S.%f")
            marks.append((clock.hour * 3600 + clock.minute * 60 + clock.second + clock.microsecond / 1e6,
                          found.group(3)))
    totals: dict[str, float] = {}
    for (stamp, step), (after, _) in zip(marks, marks[1:] + marks[-1:], strict=True):
        totals[step] = totals.get(step, 0.0) + max(0.0, after - stamp)
    return sorted(((secs, step) for step, secs in totals.items()), reverse=True)


def wait_until(predicate, timeout: float, interval: float = 1.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(interval)
    return None
