"""Encryption at rest through a KMS v2 plugin (spec.apiServer.encryption.provider KMSv2;
pki/encryption.py) on a real kube-apiserver: the EncryptionConfiguration the operator renders is
accepted, kube-apiserver reaches the bed's real KMS v2 plugin (hack/testenv/kms-plugin, gRPC over
a Unix socket) and is ready only with it, a Secret lands in etcd as KMS v2 ciphertext under the
plugin's name (read from etcd itself, not through the API) and reads back whole; and without its
key a second kube-apiserver on the same etcd cannot read it. The operator's wiring in a real Karmada
(the sidecar, the socket volume, the switch from secretbox and the rewrite):
tests/e2e/test_cert_rotation.py."""

from __future__ import annotations

import base64
import os
import subprocess

import pytest

from karmada_operator.pki import encryption
from support import kube_apiserver
from support.waiting import wait_for

KEY = base64.b64encode(bytes(range(32))).decode()


@pytest.fixture(scope="module")
def kms(bin_path, tmp_path_factory):
    work = tmp_path_factory.mktemp("kms")
    socket = work / "kms.sock"
    log = open(work / "kms-plugin.log", "w")  # noqa: SIM115
    plugin = subprocess.Popen([bin_path("kms-plugin"), f"--listen={socket}"], stdout=log, stderr=subprocess.STDOUT,
                              env={**os.environ, "KMS_KEY": KEY})
    wait_for(lambda: socket.exists(), 30, "the KMS plugin's socket")
    spec = encryption.settings({"encryption": {"provider": "KMSv2", "kms": {"name": "vault", "image": "unused"}}})
    text, reasons = encryption.ensure(None, spec)
    assert reasons == ["missing"]
    # the operator's file as it is, but for where the socket is on this machine (in the pod: KMS_SOCKET)
    assert f"unix://{encryption.KMS_SOCKET}" in text
    config = work / encryption.FILE
    config.write_text(text.replace(encryption.KMS_SOCKET, str(socket)))
    server = kube_apiserver.start(bin_path("etcd"), bin_path("kube-apiserver"), bin_path("kubectl"), work / "api",
                                  extra_args=[f"--encryption-provider-config={config}"])
    try:
        yield {"server": server, "plugin": plugin, "socket": socket, "work": work}
    finally:
        server.stop()
        if plugin.poll() is None:
            plugin.terminate()
            plugin.wait(timeout=20)


def stored(bin_path, server, key: str) -> bytes:
    """The value etcd itself holds under ``key`` (etcdctl, not through kube-apiserver)."""
    out = subprocess.run([bin_path("etcdctl"), f"--endpoints={server.etcd_url}", "get", key, "--print-value-only"],
                         check=True, capture_output=True, timeout=30).stdout
    return out.rstrip(b"\n")


def test_a_secret_is_stored_as_kms_v2_ciphertext_under_the_plugins_name_and_reads_back(kms, bin_path):
    server = kms["server"]
    assert "[+]kms-providers ok" in server.kubectl("get", "--raw", "/readyz?verbose").stdout
    server.kubectl("create", "secret", "generic", "token", "-n", "default", "--from-literal=token=s3cr3t-value")
    raw = stored(bin_path, server, "/registry/secrets/default/token")
    assert raw.startswith(b"k8s:enc:kms:v2:vault:"), raw[:40]
    assert b"s3cr3t-value" not in raw and b"token" not in raw[len(b"k8s:enc:kms:v2:vault:"):]
    back = server.kubectl("get", "secret", "token", "-n", "default", "-o", "jsonpath={.data.token}").stdout
    assert base64.b64decode(back) == b"s3cr3t-value"
    print(f"\netcd holds {len(raw)} bytes starting {raw[:21]!r} for a 12-byte value")


def test_a_kube_apiserver_whose_plugin_holds_another_key_cannot_read_it(kms, bin_path):
    """The same etcd read by a second kube-apiserver, its own plugin under another key (what a
    restore without the KMS's key meets): the Secret cannot be decrypted; with the key it can."""
    first = kms["server"]
    work = kms["work"]

    def second(key: str, name: str, ready: bool):
        socket = work / f"{name}.sock"
        log = open(work / f"{name}.log", "w")  # noqa: SIM115
        plugin = subprocess.Popen([bin_path("kms-plugin"), f"--listen={socket}"], stdout=log,
                                  stderr=subprocess.STDOUT, env={**os.environ, "KMS_KEY": key})
        wait_for(lambda: socket.exists(), 30, f"the {name} plugin's socket")
        config = work / f"{name}.json"
        config.write_text((work / encryption.FILE).read_text().replace(str(kms["socket"]), str(socket)))
        server = kube_apiserver.start(bin_path("etcd"), bin_path("kube-apiserver"), bin_path("kubectl"), work / name,
                                      extra_args=[f"--encryption-provider-config={config}"], etcd_url=first.etcd_url,
                                      wait_ready=ready)
        return server, plugin

    # another key: kube-apiserver cannot decrypt the Secret's data key (its cache of Secrets never
    # fills, so it never turns ready either)
    other = base64.b64encode(bytes(32 - i for i in range(32))).decode()
    server, plugin = second(other, "other-key", ready=False)
    try:
        log = work / "other-key" / "kube-apiserver.log"
        refused = wait_for(lambda: next((line for line in log.read_text().splitlines()
                                         if 'unable to transform key "/registry/secrets/default/token"' in line), None),
                           60, "the Secret refused by a kube-apiserver with another key")
        assert "failed to decrypt DEK" in refused and "is not this plugin's key" in refused, refused
        got = server.kubectl("get", "secret", "token", "-n", "default", "-o", "jsonpath={.data.token}", check=False,
                             timeout=20)
        assert got.returncode != 0 and "s3cr3t" not in got.stdout, got.stdout
        print(f"\nanother key: {refused[refused.index('failed to decrypt'):][:160]}")
    finally:
        server.stop()
        plugin.terminate()
        plugin.wait(timeout=20)
    # the same key: ready, and the Secret reads back
    server, plugin = second(KEY, "same-key", ready=True)
    try:
        got = server.kubectl("get", "secret", "token", "-n", "default", "-o", "jsonpath={.data.token}")
        assert base64.b64decode(got.stdout) == b"s3cr3t-value"
    finally:
        server.stop()
        plugin.terminate()
        plugin.wait(timeout=20)
