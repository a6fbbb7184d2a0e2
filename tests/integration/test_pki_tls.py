"""The generated PKI over real TLS: a 3-member etcd, a kube-apiserver, kubectl, etcdctl, openssl.

One RSA-2048 set is generated per module; etcd and kube-apiserver run from the pinned test-bed
binaries on loopback. The external balancer is a TCP proxy on 127.0.0.2. The Ansible module is
run through the real `ansible` runner.
"""

from __future__ import annotations

import base64
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import requests
import yaml

from karmada_operator.pki import pki as karmada_pki
from support.pki_fixtures import ROOT, EtcdCluster, KubeApiserver, TcpProxy, pki_input, wait_until

LB_DNS = "karmada.example.test"
LB_IP = "127.0.0.2"


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, karmada_pki.PkiResult]:
    data = pki_input(certificates={"keyAlgorithm": "RSA", "keySize": 2048})
    result = karmada_pki.reconcile_pki(data)
    root = karmada_pki.write_pki_dir(result.files, tmp_path_factory.mktemp("pki"))
    return root, result


@pytest.fixture(scope="module")
def etcd_cluster(pki, bin_path, tmp_path_factory) -> Iterator[EtcdCluster]:
    root, result = pki
    members = list(karmada_pki.parse_spec(pki_input()).etcd_members)
    cluster = EtcdCluster(bin_path("etcd"), root, tmp_path_factory.mktemp("etcd"), members)
    try:
        cluster.start()
        yield cluster
    finally:
        cluster.stop()


@pytest.fixture(scope="module")
def apiserver(pki, etcd_cluster, bin_path, tmp_path_factory) -> Iterator[KubeApiserver]:
    root, _ = pki
    server = KubeApiserver(
        bin_path("kube-apiserver"), root, tmp_path_factory.mktemp("apiserver"), etcd_cluster.endpoints
    )
    try:
        server.start()
        yield server
    finally:
        server.stop()


def etcdctl(bin_path, cluster: EtcdCluster, cert: str, *args: str) -> subprocess.CompletedProcess[str]:
    pki = cluster.pki
    command = [
        bin_path("etcdctl"),
        f"--endpoints={','.join(cluster.endpoints)}",
        f"--cacert={pki / 'etcd' / 'ca.crt'}",
        f"--cert={pki / (cert + '.crt')}",
        f"--key={pki / (cert + '.key')}",
        "--command-timeout=5s",
        "--dial-timeout=3s",
        *args,
    ]
    return subprocess.run(command, capture_output=True, text=True, timeout=30, check=False)


# --------------------------------------------------------------------------- etcd


def test_etcd_cluster_accepts_apiserver_etcd_client(etcd_cluster, bin_path):
    put = etcdctl(bin_path, etcd_cluster, "apiserver-etcd-client", "put", "/karmada/pki-test", "ok")
    assert put.returncode == 0, put.stderr
    get = etcdctl(
        bin_path, etcd_cluster, "apiserver-etcd-client", "get", "--print-value-only", "/karmada/pki-test"
    )
    assert get.returncode == 0 and get.stdout.strip() == "ok", get.stderr
    members = etcdctl(bin_path, etcd_cluster, "apiserver-etcd-client", "member", "list", "-w", "json")
    assert members.returncode == 0, members.stderr
    assert sorted(m["name"] for m in json.loads(members.stdout)["members"]) == etcd_cluster.members


def test_etcd_health_with_healthcheck_client(etcd_cluster, bin_path):
    for endpoint in etcd_cluster.endpoints:
        reply = etcd_cluster.health(endpoint, "etcd/healthcheck-client.crt", "etcd/healthcheck-client.key")
        assert reply.status_code == 200 and reply.json()["health"] == "true"
    health = etcdctl(bin_path, etcd_cluster, "etcd/healthcheck-client", "endpoint", "health", "--cluster")
    assert health.returncode == 0, health.stderr
    assert health.stdout.count("is healthy") + health.stderr.count("is healthy") == 3


def test_etcd_refuses_client_cert_from_karmada_ca(etcd_cluster, bin_path):
    def rejections() -> int:
        return etcd_cluster.logs(10_000_000).count("certificate signed by unknown authority")

    # etcd writes the handshake error to its log after the client has already seen the alert,
    # so each check waits for the line rather than reading the log at once
    before = rejections()
    with pytest.raises(requests.exceptions.SSLError):
        etcd_cluster.health(etcd_cluster.endpoints[0], "admin.crt", "admin.key")
    wait_until(lambda: rejections() > before, 10, "etcd to log the refused handshake", etcd_cluster.logs)
    after_requests = rejections()
    refused = etcdctl(bin_path, etcd_cluster, "admin", "get", "/karmada/pki-test")
    # with TLS 1.3 the client may see the alert or just a closed pipe; the servers' logs say why
    assert refused.returncode != 0, refused.stdout
    wait_until(lambda: rejections() > after_requests, 10, "etcd to log etcdctl's refused handshake", etcd_cluster.logs)


