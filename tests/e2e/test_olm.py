"""Issue 16: the operator installed and upgraded through OLM, as OperatorHub users get it.

OLM itself (olm, catalog and package operators, from the pinned sources) runs on the host
cluster from OLM's quickstart manifests with local images (hack/olm/olm.py). Our bundle,
generated from config/ as `make bundle` does, is served by a file-based catalog image (`opm
serve`); a CatalogSource, an OperatorGroup and a Subscription to channel candidate install the
operator, which then installs the sample KarmadaDeployment (sized for the test bed). A second
bundle (the next patch version, `replaces` the first) is added to the catalog: the
Subscription upgrades the operator, the Karmada it installed keeps running (no pod of it is
replaced) and the new operator's first reconcile changes nothing.
"""

from __future__ import annotations

import importlib.util
import json
import re
import time

import pytest
import yaml

from support import karmada_e2e
from support.karmada_crds_server import serve
from support.testenv import HostCluster
from support.waiting import condition, wait_for

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(3600)]

_spec = importlib.util.spec_from_file_location("olm", karmada_e2e.ROOT / "hack" / "olm" / "olm.py")
olm = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(olm)

# Not the bundle's suggested namespace (karmada-operator-system): the other modules' operators
# run with the identity `make deploy` makes there (karmada_e2e.operator_kubeconfig), and this
# module must own, and delete, the namespace it installs into. OperatorHub lets users choose it.
OP_NS = "karmada-operator-olm"
CATALOG = "karmada-operator-e2e"
SUBSCRIPTION = "karmada-operator"
NS = "karmada-system"
NAME = "olm"
OPERATOR_CRDS = ["karmadadeployments.operator.karmada.io", "etcdbackups.operator.karmada.io",
                 "etcdrestores.operator.karmada.io"]


def next_patch(version: str) -> str:
    major, minor, patch = version.split(".")
    return f"{major}.{minor}.{int(patch) + 1}"


FIRST = olm.bundle_generate.makefile_defaults()["VERSION"]
SECOND = next_patch(FIRST)
CHANNEL = olm.bundle_generate.makefile_defaults()["DEFAULT_CHANNEL"]


def csv_name(version: str) -> str:
    return f"{olm.PACKAGE}.v{version}"


@pytest.fixture(scope="module")
def olm_bed(host_cluster: HostCluster, tmp_path_factory):
    """OLM on the host cluster (removed afterwards unless it was there before), the images of
    two releases, and a namespace for the operator; everything made here is removed after."""
    work = tmp_path_factory.mktemp("olm")
    timings: dict[str, float] = {}
    start = time.monotonic()
    olm.build_bins()
    olm.base_images()
    first_catalog, _ = olm.release([FIRST], work / "first", "e2e-first")
    second_catalog, _ = olm.release([FIRST, SECOND], work / "second", "e2e-second")
    timings["images"] = time.monotonic() - start
    olm_was_there = host_cluster.kubectl("get", "deployment", "olm-operator", "-n", olm.OLM_NAMESPACE,
                                         check=False).returncode == 0
    crds_were_there = [c for c in OPERATOR_CRDS if host_cluster.kubectl("get", "crd", c, check=False).returncode == 0]
    crds = None
    try:
        timings["olm_up"] = olm.olm_up()
        crds = serve(host=host_cluster.node_ip)
        print(f"\nimages built and imported in {timings['images']:.0f}s; OLM up in {timings['olm_up']:.0f}s")
        yield {"host": host_cluster, "work": work, "first": first_catalog, "second": second_catalog,
               "crds": crds, "timings": timings}
    finally:
        started = time.monotonic()
        # The operator's finalizer runs while the operator does: the CR goes first.
        host_cluster.kubectl("delete", "karmadadeployment", NAME, "-n", NS, "--ignore-not-found",
                             "--timeout=300s", check=False, timeout=330)
        host_cluster.kubectl("delete", "subscriptions.operators.coreos.com,clusterserviceversions.operators.coreos.com,"
                             "catalogsources.operators.coreos.com,operatorgroups.operators.coreos.com,"
                             "installplans.operators.coreos.com", "--all", "-n", OP_NS, "--ignore-not-found",
                             "--timeout=120s", check=False, timeout=150)
        host_cluster.kubectl("delete", "namespace", OP_NS, "--ignore-not-found", "--timeout=180s", check=False,
                             timeout=210)
        if not olm_was_there:
            olm.olm_down()
        gone = [c for c in OPERATOR_CRDS if c not in crds_were_there]
        if gone:
            host_cluster.kubectl("delete", "crd", *gone, "--ignore-not-found", check=False, timeout=180)
        if crds is not None:
            crds.stop()
        print(f"\ncleaned up in {time.monotonic() - started:.0f}s")


def subscription_state(host: HostCluster) -> dict:
    return (host.get("subscriptions.operators.coreos.com", SUBSCRIPTION, "-n", OP_NS).get("status") or {})


