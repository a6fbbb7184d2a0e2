"""Issue 14: upgrades roll one component at a time, in the registry's order, gated, stopping on
failure, on the real host cluster with the real ansible-operator and real Karmada images of two
releases (KARMADA_PREVIOUS_VERSION and KARMADA_VERSION, both built by the test bed).

One Karmada (``upgrade`` in karmada-system, 1 etcd member, 2 karmada-apiserver replicas) starts
at the previous release with member1 and member2 (Push) joined and bookinfo on both, and an
EtcdBackup ``nightly`` (suspended schedule) names a volume store for it, so every version change
first takes a backup there. The tests run in file order on it:

0. a jump of two minor versions is refused (UnsupportedUpgrade) and no pod changes;
1. a full upgrade to the current release: every component ends on it (read from the running
   pods), the rollouts happened in the registry's order (ComponentRolledOut Events),
   karmada-apiserver's /readyz, polled every second through the upgrade, never failed, no
   member workload was recreated, a PropagationPolicy made afterwards propagates, and the
   pre-upgrade backup succeeded before the first component rolled;
2. a change of the scheduler's tag only replaces the scheduler's pods (every other control-plane
   pod keeps its UID);
3. setting the previous version back rolls back in reverse order (webhook first, the aggregated
   apiserver last), after its own backup;
4. an upgrade whose karmada-controller-manager image does not exist stops at it: Ready False
   naming it and the image pull, the components after it (scheduler, webhook) untouched, the
   plane serving; correcting the image completes the upgrade;
5. ``spec.upgrade.strategy: Components`` listing the scheduler moves the scheduler alone;
6. Karmada's own e2e suite (hack/karmada-e2e/groups-upgrade.txt) passes on the upgraded Karmada.
"""

from __future__ import annotations

import contextlib
import json
import time
from pathlib import Path

import pytest
import yaml
from karmada_observed import image_tag

from support import karmada_e2e, karmada_suite
from support.karmada_crds_server import karmada_version, serve
from support.karmada_e2e import Deployment, bookinfo, bookinfo_running, operator_kubeconfig
from support.operator_runtime import OperatorProcess
from support.readyz import ReadyzPoller
from support.testenv import HACK, HostCluster, MemberCluster
from support.waiting import condition, crds_established

pytestmark = [pytest.mark.e2e, pytest.mark.extended, pytest.mark.timeout(5400)]

NS = "karmada-system"
NAME = "upgrade"
MEMBERS = ("member1", "member2")
KUBE_COMPONENTS = ("karmada-apiserver", "kube-controller-manager")  # follow kubernetesVersion
# The registry's order of the Karmada components a version change moves (the sample's set).
ORDER = ("karmada-aggregated-apiserver", "karmada-controller-manager", "karmada-scheduler", "karmada-webhook")
BACKUP_PVC = "upgrade-backups"


def previous_version() -> str:
    for line in (HACK.parent / "versions.env").read_text().splitlines():
        if line.startswith("KARMADA_PREVIOUS_VERSION="):
            return line.split("=", 1)[1].strip()
    raise RuntimeError("KARMADA_PREVIOUS_VERSION missing from hack/versions.env")


OLD, NEW = previous_version(), karmada_version()


def control_plane_pods(fleet: Deployment) -> dict[str, dict[str, str]]:
    """component -> {pod uid: image of its main container as the runtime runs it}, pods not being
    deleted and not run by a Job."""
    pods = fleet.host.get("pods", "-n", NS, "-l", f"app.kubernetes.io/instance={NAME}")["items"]
    out: dict[str, dict[str, str]] = {}
    for pod in pods:
        if pod["metadata"].get("deletionTimestamp"):
            continue
        if any(ref.get("kind") == "Job" for ref in pod["metadata"].get("ownerReferences") or []):
            continue  # a backup Job's pod (each version change backs up first), not the control plane
        app = pod["metadata"]["labels"].get("app.kubernetes.io/name", "?")
        statuses = pod.get("status", {}).get("containerStatuses") or [{}]
        out.setdefault(app, {})[pod["metadata"]["uid"]] = statuses[0].get("image", "")
    return out


def uids(pods: dict[str, dict[str, str]], *skip: str) -> dict[str, set[str]]:
    return {app: set(by_uid) for app, by_uid in pods.items() if app not in skip}


def ready_at_generation(fleet: Deployment) -> bool:
    obj = fleet.get()
    ready = condition(obj, "Ready")
    return ready.get("status") == "True" and ready.get("observedGeneration") == obj["metadata"]["generation"]


