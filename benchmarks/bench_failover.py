#!/usr/bin/env python3
"""Benchmark Karmada's cluster failover at seed scale: the time until the replicas of a stopped
member run on the remaining members, against the reference of 40,000 pods in 15 minutes.

On the local host cluster, with 3 kwok member clusters from the test bed
(``hack/testenv/members.sh 3 NODES``; NODES = BENCH_FAILOVER_NODES, default 2000, the issue's
seed scale):

1. Our operator (the real ansible-operator with watches.yaml) installs one Karmada
   (KarmadaDeployment ``bench`` in karmada-system: 1 etcd member on an emptyDir, 1
   karmada-apiserver) with Karmada's cluster failover switched on through the spec only
   (FAILOVER_COMPONENTS: feature gates and flags, docs/performance.md "Failover") and the 3
   members joined by spec.members (Push). member1 and member2 carry the label the
   PropagationPolicy selects; member3 is joined, empty. Then the bench creates the
   ClusterTaintPolicy that puts a NoExecute taint on a Cluster that is not Ready (a Karmada
   object, not a flag: CLUSTER_TAINT_POLICY).
2. For each size in BENCH_FAILOVER_SIZES (total replicas, default 2000,5000,10000; the issue's
   full size is 40000): Deployments of BENCH_FAILOVER_PER_DEPLOYMENT replicas (default 100)
   propagated by one PropagationPolicy, Divided and Weighted by available replicas over the
   Clusters with the label: about half on member1, half on member2. "spread": from the first create to every
   replica Running, counted on the members' own apiservers (the Deployments' ready replicas,
   then the Running pods checked once).
3. member3 gets the label (a Divided binding is not rescheduled by a label change, so nothing
   moves), then member1's kube-apiserver is stopped (``stop_bg member1-apiserver`` of
   hack/testenv/env.sh). Measured from the stop: member1's Cluster not Ready in Karmada, the
   NoExecute taint on it, every binding rescheduled off member1, and every replica Running on
   member2 and member3 (read from their apiservers): the failover time. Evicted replicas per
   second are printed next to the reference (40,000 pods in 15 min = 44.4 pods/s, on other
   hardware), with the CPU and memory of the heavy processes in the window, so the limit can
   be named.
4. member1's apiserver is started again (``members.sh`` again: it starts what is not
   running), the namespace is deleted in Karmada and the bench waits until it is gone from
   every member, member3 loses the label; next size.

Everything started here is stopped at the end (the members and the host cluster only if this
run started them). Needs root. Do not run at 40000 on a 2-core machine shared with others.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

from support import karmada_e2e  # noqa: E402
from support.karmada_crds_server import serve  # noqa: E402
from support.operator_runtime import OperatorProcess  # noqa: E402
from support.process_usage import ProcessUsage, Usage  # noqa: E402
from support.testenv import HACK, MemberCluster, host_handle, member_handles, settings  # noqa: E402
from support.waiting import condition, crds_established  # noqa: E402

SIZES = [int(s) for s in os.environ.get("BENCH_FAILOVER_SIZES", "2000,5000,10000").split(",") if s.strip()]
NODES = int(os.environ.get("BENCH_FAILOVER_NODES", "2000"))
PER_DEPLOYMENT = int(os.environ.get("BENCH_FAILOVER_PER_DEPLOYMENT", "100"))
TIMEOUT = float(os.environ.get("BENCH_FAILOVER_TIMEOUT", "1800"))
# More settings for a tuning experiment, JSON merged into spec.components, e.g.
# '{"controllerManager": {"extraArgs": {"resource-eviction-rate": "5"}}}'.
EXTRA_COMPONENTS = json.loads(os.environ.get("BENCH_FAILOVER_COMPONENTS", "{}"))
NAME, NS = "bench", "karmada-system"
WORKLOAD_NS = "bench-failover"
MEMBERS = 3
STOPPED = "member1"  # the member whose kube-apiserver is stopped
SPREAD_LABEL = "bench.karmada.io/failover"  # the PropagationPolicy's clusters: member1, member2 (+ member3 later)
REFERENCE_PODS, REFERENCE_SECONDS = 40000, 15 * 60

# Karmada's cluster failover through the KarmadaDeployment spec (docs/performance.md, "Failover",
# shows this block; a unit test keeps the two equal). Karmada v1.18.2 sources:
# - Failover gate (default off): starts the NoExecute taint manager and the ClusterTaintPolicy
#   controller (cmd/controller-manager/app/controllermanager.go, startClusterController and
#   startClusterTaintPolicyController). GracefulEviction is on by default (pkg/features).
# - enable-no-execute-taint-eviction (default false): without it the taint manager ignores
#   NoExecute taints (pkg/controllers/cluster/taint_manager.go, Reconcile).
# - resource-eviction-rate (default 0.5): bindings evicted per second per eviction worker (3
#   workers; pkg/controllers/cluster/eviction_worker.go, dynamic_rate_limiter.go): 0.5 moves
#   400 bindings in ~270 s; 20 leaves the controllers' shared token bucket (rate-limiter-qps
#   10, burst 100) as the pace.
# - kube-api-qps/burst (40/60) of controller-manager and scheduler, cluster-api-qps/burst
#   (40/60: requests to each member), concurrent-resourcebinding-syncs and
#   concurrent-work-syncs (5): every moved binding is a binding update, a scheduling result,
#   a new Work and an apply in the new member, plus status writes.
# - webhook allow-no-execute-taint-policy: Karmada's validating webhook refuses a
#   ClusterTaintPolicy with a NoExecute taint without it, where that webhook is registered
#   (Karmada's artifacts/deploy registers it; our webhook set, like Karmada's operator and chart,
#   does not, so here it only keeps the bench working if it is added).
# The detection flags keep their defaults: cluster-status-update-frequency 10s (operator
# default), cluster-failure-threshold 30s, cluster-monitor-grace-period 40s.
FAILOVER_COMPONENTS = {
    "controllerManager": {
        "featureGates": {"Failover": True, "GracefulEviction": True},
        "extraArgs": {
            "enable-no-execute-taint-eviction": "true",
            "no-execute-taint-eviction-purge-mode": "Gracefully",
            "resource-eviction-rate": "20",
            "kube-api-qps": "200",
            "kube-api-burst": "400",
            "cluster-api-qps": "200",
            "cluster-api-burst": "400",
            "concurrent-resourcebinding-syncs": "20",
            "concurrent-work-syncs": "20",
        },
    },
    "scheduler": {"extraArgs": {"kube-api-qps": "200", "kube-api-burst": "400"}},
    "webhook": {"extraArgs": {"allow-no-execute-taint-policy": "true"}},
}

# In v1.18 Karmada's cluster controller only adds NoSchedule taints to a Cluster that is not
# Ready; the NoExecute taint that evicts comes from a ClusterTaintPolicy (also in
# docs/performance.md). No targetClusters: every Cluster.
CLUSTER_TAINT_POLICY = {
    "apiVersion": "policy.karmada.io/v1alpha1",
    "kind": "ClusterTaintPolicy",
    "metadata": {"name": "evict-not-ready"},
    "spec": {
        "addOnConditions": [{"conditionType": "Ready", "operator": "NotIn", "statusValues": ["True"]}],
        "removeOnConditions": [{"conditionType": "Ready", "operator": "In", "statusValues": ["True"]}],
        "taints": [{"key": "cluster.karmada.io/not-ready", "effect": "NoExecute"}],
    },
}


def say(line: str = "") -> None:
    print(line, flush=True)


def wait_until(predicate, timeout: float, interval: float = 1.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with contextlib.suppress(Exception):
            value = predicate()
            if value:
                return value
        time.sleep(interval)
    return None


def merged(base: dict, extra: dict) -> dict:
    """``extra`` over a copy of ``base``, maps merged key by key."""
    out = json.loads(json.dumps(base))
    for key, value in extra.items():
        out[key] = merged(out[key], value) if isinstance(value, dict) and isinstance(out.get(key), dict) else value
    return out


def failover_cr(crds) -> dict:
    cr = karmada_e2e.sample_for_test_bed(NAME, crds.url, crds.sha256)
    components = merged(FAILOVER_COMPONENTS, EXTRA_COMPONENTS)
    components["descheduler"] = {"enabled": False}
    cr["spec"]["components"] = components
    cr["spec"]["members"] = [
        {"name": f"member{i}", "kubeconfigSecretRef": {"name": f"member{i}-kubeconfig"}, "syncMode": "Push",
         **({"labels": {SPREAD_LABEL: "target"}} if i < MEMBERS else {})}
        for i in range(1, MEMBERS + 1)]
    return cr


# ---- talking to Karmada and the members (one kept connection each: the polls run every second)

class Api:
    """A raw JSON client for one kubeconfig (the kubernetes package; no object models)."""

    def __init__(self, kubeconfig: Path):
        from kubernetes import config

        self.client = config.new_client_from_config(config_file=str(kubeconfig))

    def call(self, method: str, path: str, body=None, query: list | None = None,
             accept: str = "application/json", content_type: str = "application/json") -> dict:
        resp = self.client.call_api(path, method, query_params=query or [], body=body,
                                    header_params={"Accept": accept, "Content-Type": content_type},
                                    auth_settings=["BearerToken"], _preload_content=False,
                                    _return_http_data_only=True, _request_timeout=120)
        return json.loads(resp.data) if resp.data else {}

    def get(self, path: str, query: list | None = None, accept: str = "application/json") -> dict:
        return self.call("GET", path, query=query, accept=accept)

    def answers(self) -> bool:
        """/readyz says ok within 2 s."""
        try:
            resp = self.client.call_api("/readyz", "GET", auth_settings=["BearerToken"], _preload_content=False,
                                        _return_http_data_only=True, _request_timeout=2)
            return resp.status == 200
        except Exception:  # noqa: BLE001 - refused, timed out, 5xx: not answering
            return False

    def exists(self, path: str) -> bool:
        from kubernetes.client.exceptions import ApiException

        try:
            self.get(path)
            return True
        except ApiException as exc:
            if exc.status == 404:
                return False
            raise


def deployments_ready(api: Api) -> int:
    """Ready replicas of the benchmark's Deployments in one member (0 when the namespace is not there)."""
    from kubernetes.client.exceptions import ApiException

    try:
        items = api.get(f"/apis/apps/v1/namespaces/{WORKLOAD_NS}/deployments")["items"]
    except ApiException as exc:
        if exc.status == 404:
            return 0
        raise
    return sum((d.get("status") or {}).get("readyReplicas") or 0 for d in items)


