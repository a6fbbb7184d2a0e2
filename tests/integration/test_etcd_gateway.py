"""etcd_gateway on a real TLS etcd: gateway encodings, maintenance calls, errors that say what to do."""

from __future__ import annotations

import socket
import threading
from pathlib import Path

import pytest

from karmada_operator.etcd import gateway as etcd_gateway
from karmada_operator.etcd.gateway import (
    EtcdClient,
    EtcdConfigError,
    EtcdLeaderChangedError,
    EtcdNotFoundError,
    EtcdTimeoutError,
    EtcdTLSError,
    EtcdUnavailableError,
    EtcdUnreachableError,
)
from karmada_operator.etcd.health import cluster_health
from karmada_operator.tasks.etcd_health import report as etcd_health_report
from support.etcd_cluster import free_port, load_module, make_certs, start_cluster


@pytest.fixture(scope="module")
def cluster(bin_path, tmp_path_factory):
    work = tmp_path_factory.mktemp("etcd-client")
    cluster = start_cluster(bin_path("etcd"), 1, work, make_certs(work / "pki"))
    yield cluster
    cluster.close()


def test_binary_keys_values_and_int64_fields(cluster):
    client = cluster.client()
    key, value = b"\x00\xffbin\n/key", bytes(range(256))
    rev = client.put(key, value)
    assert isinstance(rev, int) and rev > 1
    res = client.range(key, serializable=True)
    assert res["kvs"][0].value == value and res["kvs"][0].mod_revision == rev and res["count"] == 1
    client.put_many([(f"p/{i}", str(i)) for i in range(10)])
    assert [kv.key for kv in client.iter_prefix("p/", page=3)] == sorted(f"p/{i}".encode() for i in range(10))
    status = client.status(cluster.endpoints()[0])
    assert isinstance(status.member_id, int) and status.member_id > 0  # uint64 sent as a JSON string
    assert status.is_leader and status.db_size > 0 and status.raft_term >= 2 and status.version == "3.6.6"
    members = client.member_list()
    assert (
        members[0].id == status.member_id and etcd_gateway.parse_member_id(members[0].hex_id) == members[0].id
    )


def test_maintenance_calls(cluster):
    client = cluster.client()
    endpoint = cluster.endpoints()[0]
    assert client.alarms() == []
    client.defragment(endpoint)
    first = client.hash_kv(endpoint)
    assert first["hash"] == client.hash_kv(endpoint, first["revision"])["hash"]
    assert client.leader_endpoint() == endpoint


def test_bad_inputs_fail_before_sending(cluster, tmp_path):
    certs = cluster.certs
    with pytest.raises(EtcdConfigError, match="scheme 'grpc'.*use http:// or https://"):
        EtcdClient(["grpc://127.0.0.1:2379"])
    with pytest.raises(EtcdConfigError, match="cert file .*missing.crt does not exist"):
        EtcdClient(cluster.endpoints(), cert=str(tmp_path / "missing.crt"), key=certs.client_key, ca=certs.ca)
    with pytest.raises(EtcdConfigError, match="no etcd endpoints"):
        EtcdClient([])
    with pytest.raises(EtcdConfigError, match="hex member id"):
        etcd_gateway.parse_member_id("not-an-id")


def test_connection_errors_say_what_to_do(cluster):
    certs = cluster.certs
    dead = f"https://127.0.0.1:{free_port()}"
    client = EtcdClient([dead], cert=certs.client_cert, key=certs.client_key, ca=certs.ca)
    with pytest.raises(EtcdUnreachableError, match="check the member is running"):
        client.status()
    # a dead endpoint first in the list: calls fail over to the next one
    both = EtcdClient([dead, *cluster.endpoints()], cert=certs.client_cert, key=certs.client_key, ca=certs.ca)
    assert both.member_list()
    # client-cert auth is required: no client cert -> TLS error, not retryable
    no_cert = EtcdClient(cluster.endpoints(), ca=certs.ca)
    with pytest.raises(EtcdTLSError, match="TLS handshake") as info:
        no_cert.status()
    assert not info.value.retryable
    with pytest.raises(EtcdNotFoundError, match="is not in the cluster"):
        cluster.client().member_remove("abc123")