def status_versions(fleet: Deployment) -> dict[str, str]:
    return {c["name"]: c["version"] for c in fleet.get().get("status", {}).get("components", [])}


def karmada_components_on(fleet: Deployment, version: str) -> bool:
    versions = status_versions(fleet)
    return bool(versions) and all(v == version for name, v in versions.items() if name not in KUBE_COMPONENTS)


def patch(fleet: Deployment, spec: dict) -> None:
    fleet.host.kubectl("patch", "karmadadeployment", NAME, "-n", NS, "--type=merge",
                       "-p", json.dumps({"spec": spec}))


def events(fleet: Deployment, reason: str) -> list[dict]:
    """Events of a reason about the KarmadaDeployment, in the order the API server stored them."""
    items = fleet.host.get("events", "-n", NS, "--field-selector",
                           f"involvedObject.kind=KarmadaDeployment,involvedObject.name={NAME},reason={reason}")["items"]
    return sorted(items, key=lambda e: int(e["metadata"]["resourceVersion"]))


def rolled_since(fleet: Deployment, seen: set[str]) -> list[dict]:
    """ComponentRolledOut Events not in ``seen`` (uids), in the order they were stored."""
    return [e for e in events(fleet, "ComponentRolledOut") if e["metadata"]["uid"] not in seen]


def event_uids(fleet: Deployment, reason: str) -> set[str]:
    return {e["metadata"]["uid"] for e in events(fleet, reason)}


def check_pre_upgrade_backup(fleet: Deployment, record: dict, version: str, first_rolled: dict) -> None:
    """The backup the version change took: named in status.upgrade, Succeeded, and stored
    (its BackupSucceeded Event) before the first component rolled."""
    name = record.get("backup", {}).get("name", "")
    assert name.startswith(f"{NAME}-pre-upgrade-{version.replace('.', '-')}-"), record
    assert record["backup"]["location"].startswith(f"pvc://{BACKUP_PVC}/{NAME}/"), record
    backup = fleet.host.get("etcdbackup", name, "-n", NS)
    assert backup["status"]["phase"] == "Succeeded" and condition(backup, "Ready")["status"] == "True", backup["status"]
    done = fleet.host.get("events", "-n", NS, "--field-selector",
                          f"involvedObject.kind=EtcdBackup,involvedObject.name={name},reason=BackupSucceeded")["items"]
    assert done, f"no BackupSucceeded Event for {name}"
    print(f"pre-upgrade backup {name}: {done[0]['message'][:200]}")
    assert int(done[0]["metadata"]["resourceVersion"]) < int(first_rolled["metadata"]["resourceVersion"]), \
        "the backup must be stored before the first component rolls"


def member_pod_uids(members: dict[str, MemberCluster]) -> dict[str, set[str]]:
    return {name: {p["metadata"]["uid"] for p in m.get("pods", "-n", "bookinfo")["items"]}
            for name, m in members.items()}


