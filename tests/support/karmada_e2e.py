"""Helpers shared by the tier-3 KarmadaDeployment tests (install, members).

A ``Deployment`` is one KarmadaDeployment on the host cluster driven by the real
ansible-operator (``OperatorProcess``); the helpers read its object, its reconcile runs
(the runtime's artifacts) and talk to the Karmada it made with the admin kubeconfig.
"""

from __future__ import annotations

import base64
import contextlib
import json
import re
import subprocess
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import yaml

from support import waiting
from support.etcd_db import etcd_keys_json
from support.operator_runtime import OperatorProcess
from support.testenv import HostCluster, MemberCluster

ROOT = Path(__file__).resolve().parents[2]
RUNNER_ROOT = Path("/tmp/ansible-operator/runner/operator.karmada.io/v1alpha1/KarmadaDeployment")


@dataclass
class Deployment:
    host: HostCluster
    operator: OperatorProcess
    work: Path
    name: str = "karmada"
    namespace: str = "karmada-system"
    extra: dict[str, Any] = field(default_factory=dict)

    def get(self) -> dict:
        return self.host.get("karmadadeployment", self.name, "-n", self.namespace)

    def wait_for(self, predicate, timeout: float, what: str):
        return waiting.wait_for(predicate, timeout, what, self.operator.log_tail, interval=3)

    def runs(self) -> list[Path]:
        return runs(self.namespace, self.name)

    def kubeconfig(self, via_service: bool = True) -> Path:
        """The admin kubeconfig from its Secret; optionally re-pointed at the Service's ClusterIP
        (what reaches karmada-apiserver from this node without a balancer)."""
        secret = self.host.get("secret", self.get()["status"]["adminKubeconfigSecret"], "-n", self.namespace)
        conf = yaml.safe_load(base64.b64decode(secret["data"]["kubeconfig"]))
        if via_service:
            service = f"{self.name}-apiserver"
            ip = self.host.get("service", service, "-n", self.namespace)["spec"]["clusterIP"]
            conf["clusters"][0]["cluster"]["server"] = f"https://{ip}:5443"
            conf["clusters"][0]["cluster"]["tls-server-name"] = f"{service}.{self.namespace}.svc.cluster.local"
        path = self.work / (f"{self.name}-svc.conf" if via_service else f"{self.name}-admin.conf")
        path.write_text(yaml.safe_dump(conf))
        path.chmod(0o600)
        return path

    def karmadactl(self, *args: str, kubeconfig: Path | None = None, input: str | None = None,
                   check: bool = True) -> subprocess.CompletedProcess:
        """kubectl against Karmada (not karmadactl the binary: the name says where it points)."""
        kubectl = str(Path(self.host.settings["KO_LINKS"]) / "kubectl")
        proc = subprocess.run([kubectl, "--kubeconfig", str(kubeconfig or self.kubeconfig()), *args],
                              input=input, capture_output=True, text=True, timeout=60)
        if check and proc.returncode != 0:
            raise AssertionError(f"kubectl {' '.join(args)} against Karmada failed:\n{proc.stderr}")
        return proc


def events(karmada: Deployment, reason: str) -> list[dict]:
    """This KarmadaDeployment's Events of one reason, oldest first (by UID: Events of an earlier
    Karmada of the same name outlive it by an hour)."""
    uid = karmada.get()["metadata"]["uid"]
    items = karmada.host.get("events", "-n", karmada.namespace, "--field-selector",
                             f"involvedObject.kind=KarmadaDeployment,involvedObject.uid={uid},reason={reason}")["items"]
    return sorted(items, key=lambda e: int(e["metadata"]["resourceVersion"]))


def runs(namespace: str, name: str) -> list[Path]:
    """The runtime's finished reconcile runs of one KarmadaDeployment, oldest first."""
    artifacts = RUNNER_ROOT / namespace / name / "artifacts"
    if not artifacts.exists():
        return []
    done = [d for d in artifacts.iterdir() if d.name != "latest" and (d / "status").exists()]
    return sorted(done, key=lambda d: d.stat().st_mtime)


def runs_in_flight(namespace: str, name: str) -> list[Path]:
    """The runtime's reconcile runs of one KarmadaDeployment that have started and not ended."""
    artifacts = RUNNER_ROOT / namespace / name / "artifacts"
    if not artifacts.exists():
        return []
    return [d for d in artifacts.iterdir() if d.name != "latest" and d.is_dir() and not (d / "status").exists()]


