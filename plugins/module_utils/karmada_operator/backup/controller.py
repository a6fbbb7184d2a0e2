"""The EtcdBackup reconcile: one pass, driven by the operator's periodic and Job-triggered runs.

Each pass reads the EtcdBackup, its KarmadaDeployment and this backup's Jobs, and does at most
one thing:

1. a Job that finished (its condition, or its container's end as the kubelet reports it) and is
   not recorded yet: read its one result line (termination message or pod log), write
   status (Succeeded with the snapshot, or Failed with the Job's reason), an Event, free the
   lock, label the Job recorded (Kubernetes removes it after a day);
2. a Job still running: status Running;
3. nothing running and a backup due (no schedule: once; a schedule: its most recent tick; a
   failed on-demand backup: after its back-off, or at once when the spec changed): check etcd
   is Ready, take the lock (a Lease per etcd), create the Job, status Running, an Event.

After 2 or 3 the module may wait in the same pass (``follow``, bounded) for the Job to end and
then record it (1): a short backup is done without another pass after the Job controller.

The Job runs ``karmada_operator.backup.job`` from the operator image (which carries etcdctl): see
docs/backup-restore.md "How a backup runs". Pure helpers (``job_manifest``, ``backoff``,
``decide``) are unit-tested; ``reconcile`` talks to the API through ``karmada_kube.Kube``.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from karmada_operator.backup import continuous_controller as eb_continuous
from karmada_operator.backup import plan as eb_plan
from karmada_operator.backup import status as eb_status
from karmada_operator.backup.pod import (
    API_VERSION,
    CONTAINER,
    KIND,
    LABEL_BACKUP,
    last_json_line,
    pod_annotations,
    pod_labels,
    pod_parts,
    security_contexts,
    with_user,
)
from karmada_operator.etcd import lease as eb_lease
from karmada_operator.kube import conditions as k8s_conditions
from karmada_operator.kube import schedule as eb_schedule
from karmada_operator.kube.client import Kube, KubeError, owner_reference
from karmada_operator.plan.upgrade import PRE_UPGRADE_ANNOTATION
from karmada_operator.runtime.cr_pass import COMMON_ARGS, Outcome
from karmada_operator.runtime.cr_pass import run as run_cr_pass

LABEL_RECORDED = "operator.karmada.io/recorded"
ANN_SCHEDULED = "operator.karmada.io/scheduled-time"
ANN_HOLDER = "operator.karmada.io/lock-holder"
JOB_PROGRAM = eb_plan.job_program("karmada_operator.backup.job")
JOB_TTL_SECONDS = 86400  # finished Jobs (and their logs) stay a day for `kubectl logs`
BACKOFF_FIRST = timedelta(seconds=30)
BACKOFF_MAX = timedelta(minutes=10)


# --------------------------------------------------------------------------- pure parts


def backoff(failed_attempts: int) -> timedelta:
    """How long a failed on-demand backup waits before the next attempt: 30 s, doubling, 10 min max."""
    if failed_attempts <= 0:
        return timedelta(0)
    return min(BACKOFF_FIRST * (2 ** (failed_attempts - 1)), BACKOFF_MAX)


def job_manifest(plan: Mapping[str, Any], image: str, owner: Mapping[str, Any] | None = None,
                 pull_policy: str = "IfNotPresent") -> dict[str, Any]:
    """The Job that runs one backup as ``plan`` says, in the EtcdBackup's namespace (the pod:
    :func:`pod_parts`; no ServiceAccount token)."""
    backup = plan["backup"]
    labels = pod_labels(plan)
    container, volumes = pod_parts(plan, image, pull_policy, JOB_PROGRAM,
                                   [{"name": "ETCD_BACKUP_RESULT_FILE", "value": "/dev/termination-log"}])
    meta: dict[str, Any] = {
        "name": plan["jobName"], "namespace": backup["namespace"], "labels": labels,
        "annotations": {ANN_SCHEDULED: plan["snapshot"]["scheduledTime"], ANN_HOLDER: eb_lease.lease_holder(plan)},
    }
    if owner:
        meta["ownerReferences"] = [owner_reference({"apiVersion": API_VERSION, "kind": KIND, **owner},
                                                   block_owner_deletion=False)]
    return {
        "apiVersion": "batch/v1", "kind": "Job", "metadata": meta,
        "spec": {
            "backoffLimit": 0,  # one attempt per Job: the controller decides about retries
            "activeDeadlineSeconds": eb_lease.LEASE_DURATION_SECONDS - 60,  # ends before its lock expires
            "ttlSecondsAfterFinished": JOB_TTL_SECONDS,
            "template": {
                "metadata": {"labels": labels, **({"annotations": a} if (a := pod_annotations(plan)) else {})},
                "spec": {"restartPolicy": "Never", "automountServiceAccountToken": False,
                         "enableServiceLinks": False, "containers": [container], "volumes": volumes,
                         "securityContext": security_contexts(plan)[0]},
            },
        },
    }


def job_finished(job: Mapping[str, Any]) -> str:
    """``Complete``, ``Failed`` or '' (still running) from the Job's conditions."""
    for cond in (job.get("status") or {}).get("conditions") or []:
        if cond.get("status") == "True" and cond.get("type") in ("Complete", "Failed"):
            return str(cond["type"])
    return ""