@pytest.fixture(scope="module")
def fleet(host_cluster: HostCluster, member_clusters: list[MemberCluster], bin_path, tmp_path_factory):
    assert len(member_clusters) >= 2, "set KO_TESTENV_MEMBERS to 2 or more"
    work = tmp_path_factory.mktemp("upgrade")
    # Torn down even when the setup fails: a leftover operator would reconcile the next module's Karmada too.
    with contextlib.ExitStack() as cleanup:
        crds = {OLD: serve(version=OLD), NEW: serve(version=NEW)}
        for server in crds.values():
            cleanup.callback(server.stop)
        host_cluster.kubectl("apply", "-k", str(karmada_e2e.ROOT / "config/crd"))
        crds_established(host_cluster.kubectl, ["karmadadeployments.operator.karmada.io",
                                                "etcdbackups.operator.karmada.io"])
        host_cluster.kubectl("create", "namespace", NS, check=False)
        seconds = karmada_e2e.load_operator_image(host_cluster)
        print(f"\noperator image (the backup Job's) built and imported in {seconds:.0f}s")
        operator = OperatorProcess(bin_path("ansible-operator"), operator_kubeconfig(host_cluster, work), work,
                                   extra_env={"KARMADA_OPERATOR_IMAGE": karmada_e2e.OPERATOR_IMAGE})
        cleanup.callback(operator.stop)
        # run last first: the EtcdBackups, then the Karmada while the operator still runs
        cleanup.callback(karmada_e2e.delete_karmada, host_cluster, NS, NAME)
        cleanup.callback(host_cluster.kubectl, "delete", "etcdbackups", "--all", "-n", NS, "--timeout=120s",
                         check=False)
        operator.wait_healthy()
        cr = karmada_e2e.sample_for_test_bed(NAME, crds[OLD].url, crds[OLD].sha256,
                                             [m for m in member_clusters if m.name in MEMBERS])
        cr["spec"]["karmadaVersion"] = OLD
        cr["spec"]["apiServer"]["replicas"] = 2  # /readyz must never fail through the upgrade
        fleet = Deployment(host_cluster, operator, work, NAME, NS, extra={"crds": crds})
        start = time.monotonic()
        host_cluster.kubectl("apply", "-f", "-", input=yaml.safe_dump(cr))
        fleet.wait_for(lambda: ready_at_generation(fleet) and karmada_components_on(fleet, OLD), 1500,
                       f"Ready at {OLD}")
        print(f"\napply-to-Ready at {OLD}: {time.monotonic() - start:.0f}s")
        docs = bookinfo()
        for doc in docs:
            affinity = doc.get("spec", {}).get("placement", {}).get("clusterAffinity")
            if affinity:
                affinity["clusterNames"] = list(MEMBERS)
        members = {m.name: m for m in member_clusters if m.name in MEMBERS}
        fleet.wait_for(lambda: fleet.karmadactl("apply", "-f", "-", input=yaml.safe_dump_all(docs), check=False)
                       .returncode == 0, 300, "bookinfo accepted by karmada-apiserver")
        fleet.wait_for(lambda: all(bookinfo_running(m) for m in members.values()), 600,
                       "bookinfo Running on both members")
        # A backup store for this Karmada: a version change backs up to it first.
        for doc in ({"apiVersion": "v1", "kind": "PersistentVolumeClaim",
                     "metadata": {"name": BACKUP_PVC, "namespace": NS},
                     "spec": {"accessModes": ["ReadWriteMany"], "storageClassName": "cephfs",
                              "resources": {"requests": {"storage": "1Gi"}}}},
                    {"apiVersion": "operator.karmada.io/v1alpha1", "kind": "EtcdBackup",
                     "metadata": {"name": "nightly", "namespace": NS},
                     "spec": {"karmadaDeploymentRef": {"name": NAME}, "schedule": "0 3 * * *", "suspend": True,
                              "storage": {"pvc": {"claimName": BACKUP_PVC, "subPath": NAME}}}}):
            host_cluster.kubectl("apply", "-f", "-", input=yaml.safe_dump(doc))
        yield fleet


def upgrade_to_new(fleet: Deployment, **extra) -> None:
    crds = fleet.extra["crds"][NEW]
    patch(fleet, {"karmadaVersion": NEW, "crds": {"url": crds.url, "sha256": crds.sha256}, **extra})


def test_a_jump_of_two_minor_versions_is_refused_and_nothing_changes(fleet: Deployment):
    before = control_plane_pods(fleet)
    major, minor = OLD[1:].split(".")[:2]
    too_far = f"v{major}.{int(minor) + 2}.0"
    patch(fleet, {"karmadaVersion": too_far})

    def refused():
        obj = fleet.get()
        ready = condition(obj, "Ready")
        return (ready.get("observedGeneration") == obj["metadata"]["generation"]
                and ready.get("reason") == "UnsupportedUpgrade" and ready)
    ready = fleet.wait_for(refused, 600, "Ready False with UnsupportedUpgrade")
    assert ready["status"] == "False" and "one minor version at a time" in ready["message"], ready
    assert control_plane_pods(fleet) == before, "a refused upgrade must not touch any pod"
    assert fleet.karmadactl("get", "--raw", "/readyz").stdout.strip() == "ok"
    patch(fleet, {"karmadaVersion": OLD})
    fleet.wait_for(lambda: ready_at_generation(fleet), 600, f"Ready again at {OLD}")
    assert control_plane_pods(fleet) == before


