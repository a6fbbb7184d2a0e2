"""Roll the control plane's workloads one at a time, in the registry's order, each gated.

A step is one component: its objects (Service, Deployment, ...) applied server-side, then its
Deployment waited for: the new generation observed, every replica updated, ready and
available, no pod of the old template left. A component whose objects did not change is
checked with one read and not waited for unless it is not ready. The first component that
does not become ready within the timeout, or whose pods stay stuck (image pull, crash loop,
unschedulable) for ``stuck_after`` seconds, stops the rollout: ``RolloutStopped`` names it and
what its pods say; the components before it stay
new and those after it are not touched, so the plane keeps serving on a mix of versions
that each passed its gate. A first install, where none of the steps' Deployments exists yet,
has no serving version to protect: its steps are all applied at once and then gated in order,
so their pods start side by side instead of one after the other.

Each step reports the version its ready pods run (the tag of the image in their
containerStatuses, i.e. read from the running pods, not from the spec) and when it started
and ended; the module turns these into status.upgrade and an Event per step.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from typing import Any

from karmada_operator.kube.client import Kube, KubeError, owner_reference
from karmada_operator.kube.observed import observed_version, pod_problems


@dataclass
class Step:
    """One component to roll: ``objects`` applied in order; ``deployment`` gated."""

    name: str
    objects: list[dict[str, Any]]
    deployment: str
    container: str
    selector: str
    replicas: int
    # The check through karmada-apiserver once the pods are ready (after a change only):
    # "namespace/name" of the leader-election Lease a ready pod must hold, and/or an object
    # karmada-apiserver must admit with dryRun (its webhook answers).
    lease: str = ""
    admission: dict[str, Any] = field(default_factory=dict)


@dataclass
class StepResult:
    name: str
    changed: bool
    version: str
    started: str
    finished: str
    seconds: float
    pods: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


class RolloutStopped(Exception):
    """The rollout stopped at ``component`` (``reason``: RolloutTimeout, ...); ``done`` are
    the steps that passed their gate before it."""

    def __init__(self, component: str, reason: str, message: str, done: list[StepResult]):
        super().__init__(message)
        self.component, self.reason, self.done = component, reason, done


def _rfc3339(when: datetime) -> str:
    return when.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def deployment_ready(dep: Mapping[str, Any] | None, replicas: int, applied_generation: int = 0) -> tuple[bool, str]:
    """Whether a Deployment finished rolling out its current template with every replica ready
    and available, and no pod of an older template left; else what is missing.
    ``applied_generation``: the generation our apply produced; a copy older than that (a cache
    that has not seen the apply yet) shows the previous rollout, finished, and must not pass."""
    if not dep:
        return False, "not found"
    meta, status = dep.get("metadata") or {}, dep.get("status") or {}
    if int(meta.get("generation") or 0) < applied_generation:
        return False, "the applied spec is not visible yet"
    if int(status.get("observedGeneration") or 0) < int(meta.get("generation") or 0):
        return False, "the new spec is not observed yet"
    counts = {k: int(status.get(k) or 0) for k in ("replicas", "updatedReplicas", "readyReplicas",
                                                    "availableReplicas")}
    if counts["updatedReplicas"] < replicas:
        return False, f"{counts['updatedReplicas']}/{replicas} replicas updated"
    if counts["readyReplicas"] < replicas:
        return False, f"{counts['readyReplicas']}/{replicas} replicas ready"
    if counts["availableReplicas"] < replicas:
        return False, f"{counts['availableReplicas']}/{replicas} replicas available"
    if counts["replicas"] > replicas:
        return False, f"{counts['replicas'] - replicas} old replica(s) still terminating"
    return True, f"{replicas}/{replicas} replicas ready"


def _progress_failed(dep: Mapping[str, Any]) -> str:
    for cond in (dep.get("status") or {}).get("conditions") or []:
        if cond.get("type") == "Progressing" and cond.get("reason") == "ProgressDeadlineExceeded":
            return str(cond.get("message") or "progress deadline exceeded")
    return ""


def owned(obj: dict[str, Any], owner: Mapping[str, Any] | None) -> dict[str, Any]:
    """``obj`` with an owner reference to ``owner`` (the KarmadaDeployment) when both are in
    one namespace and ``obj`` names no owner itself: objects made by server-side apply get none
    from the runtime's proxy (it adds them to creates only), and without one a Deployment
    outlives its KarmadaDeployment (deletionPolicy Retain relies on garbage collection)."""
    if not owner:
        return obj
    meta = obj.get("metadata") or {}
    if meta.get("ownerReferences") or meta.get("namespace") != (owner.get("metadata") or {}).get("namespace"):
        return obj
    return {**obj, "metadata": {**meta, "ownerReferences": [owner_reference(dict(owner))]}}


def serving_check(karmada: Kube, step: Step, pods: Sequence[str]) -> str:
    """What is still missing for ``step`` through karmada-apiserver ("" when nothing): its
    Lease held by one of ``pods`` (the ready pods' names; a holder identity is
    "<pod name>_<uuid>"), and its admission dry-run accepted."""
    if step.lease:
        namespace, name = step.lease.split("/", 1)
        try:
            lease = karmada.get("coordination.k8s.io/v1", "Lease", name, namespace)
        except KubeError as exc:
            return f"reading Lease {step.lease}: {exc.message}"
        holder = str(((lease or {}).get("spec") or {}).get("holderIdentity") or "")
        if holder.split("_", 1)[0] not in pods:
            return f"Lease {step.lease} is held by {holder or 'nobody'}, not by a ready pod"
    if step.admission:
        try:
            karmada.create(step.admission, dry_run=True)
        except KubeError as exc:
            if exc.status != 409:  # already exists: admitted as far as the webhook goes
                return f"karmada-apiserver does not admit a {step.admission.get('kind')}: {exc.message}"
    return ""


def _apply(kube: Kube, step: Step, owner: Mapping[str, Any] | None) -> tuple[bool, int]:
    """Apply ``step``'s objects in order: whether any changed, and the generation the apply
    gave its Deployment (0 when it names none)."""
    changed, applied_generation = False, 0
    for obj in step.objects:
        out, obj_changed = kube.apply(owned(obj, owner))
        changed = changed or obj_changed
        if obj.get("kind") == "Deployment" and (obj.get("metadata") or {}).get("name") == step.deployment:
            applied_generation = int(((out or {}).get("metadata") or {}).get("generation") or 0)
    return changed, applied_generation


def rollout(kube: Kube, steps: Sequence[Step], namespace: str, *, timeout: float, poll: float = 2.0,
            stuck_after: float = 60.0, reader: Kube | None = None, karmada: Kube | None = None,
            owner: Mapping[str, Any] | None = None,
            clock: Callable[[], float] = time.monotonic,
            sleep: Callable[[float], None] = time.sleep, now: Callable[[], datetime] = lambda: datetime.now(UTC),
            on_step: Callable[[StepResult], None] | None = None) -> list[StepResult]:
    """Apply and gate ``steps`` in order (see the module docstring); the results of every step,
    or RolloutStopped at the first that does not pass its gate within ``timeout`` seconds, or
    whose pods have been stuck for ``stuck_after`` seconds in a state that waiting does not
    clear (image pull failures, crash loops, unschedulable: karmada_observed.STUCK_REASONS).

    ``kube`` applies (in the operator: the runtime's proxy), each object owned by ``owner``
    (see :func:`owned`);
    ``reader`` (default ``kube``) reads what the gates check. It should be the API server
    itself: the proxy's cache can still hold the Deployment as it was before the apply,
    rolled out, and a gate that reads it passes before the rollout began. Where only the proxy
    is at hand (an operator run on a host: the runtime points KUBECONFIG at its proxy too), a
    copy older than the generation the apply returned does not count."""
    reader = reader or kube
    done: list[StepResult] = []
    applied: dict[str, tuple[bool, int]] = {}
    first_install = len(steps) > 1 and not any(
        reader.get("apps/v1", "Deployment", step.deployment, namespace) for step in steps)
    batch_started, batch_t0 = now(), clock()
    if first_install:  # nothing serves yet: start every component at once (module docstring)
        applied = {step.name: _apply(kube, step, owner) for step in steps}
    for step in steps:
        started, t0 = (batch_started, batch_t0) if first_install else (now(), clock())
        changed, applied_generation = applied.get(step.name) or _apply(kube, step, owner)
        deadline = t0 + timeout
        stuck_since: float | None = None
        while True:
            dep = reader.get("apps/v1", "Deployment", step.deployment, namespace)
            ready, why = deployment_ready(dep, step.replicas, applied_generation)
            if ready:
                break
            problems = pod_problems(reader.list("v1", "Pod", namespace, label_selector=step.selector))
            stuck_since = (stuck_since or clock()) if problems else None
            progress = _progress_failed(dep or {})
            if problems and clock() - (stuck_since or clock()) >= stuck_after:
                raise RolloutStopped(step.name, "PodsNotReady",
                                     f"{step.name} stopped the rollout ({why}): {'; '.join(problems)}", done)
            if progress or clock() >= deadline:
                cause = "; ".join(problems) if problems else (progress or why)
                raise RolloutStopped(step.name, "RolloutTimeout",
                                     f"{step.name} did not become ready within {timeout:.0f} s ({why}): {cause}",
                                     done)
            sleep(poll)
        pods = [p for p in reader.list("v1", "Pod", namespace, label_selector=step.selector)
                if not (p.get("metadata") or {}).get("deletionTimestamp")]
        if changed and karmada is not None and (step.lease or step.admission):
            while missing := serving_check(karmada, step, [p["metadata"]["name"] for p in pods]):
                if clock() >= deadline:
                    raise RolloutStopped(step.name, "NotServing",
                                         f"{step.name} is ready but not serving through karmada-apiserver "
                                         f"within {timeout:.0f} s: {missing}", done)
                sleep(poll)
                pods = [p for p in reader.list("v1", "Pod", namespace, label_selector=step.selector)
                        if not (p.get("metadata") or {}).get("deletionTimestamp")]
        result = StepResult(step.name, changed, observed_version(pods, step.container), _rfc3339(started),
                            _rfc3339(now()), round(clock() - t0, 3), sorted(p["metadata"]["name"] for p in pods))
        done.append(result)
        if on_step is not None:
            on_step(result)
    return done


def remove(kube: Kube, objects: Sequence[Mapping[str, Any]]) -> list[str]:
    """Delete ``objects`` (apiVersion, kind, metadata.name/namespace) that exist, in order (a
    switched-off component: its Deployment, then its Service); "Kind/name" of each deleted."""
    deleted = []
    for obj in objects:
        meta = obj.get("metadata") or {}
        if kube.delete(str(obj["apiVersion"]), str(obj["kind"]), str(meta["name"]), meta.get("namespace")):
            deleted.append(f"{obj['kind']}/{meta['name']}")
    return deleted