def job_ended(kube: Kube, namespace: str, job: Mapping[str, Any], container: str) -> str:
    """``Complete``, ``Failed`` or '' (running) for a Job with backoffLimit 0 (a backup's, a
    restore's): its condition, or else its ``container``'s end as the kubelet reported it (exit
    0: Complete). The pod's end is known seconds before the Job controller writes the condition;
    the result is in the pod (termination message)."""
    done = job_finished(job)
    if done:
        return done
    for pod in kube.list("v1", "Pod", namespace, label_selector=f"job-name={job['metadata']['name']}"):
        for cs in (pod.get("status") or {}).get("containerStatuses") or []:
            term = (cs.get("state") or {}).get("terminated")
            if cs.get("name") == container and term:
                return "Complete" if term.get("exitCode") == 0 else "Failed"
    return ""


def result_line(log: str) -> dict[str, Any] | None:
    """The Job's result: the last line of its log that is a JSON object with ``ok``."""
    return last_json_line(log, "ok")


@dataclass
class Decision:
    """What a pass without a running Job does: ``run`` a backup for ``scheduled_time``, or
    wait (``reason``/``message`` for a Pending status; ``requeue``: nothing to say)."""

    run: bool
    scheduled_time: datetime | None = None
    reason: str = ""
    message: str = ""
    extra: dict[str, Any] = field(default_factory=dict)


def decide(backup: Mapping[str, Any], now: datetime) -> Decision:
    """Whether to start a backup now (no Job of this backup is running)."""
    spec = backup.get("spec") or {}
    status = backup.get("status") or {}
    meta = backup.get("metadata") or {}
    generation = meta.get("generation")
    schedule = spec.get("schedule") or ""
    if schedule:
        created = eb_plan.parse_rfc3339(meta.get("creationTimestamp"))
        last = eb_plan.parse_rfc3339(status.get("lastScheduleTime"))
        d = eb_schedule.due(schedule, spec.get("timeZone") or None, last, now, created=created,
                   suspend=bool(spec.get("suspend")))
        if d.run:
            return Decision(True, d.scheduled_time)
        if spec.get("suspend"):
            return Decision(False, reason="Suspended", message="the schedule is suspended")
        return Decision(False)
    # On demand: once. A failure is retried with back-off, at once after a spec change.
    phase = status.get("phase")
    seen = status.get("observedGeneration") == generation
    if phase == "Succeeded" and seen:
        return Decision(False)
    if phase == "Failed" and seen:
        attempts = int(status.get("failedAttempts") or 0)
        last_try = eb_plan.parse_rfc3339(status.get("lastAttemptTime"))
        wait = backoff(attempts)
        if last_try is not None and now < last_try + wait:
            return Decision(False, extra={"retryAt": last_try + wait})
    return Decision(True, now)


