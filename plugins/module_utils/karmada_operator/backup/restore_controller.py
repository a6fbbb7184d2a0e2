"""The EtcdRestore reconcile: seed a new KarmadaDeployment's etcd, let it start, verify it.

A pass does one step and says so in status (docs/backup-restore.md, "How a restore runs"):

1. **Seed** (condition ``Seeded``): refuse a target whose etcd exists (its StatefulSet, or a
   member volume not made by this restore: ``TargetHasData``); plan; put the source's CA and
   service-account key into the target's PKI Secret when ``spec.pki.secretRef`` names them;
   create the members' volumes and one restore Job per member; when every Job has reported,
   ``Seeded=True`` (or ``Failed`` with the first Job's reason; the volumes it made are removed)
   and the KarmadaDeployment is annotated, which starts its reconcile (it waited for us).
2. **Verify** (condition ``Verified``): once the KarmadaDeployment is Ready, count Karmada's
   objects through the restored karmada-apiserver and every key in each restored etcd member at
   the restored revision (from etcd itself, with the operator's etcd client pair), and compare
   them and the revision with the snapshot (:func:`etcd_restore.verification`); differences
   are listed. Checked again
   on later passes for a few minutes while Karmada's controllers settle. Anything that could
   not be read (a failed list, no credentials, a value missing from the snapshot's metadata)
   is ``Verified=False``, reason ``Unreadable``, naming it: never a match by omission.
"""

from __future__ import annotations

import base64
import time
from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from typing import Any

from karmada_operator.backup import plan as eb_plan
from karmada_operator.backup import restore as er
from karmada_operator.backup import runner as eb_runner
from karmada_operator.backup.controller import job_ended, result_line
from karmada_operator.etcd.client_secret import ClientSecretError, client_tls, etcd_client
from karmada_operator.etcd.gateway import EtcdError
from karmada_operator.kube import conditions as k8s_conditions
from karmada_operator.kube.client import Kube, KubeConfigError, KubeError, load_kubeconfig_text
from karmada_operator.plan.plan import PlanError, build_plan
from karmada_operator.runtime.cr_pass import COMMON_ARGS, Outcome
from karmada_operator.runtime.cr_pass import run as run_cr_pass

SEEDED, VERIFIED, READY = "Seeded", "Verified", "Ready"
VERIFY_WINDOW = timedelta(minutes=5)  # differences may be Karmada's controllers still settling


_rfc3339 = eb_plan.rfc3339


