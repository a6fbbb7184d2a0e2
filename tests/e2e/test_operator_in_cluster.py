"""Issue 6: the operator runs in-cluster, as `make deploy` installs it (config/default).

No registry and no container engine here: hack/testenv/operator-image.sh assembles the
operator image (what the Dockerfile builds) as an OCI archive, which is imported into the
host cluster's containerd. config/default is applied with that image; the operator pod
(its own ServiceAccount and RBAC, the image's Python and collections) then installs a small
Karmada and joins a member cluster, all from inside the cluster.
"""

from __future__ import annotations

import json
import os
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
import requests
import yaml

from support import karmada_e2e, network_policy
from support.karmada_crds_server import serve
from support.testenv import HostCluster, MemberCluster
from support.waiting import condition, crds_established, wait_for

pytestmark = pytest.mark.e2e

IMAGE = karmada_e2e.OPERATOR_IMAGE
NS = "karmada-system"
NAME = "incluster"
SCRAPER = "metrics-scraper"  # the ServiceAccount config/prometheus's binding is pointed at
ROOT = Path(__file__).resolve().parents[2]
MONITOR_CRD = (Path(os.environ.get("KO_CACHE", Path.home() / ".cache" / "karmada-operator")) / "manifests"
               / "monitoring.coreos.com_servicemonitors.yaml")  # hack/testenv/fetch-manifests.sh
AUDIT_SINK = "audit-sink"
# This Karmada's audit log: the File target rotated at 1 MB keeping one old file, a webhook on
# this machine, and a policy of the test's own that logs ConfigMaps with their bodies (so one
# 700 kB update rotates the file).
AUDIT = {"log": {"target": "File", "maxSizeMB": 1, "maxBackups": 1, "maxAgeDays": 1},
         "webhook": {"kubeconfigSecretRef": {"name": AUDIT_SINK}},
         "policy": {"omitStages": ["RequestReceived"], "rules": [
             {"level": "None", "nonResourceURLs": ["/readyz*", "/livez*", "/healthz*"]},
             {"level": "RequestResponse", "resources": [{"group": "", "resources": ["configmaps"]}],
              "namespaces": ["audit-test"]},
             {"level": "Metadata"}]}}


class AuditSink:
    """An audit webhook on this machine: keeps every event karmada-apiserver posts."""

    def __init__(self, host_ip: str):
        sink = self
        self.events: list[dict] = []
        self.lock = threading.Lock()

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):  # noqa: N802 (http.server's name)
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                with sink.lock:
                    sink.events.extend(json.loads(body).get("items") or [])
                self.send_response(200)
                self.end_headers()

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer((host_ip, 0), Handler)
        self.url = f"http://{host_ip}:{self.server.server_address[1]}/audit"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def kubeconfig(self) -> str:
        return yaml.safe_dump({"apiVersion": "v1", "kind": "Config", "current-context": "sink",
                               "clusters": [{"name": "sink", "cluster": {"server": self.url}}],
                               "contexts": [{"name": "sink", "context": {"cluster": "sink", "user": "sink"}}],
                               "users": [{"name": "sink", "user": {}}]})

    def received(self) -> list[dict]:
        with self.lock:
            return list(self.events)

    def stop(self):
        self.server.shutdown()


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
    crds = sink = None
    try:
        host_cluster.kubectl("apply", "-f", "-", input=yaml.safe_dump_all(docs))
        crds_established(host_cluster.kubectl, ["karmadadeployments.operator.karmada.io"])
        rollout = host_cluster.kubectl("rollout", "status", f"deployment/{op_name}", "-n", op_ns,
                                       "--timeout=300s", check=False)
        assert rollout.returncode == 0, (
            host_cluster.kubectl("describe", "pods", "-n", op_ns, check=False).stdout[-3000:] + operator.log_tail())
        # Pods reach the node's address, not this machine's loopback.
        crds = serve(host=host_cluster.node_ip)
        # the minimal sample (spec: {}), with what the test bed needs: its CRDs, one etcd member
        cr = karmada_e2e.sample_for_test_bed(NAME, crds.url, crds.sha256, member_clusters[:1], minimal=True)
        sink = AuditSink(host_cluster.node_ip)
        host_cluster.kubectl("create", "secret", "generic", AUDIT_SINK, "-n", NS,
                             f"--from-literal=kubeconfig={sink.kubeconfig()}")
        # a batch each second (30 s by default), through an audit flag spec.apiServer.audit leaves open
        cr["spec"]["apiServer"].update(audit=AUDIT, extraArgs={"audit-webhook-batch-max-wait": "1s"})
        fleet = karmada_e2e.Deployment(host_cluster, operator, work, NAME, NS)  # type: ignore[arg-type]
        host_cluster.kubectl("apply", "-f", "-", input=yaml.safe_dump(cr))
        reader = next(d["metadata"]["name"] for d in docs
                      if d["kind"] == "ClusterRole" and d["metadata"]["name"].endswith("metrics-reader"))
        yield {"fleet": fleet, "operator_ns": op_ns, "operator": op_name, "member": member_clusters[0],
               "metrics_reader": reader, "sink": sink, "work": work}
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
        host_cluster.kubectl("delete", "clusterrolebinding", "karmada-operator-prometheus-metrics-reader",
                             check=False)
        host_cluster.kubectl("delete", "crd", "servicemonitors.monitoring.coreos.com", check=False)
        host_cluster.kubectl("delete", "secret", AUDIT_SINK, "-n", NS, check=False)
        host_cluster.kubectl("delete", "namespace", op_ns, "--wait=false", check=False)
        if crds is not None:
            crds.stop()
        if sink is not None:
            sink.stop()


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


