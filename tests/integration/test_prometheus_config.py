"""config/prometheus against the Prometheus Operator's own ServiceMonitor CRD (the pinned module,
hack/testenv/fetch-manifests.sh) on a real kube-apiserver: the objects are accepted with strict
field validation, the ServiceMonitor picks exactly the operator's metrics Service and names a port
it has, the binding names the metrics-reader ClusterRole `make deploy` creates; a broken
ServiceMonitor is refused by the CRD. The scrape itself: tests/e2e/test_operator_in_cluster.py."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
import yaml

from support import kube_apiserver
from support.waiting import crds_established

ROOT = Path(__file__).resolve().parents[2]
KO_CACHE = Path(os.environ.get("KO_CACHE", Path.home() / ".cache" / "karmada-operator"))
CRD = KO_CACHE / "manifests" / "monitoring.coreos.com_servicemonitors.yaml"
NS = "karmada-operator-system"


def get(server, *args: str) -> dict:
    return json.loads(server.kubectl("get", *args, "-o", "json").stdout)


@pytest.fixture(scope="module")
def server(bin_path, tmp_path_factory):
    if not CRD.exists():
        pytest.fail(f"{CRD} missing: run `make testenv-bin` (hack/testenv/fetch-manifests.sh)")
    srv = kube_apiserver.start(bin_path("etcd"), bin_path("kube-apiserver"), bin_path("kubectl"),
                               tmp_path_factory.mktemp("prometheus-apiserver"))
    try:
        srv.kubectl("apply", "--server-side", "-f", str(CRD))
        crds_established(srv.kubectl, ["servicemonitors.monitoring.coreos.com"])
        srv.kubectl("apply", "--server-side", "-k", str(ROOT / "config/default"))
        yield srv
    finally:
        srv.stop()


def test_the_service_monitor_is_accepted_and_picks_the_operators_metrics_service_and_port(server):
    out = server.kubectl("apply", "--validate=strict", "-k", str(ROOT / "config/prometheus")).stdout
    print(out)
    monitors = get(server, "servicemonitors", "-n", NS)["items"]
    assert len(monitors) == 1
    spec = monitors[0]["spec"]
    picked = get(server, "services", "-n", NS, "-l",
                 ",".join(f"{k}={v}" for k, v in spec["selector"]["matchLabels"].items()))["items"]
    assert [s["metadata"]["name"] for s in picked] == ["karmada-operator-controller-manager-metrics-service"]
    endpoint = spec["endpoints"][0]
    assert endpoint["port"] in {p["name"] for p in picked[0]["spec"]["ports"]}
    assert (endpoint["scheme"], endpoint["path"]) == ("https", "/metrics")
    binding = get(server, "clusterrolebinding", "karmada-operator-prometheus-metrics-reader")
    role = get(server, "clusterrole", binding["roleRef"]["name"])
    assert {"nonResourceURLs": ["/metrics"], "verbs": ["get"]}.items() <= role["rules"][0].items()


def test_a_broken_service_monitor_is_refused_by_its_crd(server):
    monitor = yaml.safe_load((ROOT / "config/prometheus/monitor.yaml").read_text())
    monitor["metadata"]["namespace"] = NS
    monitor["spec"]["endpoints"][0]["scheme"] = "gopher"
    refused = server.kubectl("apply", "-f", "-", input_text=json.dumps(monitor), check=False)
    assert refused.returncode != 0 and "scheme" in refused.stderr, refused.stderr