def csv_phase(host: HostCluster, name: str) -> str:
    proc = host.kubectl("get", "csv", name, "-n", OP_NS, "-o", "json", check=False)
    return (json.loads(proc.stdout).get("status") or {}).get("phase", "") if proc.returncode == 0 else ""


def diagnostics(host: HostCluster) -> str:
    parts = [host.kubectl("get", "subscription,installplan,csv,catalogsource,pods,jobs", "-n", OP_NS, "-o", "wide",
                          check=False).stdout,
             host.kubectl("get", "subscription", SUBSCRIPTION, "-n", OP_NS, "-o", "yaml", check=False).stdout[-3000:],
             host.kubectl("logs", "deployment/catalog-operator", "-n", olm.OLM_NAMESPACE, "--tail=40",
                          check=False).stdout]
    return "\n".join(parts)


def operator_deployment(host: HostCluster) -> str:
    csv = host.get("csv", csv_name(FIRST), "-n", OP_NS)
    return csv["spec"]["install"]["spec"]["deployments"][0]["name"]


def plain(stdout: str) -> list[str]:
    return re.sub(r"\x1b\[[0-9;]*m", "", stdout).splitlines()


def fast_path_answer(stdout: str) -> dict[str, str]:
    """What one run's fast-path check answered, from its stdout (converged, reason)."""
    lines = plain(stdout)
    start = next(i for i, line in enumerate(lines)
                 if line.startswith("TASK [karmada_deployment : Nothing changed since the last full pass?"))
    answer = {}
    for line in lines[start + 1:]:
        if line.startswith("TASK ["):
            break
        key, _, value = line.strip().partition(": ")
        if key in ("converged", "reason"):
            answer[key] = value
    return answer


def changed_tasks(stdout: str) -> list[str]:
    """The tasks of one run that reported a change, from its stdout."""
    task, found = "", []
    for line in plain(stdout):
        if line.startswith("TASK ["):
            task = line[len("TASK ["):line.rfind("]")]
        elif line.startswith("changed: ["):
            found.append(task)
    return found


def karmada_pods(host: HostCluster) -> dict[str, str]:
    """name -> uid of every pod in the Karmada namespace (components and etcd)."""
    return {p["metadata"]["name"]: p["metadata"]["uid"] for p in host.get("pods", "-n", NS)["items"]}


@pytest.fixture(scope="module")
def installed(olm_bed):
    """CatalogSource (first release), OperatorGroup (all namespaces), Subscription (Automatic)."""
    host = olm_bed["host"]
    there = host.kubectl("get", "namespace", OP_NS, "-o", "json", "--show-managed-fields", check=False)
    assert there.returncode != 0, f"namespace {OP_NS} is there before the test made it: " + ", ".join(
        f"{m.get('manager')} {m.get('operation')} at {m.get('time')}"
        for m in json.loads(there.stdout)["metadata"].get("managedFields") or [])
    host.kubectl("create", "namespace", OP_NS)
    objs = [olm.catalog_source(CATALOG, OP_NS, olm_bed["first"]),
            {"apiVersion": "operators.coreos.com/v1", "kind": "OperatorGroup",
             "metadata": {"name": "karmada-operator", "namespace": OP_NS}, "spec": {}},
            {"apiVersion": "operators.coreos.com/v1alpha1", "kind": "Subscription",
             "metadata": {"name": SUBSCRIPTION, "namespace": OP_NS},
             "spec": {"channel": CHANNEL, "name": olm.PACKAGE, "source": CATALOG, "sourceNamespace": OP_NS,
                      "installPlanApproval": "Automatic"}}]
    start = time.monotonic()
    host.apply(objs)
    wait_for(lambda: subscription_state(host).get("installedCSV") == csv_name(FIRST)
             and csv_phase(host, csv_name(FIRST)) == "Succeeded", 900,
             f"CSV {csv_name(FIRST)} Succeeded", lambda: diagnostics(host), interval=3)
    olm_bed["timings"]["install"] = time.monotonic() - start
    print(f"\nSubscription -> CSV {csv_name(FIRST)} Succeeded in {olm_bed['timings']['install']:.0f}s")
    operator = karmada_e2e.InClusterOperator(host, OP_NS, operator_deployment(host))
    return {**olm_bed, "operator": operator,
            "fleet": karmada_e2e.Deployment(host, operator, olm_bed["work"], NAME, NS)}  # type: ignore[arg-type]


def test_subscription_installs_the_operator_from_the_catalog(installed):
    host, operator = installed["host"], installed["operator"]
    csv = host.get("csv", csv_name(FIRST), "-n", OP_NS)
    assert csv["status"]["phase"] == "Succeeded"
    assert csv["spec"]["version"] == FIRST
    state = subscription_state(host)
    assert state["installedCSV"] == csv_name(FIRST)
    assert host.get("catalogsource", CATALOG, "-n", OP_NS)["status"]["connectionState"]["lastObservedState"] == \
        "READY"
    pods = operator.pods()
    assert len(pods) == 1
    container = pods[0]["spec"]["containers"][0]
    assert container["image"] == olm.operator_image(FIRST)
    assert all(cs["ready"] for cs in pods[0]["status"]["containerStatuses"])
    # The operator's CRDs came with the bundle.
    for crd in OPERATOR_CRDS:
        assert condition(host.get("crd", crd), "Established")["status"] == "True"


