"""The EtcdRestore pass's verification step: what it could not read fails it, named.

The host cluster is a stand-in (``Host``: the objects a pass reads, no writes happen in this
step); the restored karmada-apiserver is reached by the real client (``karmada_kube.Kube``),
pointed at a loopback port nothing listens on, so its lists fail the way they fail on a plane
that is down.
"""

from __future__ import annotations

import base64
import socket
from datetime import UTC, datetime, timedelta

import test_etcd_restore
import yaml

from karmada_operator.backup import restore_controller as ctl
from karmada_operator.backup import runner as eb_runner
from karmada_operator.kube.client import KubeError

NOW = datetime(2026, 3, 10, 12, 0, 0, tzinfo=UTC)
NS = "site-b"
COUNTS = {"clusters": 2, "propagationpolicies": 3, "clusterpropagationpolicies": 1, "overridepolicies": 0,
          "resourcebindings": 8, "works": 10, "namespaces": 6}


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]  # closed again when the block ends: nothing listens there


class Host:
    """The host cluster's objects a verification pass reads, by (kind, name)."""

    def __init__(self, *objects: dict):
        self.objects = {(o["kind"], o["metadata"]["name"]): o for o in objects}

    def get(self, api_version: str, kind: str, name: str, namespace: str | None = None) -> dict | None:
        return self.objects.get((kind, name))


def target() -> dict:
    return {"apiVersion": "operator.karmada.io/v1alpha1", "kind": "KarmadaDeployment",
            "metadata": {"name": "dc2", "namespace": NS, "generation": 3},
            "status": {"adminKubeconfigSecret": "dc2-admin-kubeconfig",
                       "conditions": [{"type": "Ready", "status": "True", "observedGeneration": 3}]}}


def admin_secret() -> dict:
    conf = {"apiVersion": "v1", "kind": "Config",
            "clusters": [{"name": "karmada", "cluster": {"server": "https://unused:5443",
                                                         "insecure-skip-tls-verify": True}}],
            "users": [{"name": "admin", "user": {"token": "t0k3n"}}],
            "contexts": [{"name": "karmada", "context": {"cluster": "karmada", "user": "admin"}}],
            "current-context": "karmada"}
    return {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "dc2-admin-kubeconfig", "namespace": NS},
            "data": {"kubeconfig": base64.b64encode(yaml.safe_dump(conf).encode()).decode()}}


def apiserver_service(port: int) -> dict:
    return {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "dc2-apiserver", "namespace": NS},
            "spec": {"clusterIP": "127.0.0.1", "ports": [{"port": port}]}}


def seeded_restore(seeded_at: datetime = NOW) -> dict:
    return {"apiVersion": "operator.karmada.io/v1alpha1", "kind": "EtcdRestore",
            "metadata": {"name": "move", "namespace": NS, "generation": 1},
            "spec": {"target": {"karmadaDeploymentRef": {"name": "dc2"}}},
            "status": {"phase": "Running", "observedGeneration": 1,
                       "conditions": [{"type": "Seeded", "status": "True", "reason": "Restored", "message": "x",
                                       "lastTransitionTime": "2026-03-10T11:59:00Z"}],
                       "seededAt": seeded_at.strftime("%Y-%m-%dT%H:%M:%SZ"),
                       "seededMembers": [{"member": "dc2-etcd-0", "restoredRevision": 1_000_000_900}],
                       "expected": {"revision": 900, "keys": 500, "bumpRevision": 1_000_000_000,
                                    "counts": COUNTS}}}


def verified(outcome) -> dict:
    return next(c for c in outcome.status["conditions"] if c["type"] == "Verified")


def test_a_restored_karmada_apiserver_that_cannot_be_listed_is_not_verified():
    """Every list fails (nothing listens): Verified False, reason Unreadable, each resource and
    the error named. (Before, the failed lists were skipped and the pass said Matches.)"""
    host = Host(target(), admin_secret(), apiserver_service(closed_port()))
    outcome = ctl.RestoreReconciler(host, seeded_restore(), image="unused", now=NOW).reconcile()
    cond = verified(outcome)
    assert (cond["status"], cond["reason"]) == ("False", "Unreadable"), cond
    for resource in eb_runner.KARMADA_RESOURCES:
        assert resource in cond["message"]
    assert "cannot reach the Kubernetes API at https://127.0.0.1:" in cond["message"]
    report = outcome.status["verification"]
    assert report["differences"] and all(d.startswith("could not read ") for d in report["differences"])
    assert "unreadable" not in report  # the condition carries it; status has no such field
    assert outcome.status["phase"] == "Running" and outcome.events == []  # read again while the window lasts
    # After the window: final, still not verified, and said in a Warning.
    late = ctl.RestoreReconciler(host, seeded_restore(NOW - timedelta(minutes=6)), image="unused",
                                 now=NOW).reconcile()
    assert (verified(late)["status"], verified(late)["reason"]) == ("False", "Unreadable")
    assert late.status["phase"] == "Succeeded"
    assert [(e["type"], e["reason"]) for e in late.events] == [("Warning", "VerificationUnreadable")]