def pods_running(api: Api) -> int:
    """Pods Running in the benchmark's namespace of one member (metadata only, in pages)."""
    count, token = 0, ""
    while True:
        query = [("fieldSelector", "status.phase=Running"), ("limit", "5000")]
        if token:
            query.append(("continue", token))
        page = api.get(f"/api/v1/namespaces/{WORKLOAD_NS}/pods", query,
                       accept="application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1")
        count += len(page.get("items") or [])
        token = (page.get("metadata") or {}).get("continue") or ""
        if not token:
            return count


def cluster(karmada: Api, name: str) -> dict:
    return karmada.get(f"/apis/cluster.karmada.io/v1alpha1/clusters/{name}")


def no_execute(obj: dict) -> bool:
    return any(t.get("effect") == "NoExecute" for t in (obj.get("spec") or {}).get("taints") or [])


def settled(obj: dict) -> bool:
    """Ready and untainted (the not-ready taints of an earlier round gone)."""
    return condition(obj, "Ready").get("status") == "True" and not (obj.get("spec") or {}).get("taints")


def bindings_moved(karmada: Api) -> tuple[int, int]:
    """(bindings scheduled without member1 and with all their replicas, all bindings)."""
    items = karmada.get(f"/apis/work.karmada.io/v1alpha2/namespaces/{WORKLOAD_NS}/resourcebindings")["items"]
    done = 0
    for rb in items:
        spec = rb.get("spec") or {}
        targets = spec.get("clusters") or []
        if all(t["name"] != STOPPED for t in targets) and \
                sum(t.get("replicas") or 0 for t in targets) == (spec.get("replicas") or 0):
            done += 1
    return done, len(items)