def test_sample_karmada_deployment_reaches_ready(installed):
    host, fleet = installed["host"], installed["fleet"]
    crds = installed["crds"]
    start = time.monotonic()
    host.kubectl("apply", "-f", "-", input=yaml.safe_dump(karmada_e2e.sample_for_test_bed(NAME, crds.url,
                                                                                         crds.sha256)))
    fleet.wait_for(lambda: condition(fleet.get(), "Ready").get("status") == "True", 1200,
                   "the KarmadaDeployment Ready (operator installed by OLM)")
    installed["timings"]["karmada_ready"] = time.monotonic() - start
    print(f"\nKarmadaDeployment Ready in {installed['timings']['karmada_ready']:.0f}s")
    assert condition(fleet.get(), "Ready")["status"] == "True"
    assert fleet.karmadactl("get", "--raw", "/readyz").stdout == "ok"


def test_channel_upgrade_keeps_karmada_running_and_changes_nothing(installed):
    host, operator, fleet = installed["host"], installed["operator"], installed["fleet"]
    assert condition(fleet.get(), "Ready").get("status") == "True", "needs the Ready Karmada of the test before"
    before = karmada_pods(host)
    assert any("etcd" in n for n in before) and any("apiserver" in n for n in before), before
    old_pods = operator.pods()
    old_operator = {p["metadata"]["uid"] for p in old_pods}
    old_image_id = old_pods[0]["status"]["containerStatuses"][0]["imageID"]

    start = time.monotonic()
    host.kubectl("patch", "catalogsource", CATALOG, "-n", OP_NS, "--type=merge",
                 "-p", json.dumps({"spec": {"image": installed["second"]}}))
    wait_for(lambda: subscription_state(host).get("installedCSV") == csv_name(SECOND)
             and csv_phase(host, csv_name(SECOND)) == "Succeeded", 900,
             f"CSV {csv_name(SECOND)} Succeeded", lambda: diagnostics(host), interval=3)
    wait_for(lambda: csv_phase(host, csv_name(FIRST)) == "", 300, f"CSV {csv_name(FIRST)} replaced",
             lambda: diagnostics(host), interval=3)
    upgraded = time.monotonic() - start
    print(f"\ncatalog update -> CSV {csv_name(SECOND)} Succeeded, {csv_name(FIRST)} gone in {upgraded:.0f}s")
    assert host.get("csv", csv_name(SECOND), "-n", OP_NS)["spec"]["replaces"] == csv_name(FIRST)

    def new_operator_pod():
        pods = operator.pods()
        ready = [p for p in pods if p["metadata"]["uid"] not in old_operator
                 and all(cs["ready"] for cs in (p.get("status") or {}).get("containerStatuses") or [{}])]
        return ready[0] if len(pods) == 1 and ready else None

    pod = wait_for(new_operator_pod, 300, "the upgraded operator's pod alone and ready", operator.log_tail)
    assert pod["spec"]["containers"][0]["image"] == olm.operator_image(SECOND)
    # Another build, as a next release is (hack/olm/olm.py, later_release_image): the node runs
    # another image, by its digest.
    assert pod["status"]["containerStatuses"][0]["imageID"] != old_image_id, old_image_id

    # The new operator reconciles the KarmadaDeployment when it starts. Its first run is a full
    # pass (the operator's build changed: the fast path must not skip what a new release may
    # change), and it changes nothing but the record of that pass (status.converged).
    name = pod["metadata"]["name"]
    runs = wait_for(lambda: operator.runs(name, NS, NAME), 900, "the upgraded operator's first reconcile",
                    operator.log_tail, interval=5)
    first_id = next(iter(runs))  # oldest first
    first = runs[first_id]
    answer = fast_path_answer(first)
    stats = {run_id: karmada_e2e.recap_of(stdout) for run_id, stdout in runs.items()}
    print(f"\nreconciles by the upgraded operator: {stats}; the first one's fast path: {answer}; "
          f"its changed tasks: {changed_tasks(first)}")
    assert answer == {"converged": "false",
                      "reason": "the spec, the operator or an object it owns changed since the last full pass"}, answer
    assert changed_tasks(first) == ["karmada_deployment : Record what this full pass converged (status.converged)"]
    assert all(s["failed"] == 0 for s in stats.values()), stats
    assert all(changed_tasks(stdout) == [] for run_id, stdout in runs.items() if run_id != first_id), stats

    after = karmada_pods(host)
    print(f"Karmada pods before/after the upgrade: {len(before)} / {len(after)}, unchanged: {before == after}")
    assert after == before
    assert condition(fleet.get(), "Ready")["status"] == "True"
    assert fleet.karmadactl("get", "--raw", "/readyz").stdout == "ok"
