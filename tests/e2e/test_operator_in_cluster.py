"""Issue 6: the operator runs in-cluster, as `make deploy` installs it (config/default).

No registry and no container engine here: hack/testenv/operator-image.sh assembles the
operator image (what the Dockerfile builds) as an OCI archive, which is imported into the
host cluster's containerd. config/default is applied with that image; the operator pod
(its own ServiceAccount and RBAC, the image's Python and collections) then installs a small
Karmada and joins a member cluster, all from inside the cluster.
"""

from __future__ import annotations

import time

import pytest
import requests
import yaml

from support import karmada_e2e
from support.karmada_crds_server import serve
from support.testenv import HostCluster, MemberCluster
from support.waiting import condition, crds_established

pytestmark = pytest.mark.e2e

IMAGE = karmada_e2e.OPERATOR_IMAGE
NS = "karmada-system"
NAME = "incluster"
SCRAPER = "karmada-operator-test-metrics-scraper"


def operator_manifests(host: HostCluster) -> list[dict]:
    rendered = host.kubectl("kustomize", str(karmada_e2e.ROOT / "config/default")).stdout
    docs = [d for d in yaml.safe_load_all(rendered) if d]
    for doc in docs:
        if doc["kind"] == "Deployment":
            container = doc["spec"]["template"]["spec"]["containers"][0]
            container["image"] = IMAGE
            container["imagePullPolicy"] = "Never"  # imported into containerd, no registry
            for env in container.get("env") or []:
                if env["name"] == "KARMADA_OPERATOR_IMAGE":  # the backup/restore Jobs' image
                    env["value"] = IMAGE
    return docs


@pytest.fixture(scope="module")
def in_cluster(host_cluster: HostCluster, member_clusters: list[MemberCluster], tmp_path_factory):
    work = tmp_path_factory.mktemp("in-cluster")
    print(f"\noperator image built and imported in {karmada_e2e.load_operator_image(host_cluster):.0f}s")

    docs = operator_manifests(host_cluster)
    deployment = next(d for d in docs if d["kind"] == "Deployment")
    op_ns, op_name = deployment["metadata"]["namespace"], deployment["metadata"]["name"]
    operator = karmada_e2e.InClusterOperator(host_cluster, op_ns, op_name)
    crds = None
    try:
        host_cluster.kubectl("apply", "-f", "-", input=yaml.safe_dump_all(docs))
        crds_established(host_cluster.kubectl, ["karmadadeployments.operator.karmada.io"])
        rollout = host_cluster.kubectl("rollout", "status", f"deployment/{op_name}", "-n", op_ns,
                                       "--timeout=300s", check=False)
        assert rollout.returncode == 0, (
            host_cluster.kubectl("describe", "pods", "-n", op_ns, check=False).stdout[-3000:] + operator.log_tail())
        # Pods reach the node's address, not this machine's loopback.
        crds = serve(host=host_cluster.node_ip)
        cr = karmada_e2e.sample_for_test_bed(NAME, crds.url, crds.sha256, member_clusters[:1])
        fleet = karmada_e2e.Deployment(host_cluster, operator, work, NAME, NS)  # type: ignore[arg-type]
        host_cluster.kubectl("apply", "-f", "-", input=yaml.safe_dump(cr))
        reader = next(d["metadata"]["name"] for d in docs
                      if d["kind"] == "ClusterRole" and d["metadata"]["name"].endswith("metrics-reader"))
        yield {"fleet": fleet, "operator_ns": op_ns, "operator": op_name, "member": member_clusters[0],
               "metrics_reader": reader}
    finally:
        # The finalizer runs after the reconcile in progress; kubectl waits up to 300 s, so the
        # subprocess must not be killed earlier.
        started = time.monotonic()
        gone = host_cluster.kubectl("delete", "karmadadeployment", NAME, "-n", NS, "--timeout=300s", check=False,
                                    timeout=330)
        print(f"\nKarmadaDeployment deleted by the in-cluster operator in {time.monotonic() - started:.0f}s "
              f"(rc={gone.returncode})")
        host_cluster.kubectl("delete", "deployment", op_name, "-n", op_ns, "--timeout=120s", check=False,
                             timeout=150)
        host_cluster.kubectl("delete", "clusterrolebinding", SCRAPER, check=False)
        host_cluster.kubectl("delete", "namespace", op_ns, "--wait=false", check=False)
        if crds is not None:
            crds.stop()


def test_in_cluster_operator_installs_karmada_and_joins_a_member(in_cluster):
    fleet = in_cluster["fleet"]
    member = in_cluster["member"].name

    def done():
        obj = fleet.get()
        return (condition(obj, "Ready").get("status") == "True"
                and condition(obj, "MembersReady").get("status") == "True"
                and obj["status"].get("readyMembers") == "1/1")

    fleet.wait_for(done, 1200, "Ready with its member joined (in-cluster operator)")
    assert fleet.karmadactl("get", "--raw", "/readyz").stdout == "ok"
    clusters = yaml.safe_load(fleet.karmadactl("get", "clusters", "-o", "yaml").stdout)["items"]
    assert [c["metadata"]["name"] for c in clusters] == [member]
    assert condition(clusters[0], "Ready")["status"] == "True"
    pods = fleet.host.get("pods", "-n", in_cluster["operator_ns"])["items"]
    assert len(pods) == 1
    pod = pods[0]
    assert pod["spec"]["containers"][0]["image"] == IMAGE
    assert pod["spec"]["serviceAccountName"].endswith("controller-manager")
    assert all(cs["ready"] and cs["restartCount"] == 0 for cs in pod["status"]["containerStatuses"])


def scrape(url: str, token: str | None = None) -> requests.Response:
    """GET the operator's /metrics over HTTPS (its certificate is self-signed: not verified)."""
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    return requests.get(url, headers=headers, verify=False, timeout=10)


def test_operator_metrics_answer_only_a_caller_allowed_to_read_them(in_cluster):
    """--metrics-secure and --metrics-require-rbac: no token 401, a token without the
    metrics-reader role 403, a ServiceAccount bound to it 200 with the controller's metrics."""
    host = in_cluster["fleet"].host
    ns = in_cluster["operator_ns"]
    pod = host.get("pods", "-n", ns)["items"][0]
    url = f"https://{pod['status']['podIP']}:8443/metrics"
    host.kubectl("create", "serviceaccount", "metrics-scraper", "-n", ns)
    host.kubectl("create", "serviceaccount", "no-metrics", "-n", ns)
    host.kubectl("create", "clusterrolebinding", SCRAPER, f"--clusterrole={in_cluster['metrics_reader']}",
                 f"--serviceaccount={ns}:metrics-scraper")
    allowed = host.kubectl("create", "token", "metrics-scraper", "-n", ns).stdout.strip()
    other = host.kubectl("create", "token", "no-metrics", "-n", ns).stdout.strip()
    anonymous, refused = scrape(url), scrape(url, other)
    print(f"\n{url}: no token {anonymous.status_code}, a token without the role {refused.status_code}")
    assert anonymous.status_code == 401, anonymous.text[:200]
    assert refused.status_code == 403, refused.text[:200]
    ok = scrape(url, allowed)
    assert ok.status_code == 200, ok.text[:200]
    assert "controller_runtime_reconcile_total" in ok.text