def audit_files(fleet, workload: str) -> dict[str, tuple[int, list[dict]]]:
    """The audit log files in the emptyDir of one workload's pod, read on the node:
    name -> (bytes, events)."""
    pod = next(p for p in fleet.host.get("pods", "-n", NS, "-l", f"app.kubernetes.io/name={workload},"
                                                                  f"app.kubernetes.io/instance={NAME}")["items"]
               if not p["metadata"].get("deletionTimestamp"))
    volume = (Path(fleet.host.settings["KO_KUBELET_ROOT"]) / "pods" / pod["metadata"]["uid"] / "volumes"
              / "kubernetes.io~empty-dir" / "audit-log")
    return {f.name: (f.stat().st_size, [json.loads(line) for line in f.read_text().splitlines() if line.strip()])
            for f in sorted(volume.iterdir())}


def test_the_audit_log_rotates_its_file_and_reaches_the_webhook_with_the_users_policy(in_cluster):
    """spec.apiServer.audit with a File target (1 MB, one old file kept), a webhook on this machine
    and a policy of the test's own: a ConfigMap's creation and two 300 kB updates (RequestResponse
    here) are in the webhook's events and in karmada-apiserver's files on the node with the same
    audit IDs; the updates rotated the file (two files, none above 1 MiB); a Secret read is at
    Metadata (the policy's last rule); karmada-aggregated-apiserver writes its own file."""
    fleet, sink = in_cluster["fleet"], in_cluster["sink"]
    fleet.wait_for(lambda: condition(fleet.get(), "Ready").get("status") == "True", 1200, "Ready")
    fleet.karmadactl("create", "namespace", "audit-test")
    fleet.karmadactl("create", "configmap", "big", "-n", "audit-test", "--from-literal=v=small")
    fleet.karmadactl("create", "secret", "generic", "probe", "-n", "audit-test", "--from-literal=k=hidden-value")
    fleet.karmadactl("get", "secret", "probe", "-n", "audit-test")
    for fill in "xy":  # each event holds the body twice (request and response): about 600 kB
        fleet.karmadactl("apply", "--server-side", "--force-conflicts", "-f", "-", input=yaml.safe_dump(
            {"apiVersion": "v1", "kind": "ConfigMap", "data": {"v": fill * 300_000},
             "metadata": {"name": "big", "namespace": "audit-test"}}))
    fleet.karmadactl("get", "clusters")

    def mine(events, verb, resource, name):
        return [e for e in events if e["verb"] == verb and (e.get("objectRef") or {}).get("resource") == resource
                and e["objectRef"].get("name") == name and e["user"]["username"] == "karmada-admin"]

    def webhook_has_all():
        events = sink.received()
        wanted = (mine(events, "create", "configmaps", "big"), mine(events, "patch", "configmaps", "big"),
                  mine(events, "get", "secrets", "probe"))
        return wanted if all(wanted) and len(wanted[1]) == 2 else None

    created, updated, read = fleet.wait_for(webhook_has_all, 60, "the webhook's events of the test's requests")
    files = audit_files(fleet, "karmada-apiserver")
    print(f"\nwebhook: {len(sink.received())} events; karmada-apiserver's files: "
          + ", ".join(f"{n} ({size} bytes, {len(ev)} events)" for n, (size, ev) in files.items()))
    by_id = {e["auditID"]: e for _, ev in files.values() for e in ev}
    # the newest events are in the files too (the older ones may have rotated away)
    for event in (updated[-1], updated[-2]):
        assert event["auditID"] in by_id, event["auditID"]
        assert by_id[event["auditID"]]["level"] == event["level"] == "RequestResponse"
    assert created[-1]["level"] == "RequestResponse" and created[-1]["responseObject"]["data"] == {"v": "small"}
    assert [len(e["requestObject"]["data"]["v"]) for e in updated[-2:]] == [300_000, 300_000]
    assert read[-1]["level"] == "Metadata" and "responseObject" not in read[-1]
    assert "hidden-value" not in json.dumps(sink.received())
    # rotated at 1 MiB, one old file kept beside the live one
    assert len(files) == 2 and "audit.log" in files, sorted(files)
    assert all(size <= 1024 * 1024 for size, _ in files.values()), files.keys()
    aggregated = audit_files(fleet, "karmada-aggregated-apiserver")
    listed = [e for _, ev in aggregated.values() for e in ev
              if e["verb"] == "list" and (e.get("objectRef") or {}).get("resource") == "clusters"]
    assert listed and listed[-1]["user"]["username"] == "karmada-admin", sorted(aggregated)