class RestoreReconciler:
    def __init__(self, kube: Kube, restore: Mapping[str, Any], image: str, now: datetime | None = None,
                 pull_policy: str = "IfNotPresent", creator: Kube | None = None) -> None:
        self.kube, self.restore, self.image = kube, restore, image
        self.meta = restore.get("metadata") or {}
        self.spec = restore.get("spec") or {}
        self.status = dict(restore.get("status") or {})
        self.now = now or datetime.now(UTC)
        self.pull_policy = pull_policy
        self.creator = creator
        self.ns, self.name = self.meta.get("namespace") or "", self.meta.get("name") or ""
        self.generation = self.meta.get("generation")

    # ----- status helpers

    def _conds(self, *conds: dict[str, Any]) -> list[dict[str, Any]]:
        return k8s_conditions.merge(self.status.get("conditions"), list(conds), self.generation, _rfc3339(self.now))

    def _out(self, phase: str, *conds: dict[str, Any], **fields: Any) -> dict[str, Any]:
        out = {**self.status, **fields, "phase": phase, "observedGeneration": self.generation}
        out["conditions"] = self._conds(*conds)
        return out

    def _failed(self, reason: str, message: str, **fields: Any) -> Outcome:
        cond = {"type": SEEDED, "status": "False", "reason": reason, "message": message}
        ready = {"type": READY, "status": "False", "reason": reason, "message": message}
        return Outcome(self._out("Failed", cond, ready, **fields),
                       [{"type": "Warning", "reason": reason, "message": message}], "failed", True)

    def _event(self, reason: str, message: str) -> dict[str, str]:
        return {"type": "Normal", "reason": reason, "message": message}

    # ----- reads

    def _target(self) -> dict[str, Any] | None:
        ref = ((self.spec.get("target") or {}).get("karmadaDeploymentRef") or {}).get("name") or ""
        return self.kube.get(er.API_VERSION, "KarmadaDeployment", ref, self.ns) if ref else None

    def _jobs(self) -> list[dict[str, Any]]:
        return self.kube.list("batch/v1", "Job", self.ns, label_selector=f"{er.LABEL_RESTORE}={self.name}")

    def _ended(self, job: Mapping[str, Any]) -> str:
        return job_ended(self.kube, self.ns, job, er.CONTAINER)

    def following(self, outcome: Outcome) -> str:
        """What the pass may wait for (runtime/cr_pass.py): the target KarmadaDeployment while it
        does not exist (a restore is applied before it, as the runbook does), this restore's Jobs
        while it seeds."""
        seeded = k8s_conditions.get(outcome.status.get("conditions"), SEEDED) or {}
        if outcome.action == "waiting":
            return "target" if seeded.get("reason") == "TargetNotFound" else ""
        return "jobs" if seeded.get("status") != "True" else ""

    def follow(self, what: str, seconds: float, poll: float = 0.5) -> bool:
        """Wait in this pass, up to ``seconds``, for the target to appear (``target``: nothing in
        the runtime watches KarmadaDeployments for a restore, so without this the next look is the
        reconcile period away) or for every Job of this restore to end (the members' or the
        point's). True: it has (reconcile again now: seed, or record the seeding from the pods'
        results); False: not yet, and the next pass comes as it would without."""
        deadline = time.monotonic() + seconds
        while True:
            if what == "target":
                if self._target() is not None:
                    return True
            elif not (jobs := self._jobs()) or all(self._ended(job) for job in jobs):
                return True
            if time.monotonic() + poll > deadline:
                return False
            time.sleep(poll)

    def _job_result(self, job: Mapping[str, Any]) -> dict[str, Any] | None:
        pods = self.kube.list("v1", "Pod", self.ns, label_selector=f"job-name={job['metadata']['name']}")
        for pod in sorted(pods, key=lambda p: p["metadata"].get("creationTimestamp") or "", reverse=True):
            for cs in (pod.get("status") or {}).get("containerStatuses") or []:
                msg = ((cs.get("state") or {}).get("terminated") or {}).get("message") or ""
                if result_line(msg):
                    return result_line(msg)
            try:
                doc = result_line(self.kube.pod_log(pod["metadata"]["name"], self.ns, er.CONTAINER, tail_lines=20))
            except KubeError:
                doc = None
            if doc:
                return doc
        return None

    # ----- the pass

    def reconcile(self) -> Outcome:
        if self.meta.get("deletionTimestamp"):
            return Outcome(self.status, action="deleting")
        seeded = k8s_conditions.get(self.status.get("conditions"), SEEDED) or {}
        if self.status.get("phase") == "Failed" and self.status.get("observedGeneration") == self.generation:
            return Outcome(self.status, action="none")  # a spec change (or a new object) tries again
        if seeded.get("status") == "True":
            return self._verify()
        return self._seed()

    def _seed(self) -> Outcome:
        target = self._target()
        source_ref = ((self.spec.get("source") or {}).get("backupRef") or {}).get("name")
        backup = self.kube.get(er.API_VERSION, "EtcdBackup", source_ref, self.ns) if source_ref else None
        try:
            source = er.resolve_source(self.restore, backup)
            plan = er.restore_plan(self.restore, target, source)
        except er.RestoreError as exc:
            if exc.reason in ("TargetNotFound", "NoSnapshot", "BackupNotFound"):  # may appear: wait, do not fail
                return Outcome(self._out("Pending", {"type": SEEDED, "status": "False", "reason": exc.reason,
                                                     "message": str(exc)},
                                         {"type": READY, "status": "False", "reason": exc.reason,
                                          "message": str(exc)}), action="waiting")
            return self._failed(exc.reason, str(exc))
        all_jobs = {j["metadata"]["name"]: j for j in self._jobs()}
        if plan.get("point"):
            prepared = self.status.get("point") or {}
            if prepared.get("observedGeneration") != self.generation:
                job = all_jobs.get(plan["pointJob"])
                if prepared and job is not None:  # prepared for the spec before a change: made again
                    self.kube.delete("batch/v1", "Job", plan["pointJob"], self.ns)
                    self.status.pop("point", None)
                    return Outcome(self._out("Pending", {"type": SEEDED, "status": "False", "reason": "PreparingPoint",
                                                         "message": "the spec changed: preparing the point again"}),
                                   action="wait", changed=True)
                return self._prepare(plan, job, target)
            plan = er.with_prepared(plan, prepared)
        jobs = {n: j for n, j in all_jobs.items() if n != plan.get("pointJob")}
        if not jobs:
            return self._start(plan)
        results, running = [], []
        for member in plan["members"]:
            job = jobs.get(member["job"])
            done = self._ended(job) if job else "Missing"
            if not done:
                running.append(member["name"])
                continue
            doc = self._job_result(job) if job else None
            if not doc or not doc.get("ok"):
                reason = (doc or {}).get("reason") or "RestoreJobFailed"
                message = (doc or {}).get("message") or (
                    f"the restore Job of {member['name']} ended {done} without a result; see "
                    f"kubectl logs -n {self.ns} job/{member['job']}")
                self._remove_volumes(plan)
                self._tell_target(target, reason)
                return self._failed(reason, f"{member['name']}: {message}")
            results.append(doc)
        if running:
            msg = f"restoring {plan['snapshot']['name']} into {', '.join(running)}"
            return Outcome(self._out("Running", {"type": SEEDED, "status": "False", "reason": "Restoring",
                                                 "message": msg},
                                     {"type": READY, "status": "False", "reason": "Restoring", "message": msg}),
                           action="running")
        return self._seeded(plan, target or {}, results)

    def _prepare(self, plan: Mapping[str, Any], job: Mapping[str, Any] | None,
                 target: Mapping[str, Any] | None) -> Outcome:
        """A restore to a point: its first Job makes the point one snapshot (point_restore);
        recorded in status.point, the members are then seeded from it like from any snapshot."""
        asked = plan["point"]["asked"]
        if job is None:
            refused = self._refused(plan)
            if refused is not None:
                return refused
            try:
                (self.creator or self.kube).create(er.point_job_manifest(
                    er.with_users(self.kube, plan), self.image, None if self.creator else self.restore,
                    self.pull_policy))
            except KubeError as exc:
                if exc.status != 409:
                    raise
            msg = f"replaying the continuous backup up to {asked} into one snapshot ({plan['snapshot']['name']})"
            return Outcome(self._out("Running", {"type": SEEDED, "status": "False", "reason": "PreparingPoint",
                                                 "message": msg},
                                     {"type": READY, "status": "False", "reason": "PreparingPoint", "message": msg}),
                           [self._event("RestoreStarted", msg)], "started", True)
        done = self._ended(job)
        if not done:
            msg = f"replaying the continuous backup up to {asked}"
            return Outcome(self._out("Running", {"type": SEEDED, "status": "False", "reason": "PreparingPoint",
                                                 "message": msg},
                                     {"type": READY, "status": "False", "reason": "PreparingPoint", "message": msg}),
                           action="running")
        doc = self._job_result(job)
        if not doc or not doc.get("ok"):
            reason = (doc or {}).get("reason") or "RestoreJobFailed"
            message = (doc or {}).get("message") or (
                f"the Job {plan['pointJob']} ended {done} without a result; see kubectl logs -n {self.ns} "
                f"job/{plan['pointJob']}")
            self._tell_target(target, reason)
            return self._failed(reason, f"preparing {asked}: {message}")
        point = {"observedGeneration": self.generation, "full": doc["full"], "revision": int(doc["pointRevision"]),
                 "time": _rfc3339(datetime.fromtimestamp(int(doc["pointTimeMs"]) / 1000, UTC)),
                 "revisionsReplayed": int((doc.get("replayed") or {}).get("revisions", 0)),
                 "snapshot": {k: doc["snapshot"][k] for k in ("name", "sha256", "location", "revision")
                              if k in doc["snapshot"]}}
        self.status["point"] = point
        event = self._event("PointPrepared", f"full snapshot {point['full']} and {point['revisionsReplayed']} "
                            f"revisions after it, up to revision {point['revision']} (received {point['time']}), "
                            f"are snapshot {point['snapshot']['name']}")
        outcome = self._start(er.with_prepared(plan, point))
        outcome.events.insert(0, event)
        return outcome

    def _refused(self, plan: Mapping[str, Any]) -> Outcome | None:
        """Why nothing may be seeded into the target, if anything: it has an etcd, or a member
        volume this restore did not make; no image for the Jobs."""
        tgt = plan["target"]
        if self.kube.get("apps/v1", "StatefulSet", tgt["statefulSet"], self.ns) is not None:
            return self._failed("TargetHasData", f"KarmadaDeployment {tgt['name']} already has an etcd (StatefulSet "
                                f"{tgt['statefulSet']}): a restore only seeds a new one; restore into a new "
                                "KarmadaDeployment")
        for member in plan["members"]:
            pvc = self.kube.get("v1", "PersistentVolumeClaim", member["pvc"], self.ns)
            if pvc is not None and (pvc["metadata"].get("labels") or {}).get(er.LABEL_RESTORE) != self.name:
                return self._failed("TargetHasData", f"volume {member['pvc']} of {member['name']} exists and was not "
                                    "made by this restore: it may hold etcd data; delete it or restore into a new "
                                    "KarmadaDeployment")
        if not self.image:
            return self._failed("NoJobImage", "the operator does not know its image for the restore Jobs: set "
                                              "KARMADA_OPERATOR_IMAGE in its Deployment")
        return None

    def _start(self, plan: Mapping[str, Any]) -> Outcome:
        refused = self._refused(plan)
        if refused is not None:
            return refused
        problem = self._seed_pki(plan)
        if problem:
            return self._failed(*problem)
        plan = er.with_users(self.kube, plan)
        for member in plan["members"]:
            self._create_unowned(er.pvc_manifest(plan, member))
            job = er.job_manifest(plan, member, self.image, None if self.creator else self.restore, self.pull_policy)
            try:
                (self.creator or self.kube).create(job)
            except KubeError as exc:
                if exc.status != 409:
                    raise
        msg = (f"restoring {plan['snapshot']['name']} into {len(plan['members'])} member(s) of "
               f"{plan['target']['name']}")
        return Outcome(self._out("Running", {"type": SEEDED, "status": "False", "reason": "Restoring", "message": msg},
                                 {"type": READY, "status": "False", "reason": "Restoring", "message": msg},
                                 restoredFrom=plan["snapshot"]["location"] or plan["snapshot"]["name"]),
                       [self._event("RestoreStarted", msg)], "started", True)

    def _seed_pki(self, plan: Mapping[str, Any]) -> tuple[str, str] | None:
        """Put the source's CA and service-account key pair into the target's PKI Secret, so
        what the source issued (Pull agents' certificates, service-account tokens) stays valid,
        and its encryption configuration when the Secret has it, so the restored Secrets can be
        read."""
        ref = ((self.spec.get("pki") or {}).get("secretRef") or {}).get("name")
        if not ref:
            return None
        secret = self.kube.get("v1", "Secret", ref, self.ns)
        if secret is None:
            return "PKISecretNotFound", f"spec.pki.secretRef: Secret {self.ns}/{ref} not found"
        data = secret.get("data") or {}
        missing = [k for k in er.PKI_KEYS if k not in data]
        if missing:
            return "InvalidPKISecret", f"spec.pki.secretRef: Secret {ref} lacks {', '.join(missing)}"
        name = plan["target"]["pkiSecret"]
        existing = self.kube.get("v1", "Secret", name, self.ns)
        if existing is not None:
            if (existing.get("data") or {}).get("ca.crt") == data["ca.crt"]:
                self._disown("v1", "Secret", existing)  # made by an earlier pass
                return None
            return "TargetHasCertificates", (f"Secret {name} already holds another CA: the KarmadaDeployment ran "
                                             "before this restore; restore into a new KarmadaDeployment")
        self._create_unowned({"apiVersion": "v1", "kind": "Secret", "type": "Opaque",
                              "metadata": {"name": name, "namespace": self.ns, "labels": plan["target"]["labels"]},
                              "data": {k: data[k] for k in (*er.PKI_KEYS, *er.PKI_OPTIONAL_KEYS) if k in data}})
        return None

    def _create_unowned(self, obj: dict[str, Any]) -> None:
        """Create what the restored Karmada keeps (its etcd volumes, its CA): never owned by this
        EtcdRestore. ansible-operator's proxy gives every object a run creates an ownerReference
        to the CR being reconciled, so deleting a finished EtcdRestore would garbage-collect the
        restored etcd's volumes; the reference is taken off again (on each pass, idempotent)."""
        meta = obj["metadata"]
        try:
            created = self.kube.create(obj)
        except KubeError as exc:
            if exc.status != 409:
                raise
            created = self.kube.get(obj["apiVersion"], obj["kind"], meta["name"], self.ns) or {}
        self._disown(obj["apiVersion"], obj["kind"], created)

    def _disown(self, api_version: str, kind: str, obj: Mapping[str, Any]) -> None:
        """Take an EtcdRestore's ownerReference off ``obj`` (as read from the API), if it has one."""
        meta = obj.get("metadata") or {}
        owners = meta.get("ownerReferences") or []
        if meta.get("name") and any(o.get("kind") == er.KIND for o in owners):
            keep = [o for o in owners if o.get("kind") != er.KIND]
            self.kube.merge_patch(api_version, kind, meta["name"], {"metadata": {"ownerReferences": keep or None}},
                                  self.ns)

    def _remove_volumes(self, plan: Mapping[str, Any]) -> None:
        """After a failure: the member Jobs (their pods hold the volumes: a claim in use is not
        deleted; the reason is in status and in an Event), then the volumes this restore made."""
        for member in plan["members"]:
            self.kube.delete("batch/v1", "Job", member["job"], self.ns)
        for member in plan["members"]:
            pvc = self.kube.get("v1", "PersistentVolumeClaim", member["pvc"], self.ns)
            if pvc is not None and (pvc["metadata"].get("labels") or {}).get(er.LABEL_RESTORE) == self.name:
                self.kube.delete("v1", "PersistentVolumeClaim", member["pvc"], self.ns)

    def _tell_target(self, target: Mapping[str, Any] | None, reason: str) -> None:
        """Start the reconcile of a KarmadaDeployment that waits for this restore, now failed, so its
        status says so (it mirrors the restore's state when it runs)."""
        conds = ((target or {}).get("status") or {}).get("conditions") or []
        if target is None or any(c.get("type") == "EtcdReady" for c in conds):
            return  # not waiting for us
        self.kube.merge_patch(er.API_VERSION, "KarmadaDeployment", target["metadata"]["name"],
                              {"metadata": {"annotations": {er.ANN_FAILED: f"{self.name}@{_rfc3339(self.now)}: "
                                                                          f"{reason}"}}}, self.ns)

    def _seeded(self, plan: Mapping[str, Any], target: Mapping[str, Any], results: list[dict[str, Any]]) -> Outcome:
        first = results[0]
        snap = first["snapshot"]
        # A value a Job did not report stays unknown (None; the verification fails on it), never 0.
        revs = [r["restored"].get("revision") for r in results]
        restored_rev = max((int(v) for v in revs if v is not None), default=None)
        msg = (f"{len(results)} member(s) of {plan['target']['name']} restored from {snap['name']} (sha256 "
               f"{snap['sha256']}, revision {snap['revision']} -> {restored_rev})")
        # Start the KarmadaDeployment's reconcile: it waited for this (watchAnnotationsChanges).
        self.kube.merge_patch(er.API_VERSION, "KarmadaDeployment", plan["target"]["name"],
                              {"metadata": {"annotations": {er.ANN_SEEDED: f"{self.name}@{_rfc3339(self.now)}"}}},
                              self.ns)
        out = self._out("Running", {"type": SEEDED, "status": "True", "reason": "Restored", "message": msg},
                        {"type": READY, "status": "False", "reason": "WaitingForKarmada",
                         "message": f"waiting for KarmadaDeployment {plan['target']['name']} to be Ready"},
                        restoredFrom=snap.get("location") or snap["name"], restoredRevision=restored_rev,
                        snapshot={k: snap[k] for k in ("name", "sha256", "sizeBytes", "revision") if k in snap},
                        seededAt=_rfc3339(self.now),
                        seededMembers=[{"member": r["member"], "restoredRevision": r["restored"]["revision"]}
                                       for r in results])
        # What the check needs later, kept in status (the Jobs go away after a day).
        out["expected"] = {"revision": int(snap["revision"]), "keys": snap.get("keys"),
                           "counts": snap.get("counts") or {}, "bumpRevision": plan["bumpRevision"]}
        return Outcome(out, [self._event("Seeded", msg)], "seeded", True)

    def _verify(self) -> Outcome:
        target = self._target()
        name = ((self.spec.get("target") or {}).get("karmadaDeploymentRef") or {}).get("name")
        if target is None:
            return Outcome(self._out("Failed", {"type": READY, "status": "False", "reason": "TargetNotFound",
                                                "message": f"KarmadaDeployment {name} was deleted"}), action="failed")
        tstatus = target.get("status") or {}
        ready = k8s_conditions.get(tstatus.get("conditions"), "Ready") or {}
        if ready.get("status") != "True" or ready.get("observedGeneration") != target["metadata"].get("generation"):
            return Outcome(self._out("Running", {"type": READY, "status": "False", "reason": "WaitingForKarmada",
                                                 "message": f"waiting for KarmadaDeployment {name} to be Ready"}),
                           action="wait")
        verified = k8s_conditions.get(self.status.get("conditions"), VERIFIED) or {}
        if verified.get("status") == "True":
            return Outcome(self.status, action="none")
        counts, unread = self._count(target)
        expected = self.status.get("expected") or {}
        members = self.status.get("seededMembers") or []
        live, keys_unread = self._live_keys(target, members)
        seeded = [{"member": m.get("member"), "restored": {"revision": m.get("restoredRevision"),
                                                          "liveKeys": live.get(m.get("member") or "")}}
                  for m in members]
        report = er.verification({"revision": expected.get("revision"), "keys": expected.get("keys"),
                                  "counts": expected.get("counts")}, seeded, counts,
                                 int(expected.get("bumpRevision") or 0), unread, keys_unread)
        unreadable = report.pop("unreadable")
        diffs = report["differences"]
        seeded_at = eb_plan.parse_rfc3339(self.status.get("seededAt")) or self.now
        final = not diffs or self.now - seeded_at > VERIFY_WINDOW
        summary = ", ".join(f"{o['resource']} {o.get('restored')}" for o in report["objects"])
        if unreadable:
            # Not verified, whatever else matched: a list that failed proves nothing. False at
            # once (read again on the next passes of the window: an API server may be starting).
            cond = {"type": VERIFIED, "status": "False", "reason": "Unreadable", "message": "; ".join(diffs)}
        elif diffs:
            cond = {"type": VERIFIED, "status": "False" if final else "Unknown", "reason": "Differences",
                    "message": "; ".join(diffs)}
        else:
            cond = {"type": VERIFIED, "status": "True", "reason": "Matches",
                    "message": f"revision {report['restoredRevision']}, keys {report['restoredKeys']}; {summary}"}
        ready_cond = {"type": READY, "status": "True", "reason": "Restored",
                      "message": f"KarmadaDeployment {name} runs on the restored etcd"}
        phase = "Succeeded" if final else "Running"
        out = self._out(phase, cond, ready_cond, verification=report)
        if report.get("restoredKeys") is not None:
            out["keys"] = report["restoredKeys"]
        if not final:
            events = []
        elif unreadable:
            events = [{"type": "Warning", "reason": "VerificationUnreadable", "message": cond["message"]}]
        else:
            events = [self._event("Verified" if not diffs else "VerificationDifferences", cond["message"])]
        return Outcome(out, events, "verified" if final else "verifying", True)

    def _live_keys(self, target: Mapping[str, Any], members: list[Mapping[str, Any]]) -> tuple[dict[str, int], str]:
        """Each restored member's live keys at the revision it was restored to, read from its etcd
        (a count-only range over every key, with the operator's etcd client pair); or why they
        could not be read. At that revision the store holds exactly what the snapshot did (the
        restore marked it compacted there, nothing older is readable and karmada-apiserver's
        first compaction comes minutes later)."""
        try:
            etcd = build_plan(dict(target))["etcd"]
        except PlanError as exc:
            return {}, f"the KarmadaDeployment's plan: {exc}"
        if etcd["mode"] != "local":
            return {}, "the KarmadaDeployment's etcd is not local"
        endpoints = dict(zip(etcd["members"], etcd["memberEndpoints"], strict=True))
        live: dict[str, int] = {}
        try:
            with etcd_client(self.kube, etcd, timeout=10.0, prefix="etcd-restore-verify-",
                             tls=client_tls(self.kube, etcd)) as client:
                for member in members:
                    name, revision = member.get("member") or "", member.get("restoredRevision")
                    if name in endpoints and revision is not None:
                        live[name] = int(client.range(b"\0", b"\0", revision=int(revision), count_only=True,
                                                      endpoint=endpoints[name])["count"])
        except (ClientSecretError, EtcdError, KubeError, ValueError, OSError) as exc:
            return live, str(exc)
        return live, ""

    def _count(self, target: Mapping[str, Any]) -> tuple[dict[str, int], dict[str, str]]:
        """Objects per Karmada resource through the restored karmada-apiserver (its Service's
        ClusterIP, as the KarmadaDeployment role dials it; the certificate's DNS name for TLS),
        and, for each resource that could not be counted, why (the verification fails on it)."""
        tname = target["metadata"]["name"]
        secret_name = (target.get("status") or {}).get("adminKubeconfigSecret") or f"{tname}-admin-kubeconfig"

        def none_counted(why: str) -> tuple[dict[str, int], dict[str, str]]:
            return {}, dict.fromkeys(eb_runner.KARMADA_RESOURCES, why)

        secret = self.kube.get("v1", "Secret", secret_name, self.ns)
        if secret is None:
            return none_counted(f"Secret {self.ns}/{secret_name} (its admin kubeconfig) not found")
        svc = self.kube.get("v1", "Service", f"{tname}-apiserver", self.ns)
        if svc is None:
            return none_counted(f"Service {self.ns}/{tname}-apiserver not found")
        try:
            conf = load_kubeconfig_text(base64.b64decode((secret.get("data") or {})["kubeconfig"]).decode())
            port = (svc["spec"].get("ports") or [{}])[0].get("port", 5443)
            karmada = Kube.from_kubeconfig(conf, server=f"https://{svc['spec']['clusterIP']}:{port}",
                                           tls_server_name=f"{svc['metadata']['name']}.{self.ns}.svc.cluster.local",
                                           where=f"Secret {secret_name}")
        except (KubeConfigError, KeyError, TypeError, ValueError) as exc:  # binascii, Unicode errors are ValueErrors
            detail = f"no key {exc}" if isinstance(exc, KeyError) else str(exc)
            return none_counted(f"Secret {self.ns}/{secret_name} holds no usable kubeconfig ({detail})")
        with karmada:
            return count_objects(karmada)