def test_a_missing_admin_kubeconfig_is_not_verified_and_is_named():
    host = Host(target(), apiserver_service(closed_port()))
    cond = verified(ctl.RestoreReconciler(host, seeded_restore(), image="unused", now=NOW).reconcile())
    assert (cond["status"], cond["reason"]) == ("False", "Unreadable")
    assert f"Secret {NS}/dc2-admin-kubeconfig (its admin kubeconfig) not found" in cond["message"]
    broken = admin_secret()
    broken["data"] = {"config": broken["data"]["kubeconfig"]}  # the wrong key
    host = Host(target(), broken, apiserver_service(closed_port()))
    cond = verified(ctl.RestoreReconciler(host, seeded_restore(), image="unused", now=NOW).reconcile())
    assert cond["reason"] == "Unreadable" and "holds no usable kubeconfig (no key 'kubeconfig')" in cond["message"]


class Karmada:
    """A karmada-apiserver that serves some kinds and fails others with the given error."""

    def __init__(self, items: dict[str, int], errors: dict[str, KubeError]):
        self.items, self.errors = items, errors

    def list(self, api_version: str, kind: str) -> list[dict]:
        if kind in self.errors:
            raise self.errors[kind]
        return [{}] * self.items[kind]


def test_each_failed_list_is_reported_with_its_error_not_counted():
    kinds = {resource: kind for resource, (_, kind, _) in eb_runner.KARMADA_RESOURCES.items()}
    errors = {"Cluster": KubeError(503, "ServiceUnavailable", "the server is currently unable to handle the request"),
              "OverridePolicy": KubeError(404, "NotFound", "https://k does not serve OverridePolicy "
                                                          "(policy.karmada.io/v1alpha1)")}
    counts, unread = ctl.count_objects(Karmada({kinds[r]: n for r, n in COUNTS.items()}, errors))
    assert counts == {r: n for r, n in COUNTS.items() if r not in ("clusters", "overridepolicies")}
    assert unread == {
        "clusters": "listing Cluster (cluster.karmada.io/v1alpha1) failed: 503 ServiceUnavailable: the server is "
                    "currently unable to handle the request",
        "overridepolicies": "listing OverridePolicy (policy.karmada.io/v1alpha1) failed: 404 NotFound: "
                            "https://k does not serve OverridePolicy (policy.karmada.io/v1alpha1)"}


class Counted(ctl.RestoreReconciler):
    """The pass with the restored plane's counts given (the lists are what the tests above cover)."""

    counted: tuple[dict[str, int], dict[str, str]] = ({}, {})
    live: tuple[dict[str, int], str] = ({"dc2-etcd-0": 500}, "")

    def _count(self, target):
        return self.counted

    def _live_keys(self, target, members):
        return self.live


def test_only_a_complete_and_equal_reading_is_verified():
    host = Host(target())
    whole = Counted(host, seeded_restore(), image="unused", now=NOW)
    whole.counted = (dict(COUNTS), {})
    cond = verified(whole.reconcile())
    assert (cond["status"], cond["reason"]) == ("True", "Matches")
    partial = Counted(host, seeded_restore(), image="unused", now=NOW)
    partial.counted = ({k: v for k, v in COUNTS.items() if k != "works"},
                       {"works": "listing Work (work.karmada.io/v1alpha1) failed: 0 Unreachable: down"})
    cond = verified(partial.reconcile())
    assert (cond["status"], cond["reason"]) == ("False", "Unreadable")
    assert cond["message"] == ("could not read works through the restored karmada-apiserver: listing Work "
                               "(work.karmada.io/v1alpha1) failed: 0 Unreachable: down")


def test_the_keys_are_read_from_the_restored_etcd_and_compared():
    """The live keys each restored member's etcd holds at the restored revision must equal the
    backup's count at the snapshot's; status.keys is what etcd said; an etcd that could not be
    read is named, never taken as equal."""
    host = Host(target())
    whole = Counted(host, seeded_restore(), image="unused", now=NOW)
    whole.counted = (dict(COUNTS), {})
    outcome = whole.reconcile()
    assert verified(outcome)["status"] == "True" and outcome.status["keys"] == 500
    assert outcome.status["verification"]["restoredKeys"] == 500
    short = Counted(host, seeded_restore(), image="unused", now=NOW)
    short.counted, short.live = (dict(COUNTS), {}), ({"dc2-etcd-0": 499}, "")
    cond = verified(short.reconcile())
    assert (cond["status"], cond["reason"]) == ("Unknown", "Differences")  # re-read while the window lasts
    assert cond["message"] == ("dc2-etcd-0 holds 499 live keys at the restored revision, the snapshot 500 at its "
                               "revision")
    gone = Counted(host, seeded_restore(), image="unused", now=NOW)
    gone.counted = (dict(COUNTS), {})
    gone.live = ({}, "etcd refused the request: required revision has been compacted")
    cond = verified(gone.reconcile())
    assert (cond["status"], cond["reason"]) == ("False", "Unreadable")
    assert cond["message"] == ("could not read dc2-etcd-0's live keys at the restored revision (from its etcd: etcd "
                               "refused the request: required revision has been compacted)")