def deployment(index: int) -> dict:
    name = f"bench-{index:05d}"
    labels = {"app": name}
    return {
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": name, "namespace": WORKLOAD_NS, "labels": {SPREAD_LABEL: "workload"}},
        "spec": {
            "replicas": PER_DEPLOYMENT,
            "selector": {"matchLabels": labels},
            "template": {
                "metadata": {"labels": labels},
                "spec": {
                    "nodeSelector": {"type": "kwok"},
                    "terminationGracePeriodSeconds": 0,
                    "containers": [{"name": "app", "image": "registry.k8s.io/pause:3.10",
                                    "resources": {"requests": {"cpu": "10m", "memory": "16Mi"}}}],
                },
            },
        },
    }


def propagation_policy() -> dict:
    return {
        "apiVersion": "policy.karmada.io/v1alpha1", "kind": "PropagationPolicy",
        "metadata": {"name": "bench-failover", "namespace": WORKLOAD_NS},
        "spec": {
            "resourceSelectors": [{"apiVersion": "apps/v1", "kind": "Deployment",
                                   "labelSelector": {"matchLabels": {SPREAD_LABEL: "workload"}}}],
            "placement": {
                "clusterAffinity": {"labelSelector": {"matchLabels": {SPREAD_LABEL: "target"}}},
                # By room (available replicas): the evicted replicas are shared by the remaining
                # members, each one's kube-controller-manager creating its part.
                "replicaScheduling": {"replicaSchedulingType": "Divided", "replicaDivisionPreference": "Weighted",
                                      "weightPreference": {"dynamicWeight": "AvailableReplicas"}},
            },
        },
    }