def test_etcd_refuses_client_without_certificate(etcd_cluster):
    with pytest.raises(requests.exceptions.SSLError):
        requests.get(
            f"{etcd_cluster.endpoints[0]}/health", verify=str(etcd_cluster.pki / "etcd" / "ca.crt"), timeout=5
        )


# --------------------------------------------------------------------------- kube-apiserver


def kubectl(bin_path, kubeconfig: Path, *args: str) -> subprocess.CompletedProcess[str]:
    command = [bin_path("kubectl"), f"--kubeconfig={kubeconfig}", "--request-timeout=10s", *args]
    return subprocess.run(command, capture_output=True, text=True, timeout=60, check=False)


def test_admin_conf_points_at_external_balancer(pki):
    root, _ = pki
    config = yaml.safe_load((root / "admin.conf").read_text())
    assert config["clusters"][0]["cluster"]["server"] == f"https://{LB_DNS}:443"
    component = yaml.safe_load((root / "karmada-scheduler.conf").read_text())
    assert component["clusters"][0]["cluster"]["server"] == (
        "https://karmada-apiserver.karmada-system.svc.cluster.local:5443"
    )
    ca = base64.b64decode(config["clusters"][0]["cluster"]["certificate-authority-data"]).decode()
    assert ca == (root / "ca.crt").read_text()


def test_kubectl_readyz_direct(apiserver, pki, bin_path):
    root, _ = pki
    direct = kubectl(
        bin_path,
        root / "admin.conf",
        f"--server=https://127.0.0.1:{apiserver.port}",
        "get",
        "--raw",
        "/readyz",
    )
    assert direct.returncode == 0 and direct.stdout.strip() == "ok", direct.stderr


def test_kubectl_readyz_through_balancer(apiserver, pki, bin_path):
    root, _ = pki
    with TcpProxy(LB_IP, ("127.0.0.1", apiserver.port)) as proxy:
        url = f"https://{LB_IP}:{proxy.address[1]}"
        by_ip = kubectl(bin_path, root / "admin.conf", f"--server={url}", "get", "--raw", "/readyz")
        assert by_ip.returncode == 0 and by_ip.stdout.strip() == "ok", by_ip.stderr
        # the balancer's DNS name, verified against the serving certificate through the proxy
        by_name = kubectl(
            bin_path,
            root / "admin.conf",
            f"--server={url}",
            f"--tls-server-name={LB_DNS}",
            "get",
            "--raw",
            "/readyz",
        )
        assert by_name.returncode == 0 and by_name.stdout.strip() == "ok", by_name.stderr
        wrong = kubectl(
            bin_path,
            root / "admin.conf",
            f"--server={url}",
            "--tls-server-name=other.example.test",
            "get",
            "--raw",
            "/readyz",
        )
        assert wrong.returncode != 0 and "x509" in wrong.stderr, wrong.stderr


def test_component_kubeconfig_identity(apiserver, pki, bin_path):
    root, _ = pki
    who = kubectl(
        bin_path,
        root / "karmada-scheduler.conf",
        f"--server=https://127.0.0.1:{apiserver.port}",
        "auth",
        "whoami",
        "-o",
        "json",
    )
    assert who.returncode == 0, who.stderr
    info = json.loads(who.stdout)["status"]["userInfo"]
    assert info["username"] == "system:karmada:karmada-scheduler"
    assert "system:masters" in info["groups"]


def test_front_proxy_client_is_trusted_for_request_headers(apiserver, pki):
    root, _ = pki
    review = {"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"}
    reply = requests.post(
        f"https://127.0.0.1:{apiserver.port}/apis/authentication.k8s.io/v1/selfsubjectreviews",
        json=review,
        headers={"X-Remote-User": "alice", "X-Remote-Group": "system:masters"},
        cert=(str(root / "front-proxy-client.crt"), str(root / "front-proxy-client.key")),
        verify=str(root / "ca.crt"),
        timeout=10,
    )
    assert reply.status_code == 201, reply.text
    assert reply.json()["status"]["userInfo"]["username"] == "alice"