def scrape(url: str, token: str | None = None) -> requests.Response:
    """GET the operator's /metrics over HTTPS (its certificate is self-signed: not verified)."""
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    return requests.get(url, headers=headers, verify=False, timeout=10)


def test_operator_metrics_answer_only_a_caller_allowed_to_read_them(in_cluster):
    """--metrics-secure and --metrics-require-rbac: no token 401, a token without the
    metrics-reader role 403, a ServiceAccount bound to it 200 with the controller's metrics. The
    scrape is the one config/prometheus describes, applied with the Prometheus Operator's own
    ServiceMonitor CRD: the Service its selector picks, the endpoint behind its named port, its
    scheme and path, and its ClusterRoleBinding (pointed at our scraper) granting the read."""
    host = in_cluster["fleet"].host
    ns = in_cluster["operator_ns"]
    host.kubectl("apply", "--server-side", "-f", str(MONITOR_CRD))
    crds_established(host.kubectl, ["servicemonitors.monitoring.coreos.com"])
    docs = [d for d in yaml.safe_load_all(host.kubectl("kustomize", str(ROOT / "config/prometheus")).stdout) if d]
    for d in docs:
        if d["kind"] == "ClusterRoleBinding":
            d["subjects"] = [{"kind": "ServiceAccount", "name": SCRAPER, "namespace": ns}]
    host.kubectl("apply", "-f", "-", input=yaml.safe_dump_all(docs))
    monitor = host.get("servicemonitors.monitoring.coreos.com", "-n", ns)["items"][0]["spec"]
    endpoint = monitor["endpoints"][0]
    service = host.get("services", "-n", ns, "-l", ",".join(f"{k}={v}" for k, v in
                                                            monitor["selector"]["matchLabels"].items()))["items"][0]
    port = next(p for p in service["spec"]["ports"] if p["name"] == endpoint["port"])
    ready = [e for s in host.get("endpointslices", "-n", ns, "-l",
                                 f"kubernetes.io/service-name={service['metadata']['name']}")["items"]
             for e in s.get("endpoints") or [] if (e.get("conditions") or {}).get("ready")]
    assert len(ready) == 1, ready
    url = f"{endpoint['scheme']}://{ready[0]['addresses'][0]}:{port['targetPort']}{endpoint['path']}"
    host.kubectl("create", "serviceaccount", SCRAPER, "-n", ns)
    host.kubectl("create", "serviceaccount", "no-metrics", "-n", ns)
    allowed = host.kubectl("create", "token", SCRAPER, "-n", ns).stdout.strip()
    other = host.kubectl("create", "token", "no-metrics", "-n", ns).stdout.strip()
    anonymous, refused = scrape(url), scrape(url, other)
    print(f"\n{url}: no token {anonymous.status_code}, a token without the role {refused.status_code}")
    assert anonymous.status_code == 401, anonymous.text[:200]
    assert refused.status_code == 403, refused.text[:200]
    ok = scrape(url, allowed)
    assert ok.status_code == 200, ok.text[:200]
    assert "controller_runtime_reconcile_total" in ok.text