ETCD_POD_PKI = "/etc/kubernetes/pki/etcd"  # an etcd member's certificates in its pod


def etcd_values(host: HostCluster, namespace: str, pod: str, prefix: str) -> dict[str, bytes]:
    """Every key under ``prefix`` with its value as etcd stores it: etcdctl in a member's pod."""
    out = host.kubectl("exec", "-n", namespace, pod, "-c", "etcd", "--", "etcdctl",
                       "--endpoints=https://127.0.0.1:2379", f"--cacert={ETCD_POD_PKI}/ca.crt",
                       f"--cert={ETCD_POD_PKI}/server.crt", f"--key={ETCD_POD_PKI}/server.key",
                       "get", "--prefix", prefix, "-w", "json").stdout
    return {k.decode(): kv.value for k, kv in etcd_keys_json(out).kvs.items()}


def settled(namespace: str, name: str) -> bool:
    """No reconcile of this KarmadaDeployment running, and the last one changed nothing (a run
    that changes something, a status write among them, starts the next one)."""
    done = runs(namespace, name)
    return (not runs_in_flight(namespace, name) and bool(done)
            and all(c.get("changed", 1) == 0 for c in recaps(done[-1]).values()))


def recap(run: Path, host: str = "localhost") -> dict[str, int]:
    """One host's PLAY RECAP counters of a finished run."""
    return recap_of((run / "stdout").read_text(), host)


def recap_of(stdout: str, host: str = "localhost") -> dict[str, int]:
    """One host's PLAY RECAP counters in a run's stdout."""
    text = re.sub(r"\x1b\[[0-9;]*m", "", stdout)
    line = [raw for raw in text.splitlines() if raw.startswith(host + " ") and "changed=" in raw][-1]
    return {k: int(v) for k, v in (item.split("=") for item in line.split(":", 1)[1].split())}


def run_seconds(run: Path) -> float | None:
    """First to last job event of one ansible-runner run."""
    stamps = []
    for event in (run / "job_events").glob("*.json"):
        with contextlib.suppress(ValueError, OSError):
            created = json.loads(event.read_text()).get("created")
            if created:
                stamps.append(datetime.fromisoformat(created).timestamp())
    return max(stamps) - min(stamps) if len(stamps) >= 2 else None


def fast_path(run: Path) -> dict:
    """What a finished run's fast-path check answered ({converged, reason}; {} when it did not run)."""
    for event in (run / "job_events").glob("*.json"):
        doc = json.loads(event.read_text())
        data = doc.get("event_data") or {}
        task = data.get("task", "")
        if doc.get("event") == "runner_on_ok" and task.startswith("Nothing changed since the last full pass? (then"):
            res = data.get("res") or {}
            return {"converged": res.get("converged"), "reason": res.get("reason")}
    return {}


STATUS_WRITE = "Write status of KarmadaDeployment"


def changed_tasks(run: Path) -> dict[str, dict]:
    """The tasks of a finished run that reported a change: name -> result."""
    out = {}
    for event in (run / "job_events").glob("*.json"):
        doc = json.loads(event.read_text())
        data = doc.get("event_data") or {}
        if doc.get("event") == "runner_on_ok" and (data.get("res") or {}).get("changed") is True:
            out[data.get("task", "")] = data["res"]
    return out


def _leaves(value: object, path: str = "") -> dict[str, object]:
    if isinstance(value, dict):
        return {k: v for key, item in value.items() for k, v in _leaves(item, f"{path}.{key}").items()}
    if isinstance(value, list):
        return {k: v for i, item in enumerate(value) for k, v in _leaves(item, f"{path}[{i}]").items()}
    return {path: value}


# What a full pass with nothing to do may still write: etcd's database sizes (written again when
# one moved by 10 % or 8 MiB: kube-apiserver compacts etcd every 5 minutes; the quota's share in
# steps of 5 %), the converged record.
SIZE_FIELDS = re.compile(r"^\.(etcd\.members\[\d+\]\.dbSize(InUse)?|etcdSpace\.percentUsed|converged\..*)$")