def etcd_ready(karmada: Mapping[str, Any], any_generation: bool = False) -> tuple[bool, str]:
    """Whether the KarmadaDeployment reports etcd Ready for its current spec (no scaling or
    repair in flight); the message says what is wrong otherwise. ``any_generation``: Ready
    for the spec before its last change is enough (the backup an upgrade takes: the upgrade
    waits for it before it changes anything)."""
    meta = karmada.get("metadata") or {}
    status = karmada.get("status") or {}
    cond = next((c for c in status.get("conditions") or [] if c.get("type") == "EtcdReady"), None)
    if cond is None:
        return False, "the KarmadaDeployment has not reported on etcd yet"
    if cond.get("status") != "True":
        return False, f"etcd is not ready: {cond.get('reason', '')}: {cond.get('message', '')}".rstrip(": ")
    if not any_generation and cond.get("observedGeneration") not in (None, meta.get("generation")):
        return False, "etcd is being changed (the KarmadaDeployment's last spec change is not applied yet)"
    return True, ""


# --------------------------------------------------------------------------- the pass


def _now() -> datetime:
    return datetime.now(UTC)


class BackupReconciler:
    """One pass over one EtcdBackup (see the module docstring)."""

    def __init__(self, kube: Kube, backup: Mapping[str, Any], image: str, now: datetime | None = None,
                 pull_policy: str = "IfNotPresent", creator: Kube | None = None) -> None:
        self.kube = kube
        # Creates the Job: the operator runtime's proxy, which adds the owner reference and
        # watches Jobs (a Job's end then triggers a pass); None: ``kube``, owner set here.
        self.creator = creator
        self.backup = backup
        self.meta = backup.get("metadata") or {}
        self.spec = backup.get("spec") or {}
        self.status = dict(backup.get("status") or {})
        self.image = image
        self.now = now or _now()
        self.pull_policy = pull_policy
        self.ns = self.meta.get("namespace") or ""
        self.name = self.meta.get("name") or ""
        self.generation = self.meta.get("generation")

    # ----- helpers

    def _status(self, **kwargs: Any) -> dict[str, Any]:
        return eb_status.status_after(self.status, kwargs.pop("result", None), self.now, generation=self.generation,
                               schedule=self.spec.get("schedule") or "", time_zone=self.spec.get("timeZone") or "",
                               suspend=bool(self.spec.get("suspend")), **kwargs)

    def _pending(self, reason: str, message: str) -> Outcome:
        """Waiting to start (etcd not ready, lock held, suspended): Ready False with why; the
        phase of the last run stays when there was one."""
        out = self._status()
        if out.get("phase") not in ("Succeeded", "Failed"):
            out["phase"] = "Pending"
        out["conditions"] = k8s_conditions.merge(out.get("conditions"), [
            {"type": eb_status.CONDITION_READY, "status": "False", "reason": reason, "message": message}],
            self.generation, eb_plan.rfc3339(self.now))
        return Outcome(out, action="wait")

    def _jobs(self) -> list[dict[str, Any]]:
        return self.kube.list("batch/v1", "Job", self.ns, label_selector=f"{LABEL_BACKUP}={self.name}")

    def _pods(self, job: Mapping[str, Any]) -> list[dict[str, Any]]:
        pods = self.kube.list("v1", "Pod", self.ns, label_selector=f"job-name={job['metadata']['name']}")
        pods.sort(key=lambda p: p["metadata"].get("creationTimestamp") or "")
        return pods

    def _ended(self, job: Mapping[str, Any]) -> str:
        return job_ended(self.kube, self.ns, job, CONTAINER)

    def follow(self, job_name: str, seconds: float, poll: float = 0.5) -> bool:
        """Wait in this pass, up to ``seconds``, for the running backup Job to end. True: it ended
        (or is gone), reconcile again to record it now; a backup that fits in the wait is recorded
        without a pass after the Job controller's update. False: still running; the Job's end
        triggers a pass as it would without the wait."""
        deadline = time.monotonic() + seconds
        while True:
            job = self.kube.get("batch/v1", "Job", job_name, self.ns)
            if job is None or self._ended(job):
                return True
            if time.monotonic() + poll > deadline:
                return False
            time.sleep(poll)

    def _job_log(self, job: Mapping[str, Any]) -> str:
        pods = self._pods(job)
        for pod in reversed(pods):
            for cs in (pod.get("status") or {}).get("containerStatuses") or []:
                term = ((cs.get("state") or {}).get("terminated") or {})
                if cs.get("name") == CONTAINER and term.get("message") and result_line(term["message"]):
                    return str(term["message"])
            try:
                return self.kube.pod_log(pod["metadata"]["name"], self.ns, CONTAINER, tail_lines=20)
            except KubeError:
                continue
        return ""

    def _release(self, job: Mapping[str, Any], lock: Mapping[str, str]) -> None:
        eb_lease.release(self.kube, lock, (job["metadata"].get("annotations") or {}).get(ANN_HOLDER, ""))

    def _take_lock(self, plan: Mapping[str, Any]) -> eb_lease.LeaseDecision:
        # A holder left by a run of this very EtcdBackup, none of whose Jobs runs (checked before
        # this): left over by a pass that was cut short. Ours to take.
        return eb_lease.take(self.kube, plan["lock"], eb_lease.lease_holder(plan), self.now,
                             ours=lambda held_by: held_by.startswith(f"{self.ns}/{self.name}/"))

    def _on_demand_waiting(self) -> str:
        """An on-demand EtcdBackup of the same KarmadaDeployment waiting for the lock, if any."""
        ref = (self.spec.get("karmadaDeploymentRef") or {}).get("name")
        for other in self.kube.list(API_VERSION, KIND, self.ns):
            ospec = other.get("spec") or {}
            if other["metadata"]["name"] == self.name or ospec.get("schedule"):
                continue
            if (ospec.get("karmadaDeploymentRef") or {}).get("name") != ref:
                continue
            ready = k8s_conditions.get((other.get("status") or {}).get("conditions"), eb_status.CONDITION_READY) or {}
            if ready.get("reason") == "WaitingForLock":
                return str(other["metadata"]["name"])
        return ""

    def _invalid(self, exc: eb_plan.BackupPlanError) -> Outcome:
        out = self._status(error=exc)
        out["phase"] = "Failed"
        return Outcome(out, [self._event(exc.reason, str(exc), warning=True)], action="invalid")

    def _missing(self, plan: Mapping[str, Any], what: str) -> Outcome | None:
        """Waiting for what the pod needs before it can be made: the claim, the image."""
        if plan["storage"]["type"] == "pvc" and \
                self.kube.get("v1", "PersistentVolumeClaim", plan["storage"]["claimName"], self.ns) is None:
            return self._pending("VolumeNotFound", f"spec.storage.pvc.claimName: PersistentVolumeClaim "
                                                   f"{self.ns}/{plan['storage']['claimName']} does not exist")
        if not self.image:
            return self._pending("NoJobImage", f"the operator does not know its image for {what}: set "
                                               "KARMADA_OPERATOR_IMAGE in its Deployment")
        return None

    def _event(self, reason: str, message: str, warning: bool = False) -> dict[str, str]:
        return {"type": "Warning" if warning else "Normal", "reason": reason, "message": message}

    # ----- the pass

    def reconcile(self) -> Outcome:
        if self.meta.get("deletionTimestamp"):
            return Outcome(self.status, action="deleting")  # snapshots stay in the store
        karmada = self.kube.get(API_VERSION, "KarmadaDeployment",
                                (self.spec.get("karmadaDeploymentRef") or {}).get("name") or "", self.ns)
        jobs = self._jobs()
        unrecorded = [j for j in jobs if (j["metadata"].get("labels") or {}).get(LABEL_RECORDED) != "true"]
        unrecorded.sort(key=lambda j: j["metadata"].get("creationTimestamp") or "")
        for job in unrecorded:
            done = self._ended(job)
            if not done:
                scheduled = eb_plan.parse_rfc3339((job["metadata"].get("annotations") or {}).get(ANN_SCHEDULED))
                out = self._status(running=True, scheduled_time=scheduled if self.spec.get("schedule") else None)
                out["activeJob"] = job["metadata"]["name"]
                return Outcome(out, action="running")
            return self._record(job, done, karmada)
        if self.spec.get("continuous") is not None:
            return self._continuous(karmada)
        self._stop_follower()
        return self._maybe_start(karmada)

    # ----- continuous (backup/continuous_controller.py)

    def _follower(self) -> tuple[str, dict[str, Any] | None]:
        name = eb_continuous.deployment_name(self.name)
        return name, self.kube.get("apps/v1", "Deployment", name, self.ns)

    def _stop_follower(self) -> None:
        """spec.continuous removed: the follower goes (only ours: it carries this backup's label)."""
        name, existing = self._follower()
        if existing is not None and (existing["metadata"].get("labels") or {}).get(LABEL_BACKUP) == self.name:
            self.kube.delete("apps/v1", "Deployment", name, self.ns)
            self.status.pop("continuous", None)

    def _continuous(self, karmada: Mapping[str, Any] | None) -> Outcome:
        name, existing = self._follower()
        if existing is not None and (existing["metadata"].get("labels") or {}).get(LABEL_BACKUP) != self.name:
            return self._pending("NameConflict", f"Deployment {self.ns}/{name} exists and is not this EtcdBackup's "
                                                 "follower; remove or rename it")
        try:
            plan = eb_plan.backup_plan(self.backup, karmada, now=self.now)
        except eb_plan.BackupPlanError as exc:
            return self._invalid(exc)
        if existing is None:
            ok, why = etcd_ready(karmada or {}, any_generation=True)
            if not ok:
                return self._pending("EtcdNotReady", f"waiting to start the continuous backup: {why}")
            missing = self._missing(plan, "the follower")
            if missing is not None:
                return missing
        suspend = bool(self.spec.get("suspend"))
        want = eb_continuous.deployment_manifest(eb_continuous.follower_plan(with_user(self.kube, plan, self.ns)),
                                                 self.image,
                                                 None if self.creator else self.backup, self.pull_policy, suspend)
        events = []
        if existing is None:
            (self.creator or self.kube).create(want)
            events.append(self._event("ContinuousBackupStarted", f"Deployment {name} follows etcd into the "
                                                                 f"{plan['storage']['type']} store"))
        elif ((existing["metadata"].get("annotations") or {}).get(eb_continuous.ANN_PLAN_HASH)
              != want["metadata"]["annotations"][eb_continuous.ANN_PLAN_HASH]
              or (existing.get("spec") or {}).get("replicas") != want["spec"]["replicas"]):
            want["metadata"]["resourceVersion"] = existing["metadata"]["resourceVersion"]
            want["metadata"]["ownerReferences"] = existing["metadata"].get("ownerReferences") or \
                want["metadata"].get("ownerReferences") or []
            self.kube.replace(want)
            events.append(self._event("ContinuousBackupUpdated", f"Deployment {name} rolled for the new spec"
                                      + (" (suspended: no follower runs)" if suspend else "")))
        if suspend:
            state, ready = {"phase": "Suspended"}, {"type": eb_status.CONDITION_READY, "status": "False",
                                                     "reason": "Suspended", "message": "spec.suspend: no follower "
                                                     "runs; changes since the last delta are only in etcd"}
        else:
            pods = [p for p in self.kube.list("v1", "Pod", self.ns, label_selector=(
                f"{LABEL_BACKUP}={self.name},app.kubernetes.io/component=continuous-backup"))
                if not p["metadata"].get("deletionTimestamp")]
            pods.sort(key=lambda p: p["metadata"].get("creationTimestamp") or "")
            pod = pods[-1] if pods else None
            phase = ((pod or {}).get("status") or {}).get("phase", "")
            log = ""
            if pod is not None and phase == "Running":
                try:
                    log = self.kube.pod_log(pod["metadata"]["name"], self.ns, CONTAINER, tail_lines=20)
                except KubeError:
                    log = ""
            state, ready = eb_continuous.status_fields(eb_continuous.last_report(log), phase, self.now)
            if pod is not None:
                state["pod"] = pod["metadata"]["name"]
        out = eb_continuous.merge_status(self.status, state, ready, self.generation, self.now)
        return Outcome(out, events, action="continuous", changed=bool(events))

    def _record(self, job: Mapping[str, Any], done: str, karmada: Mapping[str, Any] | None) -> Outcome:
        name = job["metadata"]["name"]
        doc = result_line(self._job_log(job))
        if done == "Complete" and doc and doc.get("ok"):
            out = self._status(result=doc)
            out["failedAttempts"] = 0
            snap = out["lastSuccessfulBackup"]
            split = ", ".join(f"{k} {v} s" for k, v in (doc.get("phases") or {}).items())
            events = [self._event("BackupSucceeded",
                                  f"snapshot {snap.get('name')} ({snap.get('sizeBytes')} bytes, revision "
                                  f"{snap.get('revision')}, sha256 {snap.get('sha256')}) stored at "
                                  f"{snap.get('location')} in {snap.get('durationSeconds')} s"
                                  + (f" ({split})" if split else ""))]
            for gone in doc.get("deleted") or []:
                events.append(self._event("SnapshotDeleted", f"retention deleted {gone}"))
        else:
            if doc and not doc.get("ok"):
                error = {"reason": doc.get("reason") or "BackupFailed", "message": doc.get("message") or ""}
            else:
                reason = ((job.get("status") or {}).get("conditions") or [{}])[-1].get("reason") or "JobFailed"
                error = {"reason": "BackupJobFailed",
                         "message": f"Job {self.ns}/{name} ended {done} ({reason}) without a result; see "
                                    f"`kubectl logs -n {self.ns} job/{name}`"}
            out = self._status(error=error)
            out["failedAttempts"] = int(self.status.get("failedAttempts") or 0) + 1
            events = [self._event(error["reason"], error["message"], warning=True)]
        out["lastAttemptTime"] = eb_plan.rfc3339(self.now)
        out.pop("activeJob", None)
        if karmada is not None:
            try:
                plan = eb_plan.backup_plan(self.backup, karmada, now=self.now)
                self._release(job, plan["lock"])
            except eb_plan.BackupPlanError:
                pass  # the lock expires by itself
        self.kube.merge_patch("batch/v1", "Job", name, {"metadata": {"labels": {LABEL_RECORDED: "true"}}}, self.ns)
        return Outcome(out, events, action="recorded", changed=True)

    def _maybe_start(self, karmada: Mapping[str, Any] | None) -> Outcome:
        decision = decide(self.backup, self.now)
        if not decision.run:
            if decision.reason:
                return self._pending(decision.reason, decision.message)
            out = self._status()
            if "retryAt" in decision.extra:
                ready = k8s_conditions.get(out.get("conditions"), eb_status.CONDITION_READY) or {}
                msg = ready.get("message", "")
                when = eb_plan.rfc3339(decision.extra["retryAt"])
                if "next attempt" not in msg:
                    msg = f"{msg}; next attempt at {when}" if msg else f"next attempt at {when}"
                    out["conditions"] = k8s_conditions.merge(out.get("conditions"), [
                        {**ready, "message": msg}], self.generation, eb_plan.rfc3339(self.now))
            if self.status.get("phase") is None:
                out["phase"] = "Pending"
            if self.spec.get("schedule") and not k8s_conditions.get(out.get("conditions"), eb_status.CONDITION_READY):
                nxt = out.get("nextScheduleTime") or "never (the schedule does not fire)"
                out["conditions"] = k8s_conditions.merge(out.get("conditions"), [
                    {"type": eb_status.CONDITION_READY, "status": "False", "reason": "Scheduled",
                     "message": f"no backup yet; the first is due at {nxt}"}], self.generation,
                eb_plan.rfc3339(self.now))
            return Outcome(out)
        try:
            plan = eb_plan.backup_plan(self.backup, karmada, scheduled_time=decision.scheduled_time
                                  if self.spec.get("schedule") else None, now=self.now)
        except eb_plan.BackupPlanError as exc:
            return self._invalid(exc)
        ok, why = etcd_ready(karmada or {}, any_generation=PRE_UPGRADE_ANNOTATION in (
            (self.backup.get("metadata") or {}).get("annotations") or {}))
        if not ok:
            return self._pending("EtcdNotReady", f"waiting to back up: {why}")
        missing = self._missing(plan, "the backup Job")
        if missing is not None:
            return missing
        if self.spec.get("schedule"):
            waiting = self._on_demand_waiting()
            if waiting:  # a frequent schedule would otherwise take the lock back every tick
                return self._pending("WaitingForLock", f"letting the on-demand backup {waiting} of this etcd "
                                                       "go first")
        lock = self._take_lock(plan)
        if not lock.acquired:
            until = f" until {eb_plan.rfc3339(lock.expires)}" if lock.expires else ""
            return self._pending("WaitingForLock", f"another backup or a defragmentation of this etcd is running "
                                                   f"({lock.holder}{until})")
        job = job_manifest(with_user(self.kube, plan, self.ns), self.image, None if self.creator else self.backup,
                           self.pull_policy)
        try:
            (self.creator or self.kube).create(job)
        except KubeError as exc:
            if exc.status != 409:
                raise
            # AlreadyExists: this tick's Job was made by an earlier pass. Still running: report
            # it (below). Already recorded: the tick ran; free the lock taken just now.
            existing = self.kube.get("batch/v1", "Job", plan["jobName"], self.ns) or {}
            if (existing.get("metadata", {}).get("labels") or {}).get(LABEL_RECORDED) == "true":
                self._release({"metadata": {"annotations": {ANN_HOLDER: eb_lease.lease_holder(plan)}}}, plan["lock"])
                return Outcome(self._status(), action="none")
        scheduled = decision.scheduled_time if self.spec.get("schedule") else None
        out = self._status(running=True, scheduled_time=scheduled)
        out["activeJob"] = plan["jobName"]
        what = f"for {eb_plan.rfc3339(scheduled)}" if scheduled else "on demand"
        return Outcome(out, [self._event("BackupStarted", f"Job {plan['jobName']} takes a snapshot {what} into "
                                                          f"{plan['storage']['type']} store")],
                       action="started", changed=True)


# --------------------------------------------------------------------------- the etcd_backup task
# plugins/modules/etcd_backup.py documents the options; plugins/action/etcd_backup.py runs it in the
# controller process (karmada_operator/runtime/adapter.py).

ARGUMENT_SPEC: dict[str, Any] = {**COMMON_ARGS, "follow_seconds": {"type": "int", "default": 60}}


def run_pass(p: Mapping[str, Any], check_mode: bool = False, warn: Any = None) -> dict[str, Any]:
    """One pass over the EtcdBackup the task names (cr_pass.run)."""
    return run_cr_pass(p, "EtcdBackup", BackupReconciler)