def reaches(host: HostCluster, ns: str, name: str, address: str, port: int) -> bool:
    """Whether a pod in ``ns`` opens a TCP connection to ``address:port`` within 3 s."""
    out = host.run_pod(ns, name, host.busybox_image, [
        "sh", "-c",
        f"if nc -w 3 {address} {port} </dev/null; then echo verdict=reachable; else echo verdict=unreachable; fi"])
    host.kubectl("delete", "pod", name, "-n", ns, "--wait=false", check=False)
    # nc's own complaint goes to stderr, which the log may place before or after the verdict
    verdicts = [line.split("=", 1)[1] for line in out.splitlines() if line.startswith("verdict=")]
    assert verdicts in (["reachable"], ["unreachable"]), out
    return verdicts == ["reachable"]


def test_the_network_policy_admits_only_the_metrics_scrape_from_labelled_namespaces(in_cluster):
    """config/network-policy on a bed that enforces NetworkPolicy (kube-router's firewall,
    support/network_policy.py): before it, a pod in any namespace opens the operator's metrics
    port; with it, a pod in a namespace labelled metrics=enabled still does, one in another
    namespace no longer does, and neither reaches the operator's health port, which still answers
    from the node (where the kubelet's probes come from: the operator pod stays Ready)."""
    host = in_cluster["fleet"].host
    ns = in_cluster["operator_ns"]
    pod = host.get("pods", "-n", ns, "-l", "control-plane=controller-manager")["items"][0]
    address = pod["status"]["podIP"]
    scraper_ns, other_ns = host.namespace("metrics"), host.namespace("elsewhere")
    host.kubectl("label", "namespace", scraper_ns, "metrics=enabled")
    try:
        with network_policy.enforced(host, in_cluster["work"]):
            # before the policy, anyone may connect (what the policy is then seen to change)
            assert reaches(host, other_ns, "before", address, 8443)
            docs = [d for d in yaml.safe_load_all(host.kubectl("kustomize", str(ROOT / "config/network-policy")).stdout)
                    if d]
            assert [(d["kind"], d["metadata"]["namespace"]) for d in docs] == [("NetworkPolicy", ns)]
            host.kubectl("apply", "-f", "-", input=yaml.safe_dump_all(docs))
            wait_for(lambda: not reaches(host, other_ns, f"after-{time.monotonic_ns()}", address, 8443), 120,
                     "the metrics port closed to a namespace without metrics=enabled")
            assert reaches(host, scraper_ns, "scraper", address, 8443)
            assert not reaches(host, scraper_ns, "health", address, 6789)
            print(f"\noperator pod {address}: 8443 open to {scraper_ns} (metrics=enabled), closed to {other_ns}; "
                  "6789 closed to both")
            # from the node, where the kubelet probes it, the health port still answers
            assert requests.get(f"http://{address}:6789/readyz", timeout=5).status_code == 200
            pod = host.get("pods", "-n", ns, "-l", "control-plane=controller-manager")["items"][0]
            assert condition(pod, "Ready")["status"] == "True"
    finally:
        host.kubectl("delete", "-k", str(ROOT / "config/network-policy"), "--ignore-not-found", check=False)
        host.kubectl("delete", "namespace", scraper_ns, other_ns, "--wait=false", check=False)
    # the bed enforces nothing again: kube-router's chains and ipsets are gone
    assert network_policy.leftovers() == [], network_policy.leftovers()
