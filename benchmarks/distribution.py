"""Distribution latency: a Deployment created through karmada-apiserver until it is present on
its member cluster (issue 36 item 1; Karmada's own large-scale report: P99 1.3 s Push, 0.99 s
Pull, against a 2 s SLO).

Each object goes to one member: a PropagationPolicy per member selects the Deployments labelled
``bench-target=<member>`` and places them on that member alone, and the objects are spread over
the members in turn (so 1,000 objects make 1,000 Works, not 1,000 x N). Objects are created at a
steady rate (``rate`` per second, so the figure is latency, not a queue draining); the clock
starts when karmada-apiserver acknowledges the create and stops when the member's watch delivers
the object (one watch per member, on this machine: one clock, 1 ms resolution). Everything is
made in one namespace, deleted at the end (Karmada withdraws it from the members).
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

from kubernetes import client, config, watch
from plots import percentile

NAMESPACE = "bench-distribution"
LABEL = "bench-target"
# Karmada's published figures (100 members of 5,000 nodes each) and the goal
REFERENCE_P99 = {"Push": 1.3, "Pull": 0.99}
GOAL_P99 = 1.0


def _api(kubeconfig: Path) -> client.ApiClient:
    return config.new_client_from_config(str(kubeconfig))


def _deployment(name: str, target: str) -> dict:
    labels = {"app": name, LABEL: target}
    return {"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": name, "namespace": NAMESPACE, "labels": labels},
            "spec": {"replicas": 1, "selector": {"matchLabels": {"app": name}},
                     "template": {"metadata": {"labels": {"app": name}},
                                  "spec": {"containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10"}]}}}}


def _policy(member: str) -> dict:
    return {"apiVersion": "policy.karmada.io/v1alpha1", "kind": "PropagationPolicy",
            "metadata": {"name": f"to-{member}", "namespace": NAMESPACE},
            "spec": {"resourceSelectors": [{"apiVersion": "apps/v1", "kind": "Deployment",
                                            "labelSelector": {"matchLabels": {LABEL: member}}}],
                     "placement": {"clusterAffinity": {"clusterNames": [member]}}}}


class _Watcher(threading.Thread):
    """Records when each Deployment of NAMESPACE first appears on one member."""

    def __init__(self, name: str, kubeconfig: Path, seen: dict[str, float], lock: threading.Lock):
        super().__init__(daemon=True, name=f"watch-{name}")
        self.apps = client.AppsV1Api(_api(kubeconfig))
        self.seen, self.lock = seen, lock
        self.stop = threading.Event()
        self.ready = threading.Event()

    def run(self) -> None:
        version = ""
        while not self.stop.is_set():
            with contextlib.suppress(Exception):
                if not version:
                    listed = self.apps.list_namespaced_deployment(NAMESPACE)
                    version = listed.metadata.resource_version
                    self._record(item.metadata.name for item in listed.items)
                    self.ready.set()
                for event in watch.Watch().stream(self.apps.list_namespaced_deployment, NAMESPACE,
                                                  resource_version=version, timeout_seconds=5):
                    version = event["object"].metadata.resource_version
                    if event["type"] == "ADDED":
                        self._record([event["object"].metadata.name])
                    if self.stop.is_set():
                        return

    def _record(self, names) -> None:
        now = time.monotonic()
        with self.lock:
            for name in names:
                self.seen.setdefault(name, now)


def measure(karmada_kubeconfig: Path, members: Mapping[str, Path], count: int, rate: float = 10.0,
            timeout: float = 600.0) -> tuple[dict[str, list[float]], dict[str, int]]:
    """Per member the objects went to: the latencies in seconds of those that arrived, and how
    many did not within ``timeout`` after the last create. ``members``: name -> kubeconfig of each
    member (all joined, Ready)."""
    karmada = _api(karmada_kubeconfig)
    core, custom = client.CoreV1Api(karmada), client.CustomObjectsApi(karmada)
    apps = client.AppsV1Api(karmada)
    with contextlib.suppress(client.ApiException):
        core.create_namespace({"metadata": {"name": NAMESPACE}})
    names = sorted(members)
    for member in names:
        custom.create_namespaced_custom_object("policy.karmada.io", "v1alpha1", NAMESPACE, "propagationpolicies",
                                               _policy(member))
    # Karmada propagates the namespace to every member; the watches start once it is there.
    deadline = time.monotonic() + timeout
    for member, path in members.items():
        member_core = client.CoreV1Api(_api(path))
        while True:
            try:
                member_core.read_namespace(NAMESPACE)
                break
            except client.ApiException:
                if time.monotonic() > deadline:
                    raise TimeoutError(f"namespace {NAMESPACE} not on {member} after {timeout:.0f} s") from None
                time.sleep(0.5)
    seen: dict[str, float] = {}
    lock = threading.Lock()
    watchers = [_Watcher(m, members[m], seen, lock) for m in names]
    for w in watchers:
        w.start()
    for w in watchers:
        w.ready.wait(60)
    acked: dict[str, float] = {}
    target: dict[str, str] = {}
    start = time.monotonic()
    for i in range(count):
        name = f"d-{i:05d}"
        pause = start + i / rate - time.monotonic()
        if pause > 0:
            time.sleep(pause)
        target[name] = names[i % len(names)]
        apps.create_namespaced_deployment(NAMESPACE, _deployment(name, target[name]))
        acked[name] = time.monotonic()
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        with lock:
            if all(n in seen for n in acked):
                break
        time.sleep(0.2)
    for w in watchers:
        w.stop.set()
    latencies: dict[str, list[float]] = {m: [] for m in names}
    missing: dict[str, int] = dict.fromkeys(names, 0)
    with lock:
        for n, t in acked.items():
            if n in seen:
                latencies[target[n]].append(seen[n] - t)
            else:
                missing[target[n]] += 1
    with contextlib.suppress(client.ApiException):
        core.delete_namespace(NAMESPACE)
    return latencies, missing


def report(n_members: int, mode: str, latencies: Sequence[float], missing: int) -> str:
    """One line: P50/P99 (nearest rank) with Karmada's reference and the goal as ratios."""
    values = sorted(latencies)
    if not values:
        return f"distribute over {n_members} members ({mode}): nothing arrived ({missing} objects)"
    p50, p99 = percentile(values, 50), percentile(values, 99)
    ref = REFERENCE_P99[mode]
    return (f"distribute {len(values)} Deployments over {n_members} members ({mode}), create acknowledged -> present "
            f"on the member: P50 {p50:.2f} s, P99 {p99:.2f} s, max {values[-1]:.2f} s; {missing} not arrived; "
            f"Karmada's reference P99 {ref} s ({mode}): ratio {p99 / ref:.2f}x; goal P99 <= {GOAL_P99:.0f} s: ratio "
            f"{p99 / GOAL_P99:.2f}x ({'meets' if p99 <= GOAL_P99 else 'misses'})")