def status_writes(run: Path) -> list[dict]:
    """The status each write of a finished run sent, in order (a pass writes it in parts)."""
    writes = []
    for event in (run / "job_events").glob("*.json"):
        doc = json.loads(event.read_text())
        data = doc.get("event_data") or {}
        res = data.get("res") or {}
        if doc.get("event") == "runner_on_ok" and data.get("task") == STATUS_WRITE and res.get("changed") is True:
            writes.append((doc.get("counter", 0), res.get("status") or {}))
    return [status for _, status in sorted(writes, key=lambda w: w[0])]


def _merged(base: dict, patch: dict) -> dict:
    """A JSON merge patch of ``patch`` onto ``base`` (what each status write does)."""
    out = dict(base)
    for key, value in patch.items():
        out[key] = _merged(out.get(key) or {}, value) if isinstance(value, dict) else value
    return out


def changes_nothing(run: Path, runs_before: Sequence[Path]) -> list[str]:
    """What a run changed beyond etcd's sizes in status ([] for a pass with nothing to do): every
    changed task but the status write, and the status fields its writes left different from the
    status the earlier runs' writes had made."""
    out = sorted(t for t in changed_tasks(run) if t != STATUS_WRITE)
    before: dict = {}
    for earlier in runs_before:
        for status in status_writes(earlier):
            before = _merged(before, status)
    after = before
    for status in status_writes(run):
        after = _merged(after, status)
    old, new = _leaves(before), _leaves(after)
    out += [f"status{k}: {old.get(k)!r} -> {new.get(k)!r}" for k in sorted(set(old) | set(new))
            if old.get(k) != new.get(k) and not SIZE_FIELDS.match(k)]
    return out


def member_results(run: Path) -> dict[str, dict]:
    """What a finished run's member task reported per member ({} when it did not run, or the
    runtime deleted the run meanwhile: it keeps the newest 20 runs of a resource)."""
    for event in (run / "job_events").glob("*.json"):
        try:
            doc = json.loads(event.read_text())
        except FileNotFoundError:
            return {}
        data = doc.get("event_data") or {}
        if doc.get("event") == "runner_on_ok" and data.get("task") == "Join or unjoin the members":
            return (data.get("res") or {}).get("members") or {}
    return {}


def unjoined(runs_: Sequence[Path]) -> dict[str, dict]:
    """Every member whose unjoin finished in these runs, with what its unjoin reported: reason
    ``Unjoined`` when Karmada withdrew its work and the member was cleaned (``ForcedRemoval``
    when the unjoin gave up waiting for Karmada)."""
    out: dict[str, dict] = {}
    for run in runs_:
        for name, result in member_results(run).items():
            if result.get("state") == "Unjoined":
                out[name] = result
    return out


def recaps(run: Path) -> dict[str, dict[str, int]]:
    """Every host's PLAY RECAP counters of a finished run."""
    text = re.sub(r"\x1b\[[0-9;]*m", "", (run / "stdout").read_text())
    body = text.rsplit("PLAY RECAP", 1)[-1].splitlines()[1:]
    out = {}
    for raw in body:
        if ":" not in raw or "changed=" not in raw:
            continue
        name, counters = raw.split(" : ", 1) if " : " in raw else raw.split(":", 1)
        out[name.strip()] = {k: int(v) for k, v in (item.split("=") for item in counters.split())}
    return out


def delete_karmada(host: HostCluster, namespace: str, name: str = "", timeout: float = 900) -> bool:
    """Delete one KarmadaDeployment (every one in ``namespace`` without ``name``) and wait while
    the operator, which must still run, finalizes it: the members' unjoin comes first and can
    outlast kubectl's own 120 seconds. True when it is gone."""
    target = [name] if name else ["--all"]
    host.kubectl("delete", "karmadadeployment", *target, "-n", namespace, "--wait=false", check=False)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        out = host.kubectl("get", "karmadadeployment", *([name] if name else []), "-n", namespace, "-o", "name",
                           check=False)
        if (out.returncode != 0 and "NotFound" in out.stderr) or (out.returncode == 0 and not out.stdout.strip()):
            return True
        time.sleep(3)
    return False