def test_service_account_tokens_are_signed_and_accepted(apiserver, pki, bin_path):
    root, _ = pki
    server = f"--server=https://127.0.0.1:{apiserver.port}"
    created = kubectl(
        bin_path, root / "admin.conf", server, "-n", "default", "create", "serviceaccount", "pki-test"
    )
    assert created.returncode == 0 or "AlreadyExists" in created.stderr, created.stderr
    token = kubectl(bin_path, root / "admin.conf", server, "-n", "default", "create", "token", "pki-test")
    assert token.returncode == 0, token.stderr
    reply = requests.post(
        f"https://127.0.0.1:{apiserver.port}/apis/authentication.k8s.io/v1/selfsubjectreviews",
        json={"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"},
        headers={"Authorization": f"Bearer {token.stdout.strip()}"},
        verify=str(root / "ca.crt"),
        timeout=10,
    )
    assert reply.status_code == 201, reply.text
    assert reply.json()["status"]["userInfo"]["username"] == "system:serviceaccount:default:pki-test"


# --------------------------------------------------------------------------- openssl verify


def openssl_verify(ca: Path, leaf: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["openssl", "verify", "-CAfile", str(ca), str(leaf)],
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )


def test_openssl_verifies_each_leaf_against_its_own_ca_only(pki):
    root, result = pki
    ca_files = {ca_id: root / f"{stem}.crt" for ca_id, (stem, _, _) in karmada_pki.CAS.items()}
    leaves = [c for c in result.certificates if c["issuer"] in ca_files]
    # 4 base leaves, a client per component, 4 serving (aggregated apiserver, webhook, and search
    # and metrics-adapter, which the default component list holds), 3 etcd
    assert len(leaves) == 4 + len(karmada_pki.COMPONENTS) + 4 + 3
    for leaf in leaves:
        for ca_id, ca_file in ca_files.items():
            verdict = openssl_verify(ca_file, root / leaf["file"])
            if ca_id == leaf["issuer"]:
                assert verdict.returncode == 0, f"{leaf['name']} vs {ca_id}: {verdict.stdout}{verdict.stderr}"
            else:
                assert verdict.returncode != 0, f"{leaf['name']} must not verify against {ca_id}"
    for ca_file in ca_files.values():  # each CA is its own self-signed root
        assert openssl_verify(ca_file, ca_file).returncode == 0


def test_key_files_are_private(pki):
    root, result = pki
    for name in result.files:
        mode = (root / name).stat().st_mode & 0o777
        assert mode == (0o600 if name.endswith((".key", ".conf")) else 0o644), name


# --------------------------------------------------------------------------- the Ansible module


def ansible_binary() -> str:
    beside = Path(sys.executable).parent / "ansible"
    found = str(beside) if beside.exists() else shutil.which("ansible")
    if not found:
        pytest.fail("ansible not found: run the tests with the project virtualenv (`make setup`)")
    return found


def run_module(args: dict, tmp_path: Path) -> dict:
    """Run the karmada_pki module through the real `ansible` ad-hoc runner; the host result as a dict."""
    env = os.environ | {
        "ANSIBLE_LIBRARY": str(ROOT / "plugins" / "modules"),
        "ANSIBLE_LOAD_CALLBACK_PLUGINS": "1",
        "ANSIBLE_STDOUT_CALLBACK": "json",
        "ANSIBLE_LOCAL_TEMP": str(tmp_path / "tmp"),
        "ANSIBLE_HOME": str(tmp_path / "home"),
    }
    command = [ansible_binary(), "localhost", "-c", "local", "-m", "karmada_pki", "-a", json.dumps(args)]
    done = subprocess.run(command, capture_output=True, text=True, env=env, timeout=120, check=False)
    assert done.stdout.startswith("{"), done.stderr
    return json.loads(done.stdout)["plays"][0]["tasks"][0]["hosts"]["localhost"]


def test_ansible_module_round_trip(tmp_path):
    args = {"etcd": {"replicas": 3}, "certificates": {"keyAlgorithm": "ECDSA", "keySize": 256}}
    first = run_module(args, tmp_path)
    assert first["changed"] and "BEGIN" in first["files"]["ca.key"]
    assert first["secret_groups"]["etcd"]["ca.crt"] == first["files"]["etcd/ca.crt"]
    assert {c["name"] for c in first["certificates"]} >= {"ca", "apiserver", "etcd/server"}
    encoded = {
        group: {k: base64.b64encode(v.encode()).decode() for k, v in data.items()}
        for group, data in first["secret_groups"].items()
    }
    second = run_module(args | {"existing_groups": encoded, "existing_groups_base64": True}, tmp_path)
    assert not second["changed"] and second["changes"] == []
    assert second["files"] == first["files"]
    bad = run_module(args | {"certificates": {"keyAlgorithm": "RSA", "keySize": 1000}}, tmp_path)
    assert bad.get("failed") and bad["field"] == "certificates.keySize"