def count_objects(karmada: Kube) -> tuple[dict[str, int], dict[str, str]]:
    """``len(list)`` of each Karmada resource (etcd_backup.KARMADA_RESOURCES) through ``karmada``;
    a list that fails (unreachable, an error status, a kind the server does not serve) is not a
    count: its resource goes into the second dict with the error instead."""
    counts: dict[str, int] = {}
    unread: dict[str, str] = {}
    for resource, (api_version, kind, _) in eb_runner.KARMADA_RESOURCES.items():
        try:
            counts[resource] = len(karmada.list(api_version, kind))
        except KubeError as exc:
            code = f"{exc.status} " if exc.status else ""
            unread[resource] = f"listing {kind} ({api_version}) failed: {code}{exc.reason}: {exc.message}"
    return counts, unread


# --------------------------------------------------------------------------- the etcd_restore task
# plugins/modules/etcd_restore.py documents the options; plugins/action/etcd_restore.py runs it in the
# controller process (karmada_operator/runtime/adapter.py).

ARGUMENT_SPEC: dict[str, Any] = {**COMMON_ARGS, "follow_seconds": {"type": "int", "default": 60}}


def run_pass(p: Mapping[str, Any], check_mode: bool = False, warn: Any = None) -> dict[str, Any]:
    """One pass over the EtcdRestore the task names (cr_pass.run)."""
    return run_cr_pass(p, "EtcdRestore", RestoreReconciler)