def operator_kubeconfig(host: HostCluster, work: Path) -> Path:
    """A kubeconfig with the operator's own ServiceAccount token: the operator runs with exactly
    the RBAC of config/rbac (what `make deploy` grants), which proves it is enough."""
    docs = yaml.safe_load_all(host.kubectl("kustomize", str(ROOT / "config/default")).stdout)
    keep = [d for d in docs if d and d["kind"] not in ("Deployment", "Service", "CustomResourceDefinition")]
    host.kubectl("apply", "-f", "-", input=yaml.safe_dump_all(keep))
    sa_ns = next(d["metadata"]["name"] for d in keep if d["kind"] == "Namespace")
    sa = next(d["metadata"]["name"] for d in keep if d["kind"] == "ServiceAccount")
    token = host.kubectl("create", "token", sa, "-n", sa_ns, "--duration=4h").stdout.strip()
    admin = yaml.safe_load(host.kubeconfig.read_text())
    cluster = admin["clusters"][0]["cluster"]
    conf = {"apiVersion": "v1", "kind": "Config",
            "clusters": [{"name": "host", "cluster": cluster}],
            "users": [{"name": sa, "user": {"token": token}}],
            "contexts": [{"name": "operator", "context": {"cluster": "host", "user": sa}}],
            "current-context": "operator"}
    path = work / "operator.kubeconfig"
    path.write_text(yaml.safe_dump(conf))
    path.chmod(0o600)
    return path


def sample(minimal: bool = False) -> dict:
    """config/samples' KarmadaDeployment: the full one, or the minimal one (``spec: {}``)."""
    suffix = "_minimal" if minimal else ""
    return yaml.safe_load((ROOT / f"config/samples/operator_v1alpha1_karmadadeployment{suffix}.yaml").read_text())


def sample_for_test_bed(name: str, crds_url: str, crds_sha256: str, members: Sequence[MemberCluster] = (),
                        minimal: bool = False) -> dict:
    """The sample KarmadaDeployment (``minimal``: the minimal one) sized for the test bed: Karmada's
    CRDs from this machine (karmada_crds_server), one etcd member on an emptyDir, one
    karmada-apiserver, ECDSA keys, and the given members (none: the sample's need member clusters)."""
    cr = sample(minimal)
    cr["metadata"]["name"] = name
    cr["spec"].update({"crds": {"url": crds_url, "sha256": crds_sha256},
                       "etcd": {"local": {"replicas": 1, "storage": {"type": "EmptyDir"}}},
                       "apiServer": {"replicas": 1, "serviceType": "ClusterIP"},
                       "certificates": {"keyAlgorithm": "ECDSA"},
                       "members": [{"name": m.name, "kubeconfigSecretRef": {"name": m.secret_name}}
                                   for m in members]})
    return cr


class InClusterOperator:
    """Stands in for OperatorProcess in Deployment when the operator runs in a pod: the log
    and the reconcile runs are the pod's."""

    def __init__(self, host: HostCluster, namespace: str, deployment: str):
        self.host, self.namespace, self.deployment = host, namespace, deployment

    def log_tail(self, chars: int = 6000) -> str:
        out = self.host.kubectl("logs", f"deployment/{self.deployment}", "-n", self.namespace, "--tail=200",
                                check=False)
        return (out.stdout + out.stderr)[-chars:]

    def pods(self) -> list[dict]:
        """The Deployment's pods that are not being deleted."""
        dep = self.host.get("deployment", self.deployment, "-n", self.namespace)
        selector = ",".join(f"{k}={v}" for k, v in dep["spec"]["selector"]["matchLabels"].items())
        pods = self.host.get("pods", "-n", self.namespace, "-l", selector)["items"]
        return [p for p in pods if not p["metadata"].get("deletionTimestamp")]

    def runs(self, pod: str, namespace: str, name: str) -> dict[str, str]:
        """Finished reconcile runs of one CR inside the operator pod: run id -> its stdout, oldest
        first (by when each run last wrote its directory: the runs of one object never overlap)."""
        artifacts = RUNNER_ROOT / namespace / name / "artifacts"
        script = (f'cd {artifacts} 2>/dev/null || exit 0; for d in $(ls -1tr); do '
                  '[ "$d" != latest ] && [ -f "$d/status" ] && printf "\\n@@run %s\\n" "$d" && cat "$d/stdout"; '
                  'done; true')
        out = self.host.kubectl("exec", pod, "-n", self.namespace, "-c", "manager", "--", "sh", "-c", script,
                                timeout=60).stdout
        found = {}
        for chunk in out.split("\n@@run ")[1:]:
            run_id, _, stdout = chunk.partition("\n")
            found[run_id] = stdout
        return found