def label_cluster(karmada: Api, name: str, value: str | None) -> None:
    karmada.call("PATCH", f"/apis/cluster.karmada.io/v1alpha1/clusters/{name}",
                 body={"metadata": {"labels": {SPREAD_LABEL: value}}}, content_type="application/merge-patch+json")


# ---- the member's kube-apiserver

def bed(script: str, timeout: float = 900) -> subprocess.CompletedProcess:
    """Run a bash snippet with hack/testenv/env.sh sourced (start_bg, stop_bg, ...)."""
    return subprocess.run(["bash", "-c", f'. "{HACK}/env.sh"; {script}'], capture_output=True, text=True,
                          timeout=timeout)


def stop_member_apiserver(name: str) -> subprocess.Popen:
    """``stop_bg`` in the background (SIGTERM, then SIGKILL if it still runs after 30 s): kube-apiserver's
    graceful shutdown takes a while, and the clock runs from the SIGTERM while the polls go on."""
    return subprocess.Popen(["bash", "-c", f'. "{HACK}/env.sh"; stop_bg {name}-apiserver 30'],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)


def start_members() -> None:
    """members.sh starts whatever of the members is not running (here: the stopped apiserver)."""
    proc = subprocess.run([str(HACK / "members.sh"), str(MEMBERS), str(NODES)], capture_output=True, text=True,
                          timeout=1800)
    if proc.returncode != 0:
        raise RuntimeError(f"members.sh {MEMBERS} {NODES} failed: {proc.stderr[-3000:]}")


# ---- CPU and memory: which process is the limit