def test_full_upgrade_moves_every_component_in_order_and_keeps_serving(fleet: Deployment, member_clusters):
    members = {m.name: m for m in member_clusters if m.name in MEMBERS}
    workloads_before = member_pod_uids(members)
    rolled_before = {e["metadata"]["uid"] for e in events(fleet, "ComponentRolledOut")}
    poller = ReadyzPoller(fleet.kubeconfig(), str(Path(fleet.host.settings["KO_LINKS"]) / "kubectl"))
    started = time.monotonic()
    upgrade_to_new(fleet)
    try:
        fleet.wait_for(lambda: ready_at_generation(fleet) and karmada_components_on(fleet, NEW), 1500,
                       f"Ready with every Karmada component on {NEW}")
    finally:
        polls, failures = poller.finish()
    print(f"\nupgrade {OLD} -> {NEW}: {time.monotonic() - started:.0f}s; /readyz polled {polls} times, "
          f"{len(failures)} failures")
    assert polls > 30 and not failures, failures[:5]
    # What runs, from the pods (not from the spec): every Karmada component on NEW.
    running = control_plane_pods(fleet)
    for app, by_uid in running.items():
        if app.startswith("karmada-") and app not in KUBE_COMPONENTS:
            assert {image_tag(image) for image in by_uid.values()} == {NEW}, (app, by_uid)
    # In the registry's order, each once (the Events are written as each step passes its gate).
    rolled_events = rolled_since(fleet, rolled_before)
    rolled = [e["message"].split(" rolled out", 1)[0] for e in rolled_events]
    print(f"rolled out, in order: {rolled}")
    assert [n for n in rolled if n in ORDER] == list(ORDER), rolled
    # status.upgrade tells the same story, from the running pods.
    obj = fleet.get()
    record = obj["status"]["upgrade"]
    assert (record["fromVersion"], record["toVersion"], record["phase"]) == (OLD, NEW, "Succeeded"), record
    assert [c["name"] for c in record["components"] if c["name"] in ORDER] == list(ORDER), record
    assert {c["version"] for c in record["components"] if c["name"] in ORDER} == {NEW}, record
    assert condition(obj, "Upgrading")["reason"] == "UpgradeSucceeded"
    check_pre_upgrade_backup(fleet, record, NEW, rolled_events[0])
    # Members: nothing recreated, and a policy made now propagates.
    assert member_pod_uids(members) == workloads_before
    cm = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "after-upgrade", "namespace": "default"},
          "data": {"version": NEW}}
    pp = {"apiVersion": "policy.karmada.io/v1alpha1", "kind": "PropagationPolicy",
          "metadata": {"name": "after-upgrade", "namespace": "default"},
          "spec": {"resourceSelectors": [{"apiVersion": "v1", "kind": "ConfigMap", "name": "after-upgrade"}],
                   "placement": {"clusterAffinity": {"clusterNames": ["member1"]}}}}
    fleet.karmadactl("apply", "-f", "-", input=yaml.safe_dump_all([cm, pp]))
    fleet.wait_for(lambda: members["member1"].kubectl("get", "configmap", "after-upgrade", "-n", "default",
                                                      check=False).returncode == 0, 180,
                   "the ConfigMap on member1 through a PropagationPolicy made after the upgrade")


def test_a_scheduler_tag_change_replaces_only_scheduler_pods(fleet: Deployment):
    before = control_plane_pods(fleet)
    patch(fleet, {"components": {"scheduler": {"image": {"tag": OLD}}}})
    fleet.wait_for(lambda: ready_at_generation(fleet) and status_versions(fleet).get("karmada-scheduler") == OLD,
                   600, f"the scheduler on {OLD}")
    after = control_plane_pods(fleet)
    assert uids(after, "karmada-scheduler") == uids(before, "karmada-scheduler"), "only the scheduler may restart"
    assert not set(after["karmada-scheduler"]) & set(before["karmada-scheduler"]), "the scheduler pods are new"
    patch(fleet, {"components": {"scheduler": None}})
    fleet.wait_for(lambda: ready_at_generation(fleet) and karmada_components_on(fleet, NEW), 600,
                   f"the scheduler back on {NEW}")


def back_to_old(fleet: Deployment) -> None:
    patch(fleet, {"karmadaVersion": OLD, "crds": {"url": fleet.extra["crds"][OLD].url,
                                                 "sha256": fleet.extra["crds"][OLD].sha256}})
    fleet.wait_for(lambda: ready_at_generation(fleet) and karmada_components_on(fleet, OLD), 1200,
                   f"back on {OLD}")


