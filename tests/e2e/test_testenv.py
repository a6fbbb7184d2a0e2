"""The tier-3 test bed itself (issue 3): a real node, DNS + Services, storage classes, kwok
members reachable from pods, and a repeatable down/up. Runs against hack/testenv."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from support.testenv import HostCluster, MemberCluster

pytestmark = pytest.mark.e2e


def test_node_is_ready_and_real(host_cluster: HostCluster):
    node = host_cluster.get("node", host_cluster.node_name)
    conditions = {c["type"]: c["status"] for c in node["status"]["conditions"]}
    assert conditions["Ready"] == "True"
    info = node["status"]["nodeInfo"]
    assert info["kubeletVersion"] == host_cluster.settings["KUBERNETES_VERSION"]
    assert info["containerRuntimeVersion"].startswith("containerd://")
    addresses = {a["type"]: a["address"] for a in node["status"]["addresses"]}
    assert addresses["InternalIP"] == host_cluster.node_ip


def test_pod_serves_over_clusterip_service_by_dns_name(host_cluster: HostCluster):
    ns = host_cluster.namespace("svc")
    image = host_cluster.busybox_image
    host_cluster.apply(
        [
            {
                "apiVersion": "apps/v1",
                "kind": "Deployment",
                "metadata": {"name": "web", "namespace": ns},
                "spec": {
                    "replicas": 1,
                    "selector": {"matchLabels": {"app": "web"}},
                    "template": {
                        "metadata": {"labels": {"app": "web"}},
                        "spec": {
                            "terminationGracePeriodSeconds": 1,
                            "containers": [
                                {
                                    "name": "httpd",
                                    "image": image,
                                    "imagePullPolicy": "IfNotPresent",
                                    "command": [
                                        "sh",
                                        "-c",
                                        "mkdir -p /www && echo served-by-$(hostname) "
                                        ">/www/index.html && exec httpd -f -p 8080 -h /www",
                                    ],
                                    "ports": [{"containerPort": 8080}],
                                    "readinessProbe": {"tcpSocket": {"port": 8080}, "periodSeconds": 1},
                                }
                            ],
                        },
                    },
                },
            },
            {
                "apiVersion": "v1",
                "kind": "Service",
                "metadata": {"name": "web", "namespace": ns},
                "spec": {"selector": {"app": "web"}, "ports": [{"port": 80, "targetPort": 8080}]},
            },
        ]
    )
    host_cluster.wait("-n", ns, "--for=condition=Available", "deployment/web")
    service = host_cluster.get("-n", ns, "service", "web")
    assert service["spec"]["type"] == "ClusterIP" and service["spec"]["clusterIP"].startswith("10.96.")
    server_pod = host_cluster.get("-n", ns, "pods", "-l", "app=web")["items"][0]["metadata"]["name"]
    url = f"http://web.{ns}.svc.cluster.local/"
    logs = host_cluster.run_pod(
        ns,
        "client",
        image,
        ["sh", "-c", f"for i in $(seq 30); do timeout 5 wget -q -O- {url} && exit 0; sleep 1; done; exit 1"],
    )
    assert f"served-by-{server_pod}" in logs
    host_cluster.kubectl("delete", "namespace", ns, "--wait=false")


@pytest.mark.parametrize("storage_class,access_mode", [("standard", "ReadWriteOnce"), ("cephfs", "ReadWriteMany")])
def test_pvc_of_each_class_binds_and_keeps_data(host_cluster: HostCluster, storage_class: str, access_mode: str):
    ns = host_cluster.namespace("pvc")
    claim = {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {"name": "data", "namespace": ns},
        "spec": {"accessModes": [access_mode], "resources": {"requests": {"storage": "1Gi"}}},
    }
    if storage_class != "standard":  # the default class is picked without naming it
        claim["spec"]["storageClassName"] = storage_class
    host_cluster.apply(claim)
    host_cluster.wait("-n", ns, "--for=jsonpath={.status.phase}=Bound", "pvc/data", timeout=60)
    pvc = host_cluster.get("-n", ns, "pvc", "data")
    assert pvc["spec"]["storageClassName"] == storage_class
    assert pvc["status"]["accessModes"] == [access_mode]
    volume = [{"name": "data", "persistentVolumeClaim": {"claimName": "data"}}]
    mount = [{"name": "data", "mountPath": "/data"}]
    image = host_cluster.busybox_image
    host_cluster.run_pod(
        ns,
        "writer",
        image,
        ["sh", "-c", f"echo kept-{storage_class} >/data/file && sync"],
        volumes=volume,
        mounts=mount,
    )
    logs = host_cluster.run_pod(ns, "reader", image, ["cat", "/data/file"], volumes=volume, mounts=mount)
    assert logs.strip() == f"kept-{storage_class}"
    host_cluster.kubectl("delete", "namespace", ns, "--wait=false")


def test_deployment_on_member_gets_running_pods(member_clusters: list[MemberCluster]):
    for member in member_clusters:
        nodes = member.get("nodes")["items"]
        assert len(nodes) == member.nodes
        assert all(c["status"] == "True" for n in nodes for c in n["status"]["conditions"] if c["type"] == "Ready")
        ns = member.namespace("deploy")
        member.kubectl("-n", ns, "create", "deployment", "web", "--image=registry.example/web:1", "--replicas=4")
        member.wait("-n", ns, "--for=condition=Available", "deployment/web", timeout=90)
        pods = member.get("-n", ns, "pods")["items"]
        assert len(pods) == 4
        assert {p["status"]["phase"] for p in pods} == {"Running"}
        assert {p["spec"]["nodeName"] for p in pods} <= {n["metadata"]["name"] for n in nodes}
        member.kubectl("delete", "namespace", ns, "--wait=false")


def test_pod_on_host_reaches_member_with_its_kubeconfig_secret(
    host_cluster: HostCluster, member_clusters: list[MemberCluster]
):
    for member in member_clusters:
        secret = host_cluster.get("-n", member.secret_namespace, "secret", member.secret_name)
        assert "kubeconfig" in secret["data"]
        name = f"reach-{member.name}-{int(time.time())}"
        logs = host_cluster.run_pod(
            member.secret_namespace,
            name,
            host_cluster.kubectl_image,
            ["kubectl", "--kubeconfig", "/member/kubeconfig", "get", "nodes", "-o", "name"],
            volumes=[{"name": "kc", "secret": {"secretName": member.secret_name}}],
            mounts=[{"name": "kc", "mountPath": "/member", "readOnly": True}],
        )
        assert sorted(logs.split()) == sorted(f"node/{member.name}-node-{j}" for j in range(member.nodes))
        host_cluster.kubectl("-n", member.secret_namespace, "delete", "pod", name, "--wait=false")


@pytest.mark.slow
def test_down_then_up_twice_leaves_nothing_behind(host_cluster: HostCluster, member_clusters: list[MemberCluster]):
    """Last in this module: it takes everything down, so it restores the members after."""
    for _ in range(2):
        host_cluster.script("down.sh")
        left = host_cluster.leftovers()
        assert not left, "left after down.sh:\n" + "\n".join(left)
        proc = host_cluster.script("up.sh")
        print(f"warm up.sh: {proc.elapsed:.1f}s")
        assert host_cluster.ready()
        host_cluster.wait("--for=condition=Ready", f"node/{host_cluster.node_name}")
        host_cluster.wait("-n", "kube-system", "--for=condition=Available", "deployment/coredns")
    members = member_clusters
    host_cluster.script("members.sh", str(len(members)), str(members[0].nodes if members else 0))
    assert all(m.ready() for m in members)