def classifier():
    pids_dir = Path(settings()["KO_RUN"]) / "pids"
    me = os.getpid()
    karmada_bins = {"kube-apiserver": "karmada-apiserver", "etcd": "karmada etcd",
                    "kube-controller-manager": "karmada kube-controller-manager"}

    def bed_names() -> dict[int, str]:
        out = {}
        for pidf in pids_dir.glob("*.pid"):
            with contextlib.suppress(OSError, ValueError):
                out[int(pidf.read_text().strip())] = pidf.stem
        return out

    def classify(pid: int, argv: list[str]) -> str | None:
        if pid == me:
            return "benchmark (this script)"
        name = bed_names().get(pid)
        if name:
            if name.startswith("member") and "-" in name:
                member, part = name.split("-", 1)
                if member == "member":
                    return "members' etcd"
                return f"{member} {part if part == 'kwok' else 'kube-' + part}"
            return f"host {name}"
        if not argv:
            return None
        base = os.path.basename(argv[0])
        if base.startswith("karmada-"):
            return base
        if base in karmada_bins and not any(str(settings()["KO_STATE"]) in a for a in argv):
            return karmada_bins[base]
        if base == "ansible-operator":
            return "ansible-operator"
        if any("ansible" in os.path.basename(a) for a in argv[:2]):
            return "operator's ansible"
        return None

    return classify


def usage_lines(usage: Usage, top: int = 12) -> list[str]:
    lines = [f"    {'process':36} {'avg cores':>9} {'peak cores':>10} {'peak RSS MiB':>12}"]
    for group, g in usage.rows()[:top]:
        lines.append(f"    {group:36} {g.average_cores(usage.seconds):9.2f} {g.peak_cores:10.2f} "
                     f"{g.peak_rss_mib:12.0f}")
    listed = sum(g.average_cores(usage.seconds) for g in usage.groups.values())
    lines.append(f"    {'everything else on the machine':36} {usage.machine_busy_avg * usage.cores - listed:9.2f}")
    lines.append(f"    machine: {usage.cores} cores busy {usage.machine_busy_avg:.0%} on average, "
                 f"{usage.machine_busy_peak:.0%} at the busiest second; lowest MemAvailable "
                 f"{usage.mem_available_min_mib / 1024:.1f} GiB ({usage.seconds:.0f} s window)")
    return lines


def limit_of(usage: Usage) -> str:
    """One sentence naming the likely limit from a window's figures."""
    rows = usage.rows()
    if not rows:
        return "no samples"
    busiest, g = rows[0]
    share = g.average_cores(usage.seconds)
    if usage.mem_available_min_mib < 1024:
        heaviest = max(usage.groups.items(), key=lambda kv: kv[1].peak_rss_mib)
        return (f"memory: MemAvailable fell to {usage.mem_available_min_mib:.0f} MiB; the largest is "
                f"{heaviest[0]} ({heaviest[1].peak_rss_mib:.0f} MiB)")
    if usage.machine_busy_avg > 0.85:
        return (f"CPU: the machine's {usage.cores} cores were {usage.machine_busy_avg:.0%} busy; the busiest "
                f"process is {busiest} ({share:.2f} cores on average)")
    return (f"not the machine's CPU or memory as a whole ({usage.machine_busy_avg:.0%} busy, "
            f"{usage.mem_available_min_mib / 1024:.1f} GiB available at least): one process's own pace "
            f"(a single worker, client rate limits) or timers, see the times above (busiest process {busiest}, "
            f"{share:.2f} cores)")


# ---- one size

@contextlib.contextmanager
def watched(out: dict, key: str):
    """CPU and memory of the heavy processes while the block runs, into out[key] (also on errors)."""
    usage = ProcessUsage(classifier())
    try:
        yield
    finally:
        out[key] = usage.finish()


def run_size(size: int, karmada: Api, members: dict[str, Api]) -> dict:
    out: dict = {"size": size}
    try:
        if spread(size, karmada, members, out):
            failover(size, karmada, members, out)
    except Exception as exc:  # noqa: BLE001 - reported with what was measured, then the cleanup runs
        out["failed"] = f"{type(exc).__name__}: {exc}"
    return out