def test_the_previous_version_set_back_rolls_back_in_reverse_order(fleet: Deployment):
    rolled_before = event_uids(fleet, "ComponentRolledOut")
    poller = ReadyzPoller(fleet.kubeconfig(), str(Path(fleet.host.settings["KO_LINKS"]) / "kubectl"))
    started = time.monotonic()
    try:
        back_to_old(fleet)
    finally:
        polls, failures = poller.finish()
    print(f"\nrollback {NEW} -> {OLD}: {time.monotonic() - started:.0f}s; /readyz polled {polls} times, "
          f"{len(failures)} failures")
    assert not failures, failures[:5]
    rolled_events = rolled_since(fleet, rolled_before)
    rolled = [e["message"].split(" rolled out", 1)[0] for e in rolled_events]
    print(f"rolled back, in order: {rolled}")
    assert [n for n in rolled if n in ORDER] == list(reversed(ORDER)), rolled
    for app, by_uid in control_plane_pods(fleet).items():
        if app.startswith("karmada-") and app not in KUBE_COMPONENTS:
            assert {image_tag(image) for image in by_uid.values()} == {OLD}, (app, by_uid)
    record = fleet.get()["status"]["upgrade"]
    assert (record["fromVersion"], record["toVersion"], record["phase"]) == (NEW, OLD, "Succeeded"), record
    check_pre_upgrade_backup(fleet, record, OLD, rolled_events[0])


def test_a_missing_image_stops_the_upgrade_there_and_fixing_it_completes(fleet: Deployment):
    if not karmada_components_on(fleet, OLD):
        back_to_old(fleet)
    before = control_plane_pods(fleet)
    missing = f"{NEW}-missing"
    upgrade_to_new(fleet, components={"controllerManager": {"image": {"tag": missing}}})

    def stopped():
        obj = fleet.get()
        ready = condition(obj, "Ready")
        return (ready.get("status") == "False" and ready.get("observedGeneration") == obj["metadata"]["generation"]
                and "karmada-controller-manager" in ready.get("message", "") and ready)
    ready = fleet.wait_for(stopped, 1200, "Ready False naming karmada-controller-manager")
    print(f"\nstopped: {ready['reason']}: {ready['message'][:400]}")
    assert missing in ready["message"] and ("ImagePull" in ready["message"] or "ErrImage" in ready["message"])
    after = control_plane_pods(fleet)
    for app in ("karmada-scheduler", "karmada-webhook"):  # after the stop: untouched
        assert set(after[app]) == set(before[app]), app
        assert {image_tag(i) for i in after[app].values()} == {OLD}, app
    assert {image_tag(i) for i in after["karmada-aggregated-apiserver"].values()} == {NEW}
    assert fleet.karmadactl("get", "--raw", "/readyz").stdout.strip() == "ok"  # the plane serves
    obj = fleet.get()
    record = obj["status"]["upgrade"]
    assert (record["phase"], record["stoppedAt"], record["toVersion"]) == (
        "Stopped", "karmada-controller-manager", NEW), record
    assert condition(obj, "Upgrading")["reason"] == "UpgradeStopped"
    patch(fleet, {"components": {"controllerManager": None}})
    fleet.wait_for(lambda: ready_at_generation(fleet) and karmada_components_on(fleet, NEW), 1200,
                   f"the upgrade completed on {NEW} once the image is corrected")


def test_strategy_components_moves_only_the_listed_component(fleet: Deployment):
    before = control_plane_pods(fleet)
    crds = fleet.extra["crds"][OLD]
    patch(fleet, {"karmadaVersion": OLD, "crds": {"url": crds.url, "sha256": crds.sha256},
                  "upgrade": {"strategy": "Components", "components": ["scheduler"]}})
    fleet.wait_for(lambda: ready_at_generation(fleet) and status_versions(fleet).get("karmada-scheduler") == OLD,
                   900, f"the scheduler alone on {OLD}")
    after = control_plane_pods(fleet)
    assert uids(after, "karmada-scheduler") == uids(before, "karmada-scheduler"), "only the scheduler may restart"
    versions = status_versions(fleet)
    assert all(v == NEW for n, v in versions.items() if n not in KUBE_COMPONENTS + ("karmada-scheduler",)), versions
    upgrade_to_new(fleet, upgrade={"strategy": "Full", "components": None})
    fleet.wait_for(lambda: ready_at_generation(fleet) and karmada_components_on(fleet, NEW), 900,
                   f"everything on {NEW} again")


@pytest.mark.timeout(2400)
def test_karmada_e2e_suite_passes_after_the_upgrade(fleet: Deployment, member_clusters, tmp_path):
    assert karmada_components_on(fleet, NEW)
    karmada_suite.build()
    karmada_suite.run_suite(fleet, [m for m in member_clusters if m.name in MEMBERS], [], tmp_path / "report",
                            groups_file=karmada_suite.HACK / "groups-upgrade.txt", via_service=True)