# The operator image as the test bed builds it (hack/testenv/operator-image.sh) and imports it
# into the node's containerd: the in-cluster operator runs it, and so do the etcd backup and
# restore Jobs of an operator running on this machine.
OPERATOR_IMAGE = "ko-testenv.local/karmada-ansible-operator:dev"


def load_operator_image(host: HostCluster) -> float:
    """Build (cached) and import the operator image; seconds it took."""
    import time

    from support.testenv import HACK, settings

    start = time.monotonic()
    build = subprocess.run([str(HACK / "operator-image.sh"), OPERATOR_IMAGE], capture_output=True, text=True,
                           timeout=1800)
    assert build.returncode == 0, build.stderr[-3000:]
    archive = build.stdout.strip().splitlines()[-1]
    subprocess.run(["ctr", "--address", settings()["KO_CONTAINERD_SOCK"], "-n", "k8s.io", "images", "import",
                    archive], check=True, capture_output=True, timeout=600)
    return time.monotonic() - start


# Istio's bookinfo: Deployments and Services propagated to member1 and member3 (which carries
# a NoSchedule taint), one copy each. The member and backup/restore tests use it.
BOOKINFO = [("productpage", 1), ("details", 1), ("reviews", 3), ("ratings", 1)]


def bookinfo() -> list[dict]:
    docs: list[dict] = [{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "bookinfo"}}]
    for app, replicas in BOOKINFO:
        labels = {"app": app}
        docs.append({"apiVersion": "apps/v1", "kind": "Deployment",
                     "metadata": {"name": app, "namespace": "bookinfo", "labels": labels},
                     "spec": {"replicas": replicas, "selector": {"matchLabels": labels},
                              "template": {"metadata": {"labels": labels}, "spec": {"containers": [
                                  {"name": app, "image": f"docker.io/istio/examples-bookinfo-{app}-v1:1.20.2",
                                   "ports": [{"containerPort": 9080}]}]}}}})
        docs.append({"apiVersion": "v1", "kind": "Service", "metadata": {"name": app, "namespace": "bookinfo"},
                     "spec": {"selector": labels, "ports": [{"name": "http", "port": 9080}]}})
    placement = {"clusterAffinity": {"clusterNames": ["member1", "member3"]},
                 "clusterTolerations": [{"key": "dedicated", "operator": "Equal", "value": "batch",
                                         "effect": "NoSchedule"}],
                 "replicaScheduling": {"replicaSchedulingType": "Duplicated"}}
    docs.append({"apiVersion": "policy.karmada.io/v1alpha1", "kind": "ClusterPropagationPolicy",
                 "metadata": {"name": "bookinfo-namespace"},
                 "spec": {"resourceSelectors": [{"apiVersion": "v1", "kind": "Namespace", "name": "bookinfo"}],
                          "placement": placement}})
    docs.append({"apiVersion": "policy.karmada.io/v1alpha1", "kind": "PropagationPolicy",
                 "metadata": {"name": "bookinfo", "namespace": "bookinfo"},
                 "spec": {"resourceSelectors": [{"apiVersion": "apps/v1", "kind": "Deployment"},
                                                {"apiVersion": "v1", "kind": "Service"}],
                          "placement": placement}})
    return docs


def bookinfo_running(member: MemberCluster) -> bool:
    deployments = member.kubectl("get", "deployments", "-n", "bookinfo", "-o", "yaml", check=False)
    if deployments.returncode != 0:
        return False
    items = yaml.safe_load(deployments.stdout)["items"]
    ready = {d["metadata"]["name"]: d["status"].get("readyReplicas", 0) for d in items}
    if ready != dict(BOOKINFO):
        return False
    pods = member.get("pods", "-n", "bookinfo")["items"]
    nodes = {n["metadata"]["name"] for n in member.get("nodes")["items"]}
    return (len(pods) == sum(r for _, r in BOOKINFO)
            and all(p["status"]["phase"] == "Running" and p["spec"].get("nodeName") in nodes for p in pods))