def test_without_the_etcd_client_secret_the_keys_are_unreadable_and_say_why():
    """The real read: no etcd client Secret in the namespace, so the keys could not be read, and
    the verification says which Secret is missing."""
    host = Host(target())
    live, why = ctl.RestoreReconciler(host, seeded_restore(), image="unused", now=NOW)._live_keys(
        target(), [{"member": "dc2-etcd-0", "restoredRevision": 1_000_000_900}])
    assert live == {} and "Secret dc2-etcd-pki must exist" in why, why


class Cluster:
    """Jobs and their pods, listed by label as the reconciler reads them."""

    def __init__(self):
        self.jobs, self.pods = {}, {}

    def add(self, name: str, state: dict | None = None, condition: str = ""):
        self.jobs[name] = {"metadata": {"name": name, "labels": {"operator.karmada.io/etcd-restore": "r"}},
                           "status": {"conditions": [{"type": condition, "status": "True"}] if condition else []}}
        self.pods[name] = {"metadata": {"name": f"{name}-pod", "labels": {"job-name": name}},
                           "status": {"containerStatuses": [{"name": "restore", "state": state or {"running": {}}}]}}

    def list(self, api_version: str, kind: str, namespace: str | None = None, label_selector: str = "") -> list:
        key, _, value = label_selector.partition("=")
        items = self.jobs.values() if kind == "Job" else self.pods.values()
        return [o for o in items if o["metadata"]["labels"].get(key) == value]


def test_a_jobs_end_is_read_from_its_pod_and_the_pass_waits_for_all_of_them():
    """The seeding is recorded from the pods' ends, before the Job controller's conditions, and
    the pass (runtime/cr_pass.py ``follow``) waits in place until every Job has ended."""
    cluster = Cluster()
    restore = {"metadata": {"name": "r", "namespace": NS, "generation": 1}, "spec": {}, "status": {}}
    rec = ctl.RestoreReconciler(cluster, restore, "img", now=NOW)
    cluster.add("r-0", {"terminated": {"exitCode": 0}})
    cluster.add("r-1")
    cluster.add("r-2", condition="Complete")
    assert [rec._ended(cluster.jobs[n]) for n in ("r-0", "r-1", "r-2")] == ["Complete", "", "Complete"]
    assert rec.following(ctl.Outcome({"conditions": []}, action="started")) == "jobs"
    assert rec.follow("jobs", 0.3, poll=0.1) is False  # r-1 still runs
    cluster.add("r-1", {"terminated": {"exitCode": 1}})
    assert rec._ended(cluster.jobs["r-1"]) == "Failed"
    assert rec.follow("jobs", 5, poll=0.1) is True
    seeded = ctl.Outcome({"conditions": [{"type": "Seeded", "status": "True"}]}, action="seeded")
    assert rec.following(seeded) == ""


class Appearing:
    """A host where the target KarmadaDeployment appears on the third look."""

    def __init__(self):
        self.looks = 0

    def get(self, api_version, kind, name, namespace=None):
        if kind == "KarmadaDeployment":
            self.looks += 1
            return target() if self.looks >= 3 else None
        return test_etcd_restore.backup(test_etcd_restore.SNAPS) if kind == "EtcdBackup" else None


def test_a_restore_applied_before_its_target_waits_for_it_in_the_pass():
    """Applied first (the runbook's order), the restore is Pending (TargetNotFound) and the pass
    waits in place for the KarmadaDeployment to appear (runtime/cr_pass.py follows it), instead
    of the reconcile period (nothing watches KarmadaDeployments for a restore)."""
    host = Appearing()
    rec = ctl.RestoreReconciler(host, test_etcd_restore.restore(), image="unused", now=NOW)
    outcome = rec.reconcile()
    assert outcome.action == "waiting" and outcome.status["phase"] == "Pending"
    assert rec.following(outcome) == "target"
    assert rec.follow("target", 5, poll=0.01) is True and host.looks == 3
    # the other waits are left to the reconcile period (a backup that does not exist yet)
    no_backup = type(outcome)({"conditions": [{"type": "Seeded", "status": "False", "reason": "BackupNotFound"}]},
                              action="waiting")
    assert rec.following(no_backup) == ""