def spread(size: int, karmada: Api, members: dict[str, Api], out: dict) -> bool:
    """Deployments over member1 and member2 until every replica runs; True when they do."""
    # every Cluster Ready and untainted, member3 not selected yet
    label_cluster(karmada, f"member{MEMBERS}", None)
    if not wait_until(lambda: all(settled(cluster(karmada, m)) for m in members), 600, 2):
        raise RuntimeError("the members are not all Ready and untainted")
    spread_members = ["member1", "member2"]
    with watched(out, "spread_usage"):
        start = time.monotonic()
        karmada.call("POST", "/api/v1/namespaces", body={"apiVersion": "v1", "kind": "Namespace",
                                                          "metadata": {"name": WORKLOAD_NS}})
        karmada.call("POST", f"/apis/policy.karmada.io/v1alpha1/namespaces/{WORKLOAD_NS}/propagationpolicies",
                     body=propagation_policy())
        for i in range(size // PER_DEPLOYMENT):
            karmada.call("POST", f"/apis/apps/v1/namespaces/{WORKLOAD_NS}/deployments", body=deployment(i))
        out["create"] = time.monotonic() - start
        if not wait_until(lambda: sum(deployments_ready(members[m]) for m in spread_members) >= size, TIMEOUT, 2):
            out["failed"] = (f"spread: {sum(deployments_ready(members[m]) for m in spread_members)}/{size} "
                             f"Running after {TIMEOUT:.0f} s")
            return False
        out["spread"] = time.monotonic() - start
    out["spread_pods"] = {m: pods_running(members[m]) for m in members}
    return True


def failover(size: int, karmada: Api, members: dict[str, Api], out: dict) -> bool:
    """member3 selected too, member1's apiserver stopped, until every replica runs on the others."""
    remaining = [m for m in members if m != STOPPED]
    target = f"member{MEMBERS}"
    out["evicted"] = deployments_ready(members[STOPPED])
    label_cluster(karmada, target, "target")
    time.sleep(5)  # nothing should move: check that it did not
    out["moved_by_label"] = deployments_ready(members[target])
    marks: dict[str, float] = {}
    out["marks"] = marks
    with watched(out, "failover_usage"):
        t0 = time.monotonic()
        stopper = stop_member_apiserver(STOPPED)
        tick = 0
        while time.monotonic() - t0 < TIMEOUT:
            now = time.monotonic() - t0
            if "silent" not in marks and not members[STOPPED].answers():
                marks["silent"] = now
            if "stopped" not in out and stopper.poll() is not None:
                out["stopped"] = now
                if stopper.returncode != 0:
                    raise RuntimeError(f"stopping {STOPPED}'s kube-apiserver failed: {stopper.stderr.read()[-2000:]}")
            with contextlib.suppress(Exception):
                obj = cluster(karmada, STOPPED)
                if "not_ready" not in marks and condition(obj, "Ready").get("status") != "True":
                    marks["not_ready"] = now
                if "tainted" not in marks and no_execute(obj):
                    marks["tainted"] = now
            if "tainted" in marks and "rescheduled" not in marks and tick % 3 == 0:
                with contextlib.suppress(Exception):
                    done, total = bindings_moved(karmada)
                    if total and done == total:
                        marks["rescheduled"] = time.monotonic() - t0
            with contextlib.suppress(Exception):
                ready = {m: deployments_ready(members[m]) for m in remaining}
                if "first" not in marks and ready[target] > 0:
                    marks["first"] = time.monotonic() - t0
                if sum(ready.values()) >= size:
                    marks["running"] = time.monotonic() - t0
                    break
            tick += 1
            time.sleep(1)
        if "stopped" not in out:
            stopper.wait(timeout=120)
            out["stopped"] = time.monotonic() - t0
    if "running" not in marks:
        out["failed"] = f"failover: not every replica Running on {', '.join(remaining)} after {TIMEOUT:.0f} s"
        return False
    out["failover_pods"] = {m: pods_running(members[m]) for m in remaining}
    return True


def clean_up_size(karmada: Api, members: dict[str, Api]) -> None:
    """member1's apiserver back, the namespace gone everywhere, member3 not selected."""
    start_members()
    if not wait_until(lambda: settled(cluster(karmada, STOPPED)), 600, 2):
        say(f"  cleanup: {STOPPED} not Ready and untainted again within 600 s")
    path = f"/api/v1/namespaces/{WORKLOAD_NS}"
    with contextlib.suppress(Exception):
        karmada.call("DELETE", path)
    if not wait_until(lambda: not karmada.exists(path), 900, 3):
        say(f"  cleanup: namespace {WORKLOAD_NS} not gone from Karmada within 900 s")
    # Karmada withdraws the namespace from the members; delete what is left (ours) and wait.
    for api in members.values():
        with contextlib.suppress(Exception):
            api.call("DELETE", path)
    if not wait_until(lambda: not any(api.exists(path) for api in members.values()), 1800, 5):
        say(f"  cleanup: namespace {WORKLOAD_NS} not gone from every member within 1800 s")
    label_cluster(karmada, f"member{MEMBERS}", None)


def report(res: dict) -> None:
    size = res["size"]
    say(f"size {size} replicas ({size // PER_DEPLOYMENT} Deployments x {PER_DEPLOYMENT}), "
        f"{MEMBERS} members x {NODES} kwok nodes")
    if "spread" in res:
        pods = res["spread_pods"]
        say(f"  spread over member1+member2: {res['spread']:.1f} s to all Running ({res['create']:.1f} s of creates; "
            f"{size / res['spread']:.1f} pods/s); Running pods " + ", ".join(f"{m} {n}" for m, n in pods.items()))
    if res.get("moved_by_label"):
        say(f"  note: {res['moved_by_label']} replicas went to member{MEMBERS} when it got the label")
    marks = res.get("marks") or {}
    if marks:
        def at(key: str) -> str:
            return f"{marks[key]:.1f} s" if key in marks else "not seen"
        stopped = f"{res['stopped']:.1f} s" if "stopped" in res else "not seen"
        say(f"  failover of {res.get('evicted')} replicas from {STOPPED}, from the SIGTERM to its kube-apiserver: "
            f"not answering {at('silent')}, process gone {stopped} (stop_bg kills after 30 s), "
            f"Cluster not Ready {at('not_ready')}, NoExecute taint {at('tainted')}, bindings rescheduled "
            f"{at('rescheduled')}, first on member{MEMBERS} {at('first')}, all Running {at('running')}")
    if "rescheduled" in marks and "tainted" in marks:
        bindings = size // PER_DEPLOYMENT
        say(f"  rescheduling: {bindings} bindings in {marks['rescheduled'] - marks['tainted']:.1f} s from the taint, "
            f"{(marks['rescheduled'] - marks['tainted']) / bindings:.2f} s per binding (taint manager and scheduler)")
    if "running" in marks:
        total = marks["running"]
        after_taint = total - marks.get("tainted", 0.0)
        pods = res["failover_pods"]
        say(f"  failover time {total:.1f} s: {res['evicted'] / total:.1f} pods/s from the stop, "
            f"{res['evicted'] / after_taint:.1f} pods/s from the taint; Running pods "
            + ", ".join(f"{m} {n}" for m, n in pods.items()))
        say(f"  reference: {REFERENCE_PODS} pods in {REFERENCE_SECONDS / 60:.0f} min = "
            f"{REFERENCE_PODS / REFERENCE_SECONDS:.1f} pods/s (their hardware); at this rate {REFERENCE_PODS} pods "
            f"would take {REFERENCE_PODS / (res['evicted'] / total) / 60:.1f} min")
    if res.get("failed"):
        say(f"  not measured: {res['failed']}")
    for key, what in (("spread_usage", "spread"), ("failover_usage", "failover")):
        if key in res:
            say(f"  CPU and memory during the {what}:")
            for line in usage_lines(res[key]):
                say(line)
            say(f"    limit: {limit_of(res[key])}")


def main() -> int:
    if any(s % PER_DEPLOYMENT for s in SIZES):
        say(f"failover benchmark: every size must be a multiple of BENCH_FAILOVER_PER_DEPLOYMENT={PER_DEPLOYMENT}")
        return 1
    host = host_handle()
    started_cluster = started_members = False
    if not (host.kubeconfig.exists() and host.ready()):
        subprocess.run([str(HACK / "up.sh")], check=True, capture_output=True, text=True, timeout=1800)
        started_cluster = True
    members = member_handles(MEMBERS, NODES)

    def up(m: MemberCluster) -> bool:
        if not (m.kubeconfig.exists() and m.ready()):
            return False
        out = m.kubectl("get", "nodes", "-l", "type=kwok", "--no-headers", check=False)
        return out.returncode == 0 and len(out.stdout.splitlines()) >= NODES

    if not all(up(m) for m in members):
        started = time.monotonic()
        start_members()
        started_members = True
        say(f"{MEMBERS} members x {NODES} kwok nodes started in {time.monotonic() - started:.0f} s")
    links = Path(settings()["KO_LINKS"])
    work = Path(tempfile.mkdtemp(prefix="ko-failover-bench-"))
    crds = serve()
    operator = None
    karmada = None
    results = []
    try:
        host.kubectl("apply", "-k", str(ROOT / "config/crd"))
        crds_established(host.kubectl, ["karmadadeployments.operator.karmada.io"])
        operator = OperatorProcess(str(links / "ansible-operator"), host.kubeconfig, work)
        operator.wait_healthy()
        fleet = karmada_e2e.Deployment(host, operator, work, NAME, NS)
        cr = failover_cr(crds)
        host.kubectl("apply", "-f", "-", input=yaml.safe_dump(cr))
        started = time.monotonic()

        def ready() -> bool:
            status = fleet.get().get("status", {})
            return condition(fleet.get(), "Ready").get("status") == "True" and \
                status.get("readyMembers") == f"{MEMBERS}/{MEMBERS}"

        if not wait_until(ready, TIMEOUT, 3):
            say(f"failover benchmark: not measured (Karmada not Ready with {MEMBERS} members; log "
                f"{operator.log_path})")
            return 0
        say(f"Karmada {cr['spec']['karmadaVersion']} from our operator, Ready with {MEMBERS} members joined in "
            f"{time.monotonic() - started:.0f} s; failover settings from the spec (docs/performance.md, Failover)"
            + (f", with {json.dumps(EXTRA_COMPONENTS)}" if EXTRA_COMPONENTS else "") + f"; logs in {work}")
        karmada = Api(fleet.kubeconfig())
        karmada.call("POST", "/apis/policy.karmada.io/v1alpha1/clustertaintpolicies", body=CLUSTER_TAINT_POLICY)
        apis = {m.name: Api(m.kubeconfig) for m in members}
        for size in SIZES:
            res = run_size(size, karmada, apis)
            report(res)
            results.append(res)
            clean_up_size(karmada, apis)
            if res.get("failed"):
                say("  stopping here: the larger sizes would fail the same way")
                break
    finally:
        with contextlib.suppress(Exception):
            if bed(f"is_running {STOPPED}-apiserver").returncode != 0:
                start_members()
        if karmada is not None:
            with contextlib.suppress(Exception):
                karmada.call("DELETE", f"/api/v1/namespaces/{WORKLOAD_NS}")
            with contextlib.suppress(Exception):
                karmada.call("DELETE", "/apis/policy.karmada.io/v1alpha1/clustertaintpolicies/"
                             + CLUSTER_TAINT_POLICY["metadata"]["name"])
        if operator is not None:
            karmada_e2e.delete_karmada(host, NS, NAME)
            operator.stop()
        crds.stop()
        if started_members:
            subprocess.run([str(HACK / "members.sh"), "--down"], capture_output=True, text=True, timeout=600)
        if started_cluster:
            subprocess.run([str(HACK / "down.sh")], capture_output=True, text=True, timeout=600)
    measured = [r for r in results if "running" in (r.get("marks") or {})]
    if measured:
        say("curve (replicas evicted: failover time, pods/s):")
        for r in measured:
            total = r["marks"]["running"]
            say(f"  {r['size']:>6} total, {r['evicted']:>6} evicted: {total:7.1f} s, "
                f"{r['evicted'] / total:6.1f} pods/s")
        say(f"  reference: {REFERENCE_PODS} pods in {REFERENCE_SECONDS} s = {REFERENCE_PODS / REFERENCE_SECONDS:.1f} "
            "pods/s (their hardware)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