def test_timeout_says_state_is_unknown(cluster):
    # a listener that accepts and never answers
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(4)
    accepted = []
    threading.Thread(target=lambda: accepted.append(server.accept()), daemon=True).start()
    try:
        client = EtcdClient([f"http://127.0.0.1:{server.getsockname()[1]}"], timeout=0.5)
        with pytest.raises(EtcdTimeoutError, match="may or may not have been applied") as info:
            client.put("k", "v")
        assert info.value.retryable
    finally:
        server.close()


def test_gateway_error_mapping():
    leader = etcd_gateway.api_error(
        "https://e:2379", "/v3/kv/put", 503, {"code": 14, "message": "etcdserver: leader changed"}
    )
    assert isinstance(leader, EtcdLeaderChangedError) and leader.retryable and "retry" in str(leader)
    no_leader = etcd_gateway.api_error(
        "https://e:2379", "/v3/kv/put", 503, {"code": 14, "message": "etcdserver: no leader"}
    )
    assert isinstance(no_leader, EtcdUnavailableError) and "quorum" in str(no_leader)
    space = etcd_gateway.api_error(
        "https://e:2379",
        "/v3/kv/put",
        400,
        {"code": 8, "message": "etcdserver: mvcc: database space exceeded"},
    )
    assert "defragment" in str(space)


def test_modules_report_errors_not_tracebacks(cluster):
    health = etcd_health_report(
        {"endpoints": [f"https://127.0.0.1:{free_port()}"], "timeout": 1}
    )
    assert not health["has_quorum"] and health["healthy_count"] == 0
    assert "cannot connect" in health["members"][0]["error"]
    with pytest.raises(EtcdConfigError):
        load_module("etcd_member").run_module(
            {"endpoints": ["ftp://x:1"], "name": "a", "peer_urls": ["https://a:1"]}
        )


def test_members_reached_by_address_with_the_certificate_checked_by_name(cluster):
    """An operator outside the host cluster dials pod addresses: resolve maps the advertised
    DNS name to an address, tls_server_name checks the certificate against a name it carries."""
    c = cluster.certs
    port = cluster.endpoints()[0].rsplit(":", 1)[1]
    member_dns = "karmada-etcd-0.karmada-etcd.karmada-system.svc.cluster.local"
    by_dns = EtcdClient([f"https://{member_dns}:{port}"], cert=c.client_cert, key=c.client_key, ca=c.ca,
                        resolve={member_dns: "127.0.0.1"})
    assert by_dns.status().version.startswith("3.")
    assert cluster_health(by_dns)["has_quorum"]
    by_ip = EtcdClient([f"https://127.0.0.1:{port}"], cert=c.client_cert, key=c.client_key, ca=c.ca,
                       tls_server_name="karmada-etcd-client.karmada-system.svc.cluster.local")
    assert by_ip.status().version.startswith("3.")
    health = cluster_health(by_ip.with_endpoints(by_ip.endpoints))
    assert health["has_quorum"]
    wrong = EtcdClient([f"https://127.0.0.1:{port}"], cert=c.client_cert, key=c.client_key, ca=c.ca,
                       tls_server_name="not-in-the-cert.example")
    with pytest.raises(EtcdTLSError):
        wrong.status()


def test_etcd_health_takes_the_client_certificate_as_pems_and_leaves_no_file(cluster, monkeypatch, tmp_path):
    """The role hands etcd_health the PEMs (tls) instead of writing them to files in three tasks
    of its own: the module writes them to a private directory for the call and removes it."""
    c = cluster.certs
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    import tempfile
    monkeypatch.setattr(tempfile, "tempdir", None)  # read TMPDIR again
    files = {"ca.crt": c.ca, "tls.crt": c.client_cert, "tls.key": c.client_key}
    pems = {k: Path(f).read_text() for k, f in files.items()}
    health = etcd_health_report({"endpoints": cluster.endpoints(), "timeout": 5, "tls": pems})
    assert health["has_quorum"] and health["healthy_count"] == 1, health
    assert list(tmp_path.iterdir()) == []  # the key's directory is gone
    with pytest.raises(ValueError, match=r"tls: tls\.key missing"):
        etcd_health_report({"endpoints": cluster.endpoints(), "tls": {**pems, "tls.key": ""}})
    assert list(tmp_path.iterdir()) == []
    no_client_cert = etcd_health_report(  # the PEMs really are what is used
        {"endpoints": cluster.endpoints(), "timeout": 2, "tls": {**pems, "tls.crt": pems["ca.crt"]}})
    assert not no_client_cert["has_quorum"]
