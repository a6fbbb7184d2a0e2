"""Why a leaf renewal restarts neither karmada-apiserver nor etcd (docs/certificates.md):
both pick renewed pairs up from disk while they run.

A 1-member etcd and a kube-apiserver (the pinned test-bed binaries on loopback) read their
certificates from a directory laid out as the kubelet lays out a Secret volume (every file a
symlink through ``..data`` to a timestamped directory, swapped atomically on an update). The
test re-issues every leaf with ``forceRenew: [leaves]`` (the CAs and the service-account keys
stay), swaps the directory as the kubelet would, and checks that without a restart:

- kube-apiserver serves the new serving certificate (its dynamic certificate controller);
- etcd serves the new serving certificate (it reads its pair at every TLS handshake);
- kube-apiserver still answers /readyz and stores objects in etcd, and a client certificate
  issued by the same CA before and after the renewal is accepted.
"""

from __future__ import annotations

import datetime as dt
import os
import shutil
import socket
import ssl
from collections.abc import Iterator
from pathlib import Path

import pytest
import requests
from cryptography import x509

from karmada_operator.pki import pki as karmada_pki
from support.pki_fixtures import EtcdCluster, KubeApiserver, pki_input, wait_until

DATA = {"certificates": {"keyAlgorithm": "ECDSA", "keySize": 256, "leafValidity": "20m", "renewBefore": "15m"},
        "etcd": {"replicas": 1}}


class SecretVolume:
    """A directory written like the kubelet's AtomicWriter: ``..data`` -> ``..<stamp>/``, and every
    top-level entry a symlink ``name -> ..data/name``; an update writes a new stamped directory,
    renames a new ``..data`` link over the old one and removes the old directory."""

    def __init__(self, root: Path):
        self.root, self.generation = root, 0
        root.mkdir(parents=True, exist_ok=True)

    def write(self, files: dict[str, str]) -> None:
        self.generation += 1
        stamp = self.root / f"..{self.generation:04d}"
        karmada_pki.write_pki_dir(files, stamp)
        data = self.root / "..data"
        old = self.root / os.readlink(data) if data.is_symlink() else None
        tmp = self.root / "..data_tmp"
        os.symlink(stamp.name, tmp)
        os.rename(tmp, data)
        if old is not None:  # as the kubelet does: the files a watcher followed the links to go away
            shutil.rmtree(old)
        for entry in sorted({name.split("/", 1)[0] for name in files}):
            link = self.root / entry
            if not link.is_symlink():
                os.symlink(f"..data/{entry}", link)


def served(port: int, client: tuple[Path, Path] | None = None) -> x509.Certificate:
    ctx = ssl.create_default_context()
    ctx.check_hostname, ctx.verify_mode = False, ssl.CERT_NONE
    if client:
        ctx.load_cert_chain(str(client[0]), str(client[1]))
    with socket.create_connection(("127.0.0.1", port), timeout=5) as sock, \
            ctx.wrap_socket(sock, server_hostname="localhost") as tls:
        return x509.load_der_x509_certificate(tls.getpeercert(binary_form=True))


@pytest.fixture(scope="module")
def plane(bin_path, tmp_path_factory) -> Iterator[tuple[SecretVolume, karmada_pki.PkiResult, EtcdCluster,
                                                          KubeApiserver]]:
    first = karmada_pki.reconcile_pki(pki_input(**DATA))
    volume = SecretVolume(tmp_path_factory.mktemp("volume") / "pki")
    volume.write(first.files)
    members = list(karmada_pki.parse_spec(pki_input(**DATA)).etcd_members)
    etcd = EtcdCluster(bin_path("etcd"), volume.root, tmp_path_factory.mktemp("etcd"), members)
    etcd.start()
    api = KubeApiserver(bin_path("kube-apiserver"), volume.root, tmp_path_factory.mktemp("apiserver"),
                        etcd.endpoints)
    try:
        api.start()
        yield volume, first, etcd, api
    finally:
        api.stop()
        etcd.stop()


def test_renewed_leaves_are_served_without_a_restart(plane, tmp_path: Path):
    volume, first, etcd, api = plane
    old_admin = (tmp_path / "old-admin.crt", tmp_path / "old-admin.key")
    old_admin[0].write_text(first.files["admin.crt"])
    old_admin[1].write_text(first.files["admin.key"])
    api_pid, etcd_pids = api.process.proc.pid, [p.proc.pid for p in etcd.processes]
    etcd_port = int(etcd.endpoints[0].rsplit(":", 1)[1])
    etcd_client = (volume.root / "etcd" / "healthcheck-client.crt", volume.root / "etcd" / "healthcheck-client.key")
    assert served(api.port).serial_number == x509.load_pem_x509_certificate(
        first.files["apiserver.crt"].encode()).serial_number
    now = dt.datetime.now(dt.UTC)
    renewed = karmada_pki.reconcile_pki(
        pki_input(**DATA, forceRenew=["leaves"], forceRenewIssuedBefore=now.strftime("%Y-%m-%dT%H:%M:%SZ")),
        existing=first.files, now=now + dt.timedelta(seconds=2))
    names = {c["name"] for c in renewed.changes if c["reasons"] == ["forced"]}
    assert {"apiserver", "apiserver-etcd-client", "etcd/server", "etcd/peer", "front-proxy-client"} <= names
    assert not {"ca", "etcd/ca", "front-proxy-ca", "sa"} & {c["name"] for c in renewed.changes}
    volume.write(renewed.files)
    new_api = x509.load_pem_x509_certificate(renewed.files["apiserver.crt"].encode())
    new_etcd = x509.load_pem_x509_certificate(renewed.files["etcd/server.crt"].encode())
    # etcd: at the next handshake
    assert served(etcd_port, etcd_client).serial_number == new_etcd.serial_number
    # kube-apiserver: on the file event, or its one-minute re-read at the latest
    wait_until(lambda: served(api.port).serial_number == new_api.serial_number, 90,
               "kube-apiserver serving the renewed certificate", api.process.log_tail)
    assert api.process.proc.pid == api_pid and [p.proc.pid for p in etcd.processes] == etcd_pids
    assert api.process.alive() and all(p.alive() for p in etcd.processes)
    # Still serving, still storing in etcd, clients of before and after the renewal accepted.
    assert api.ready()
    for cert in (old_admin, (volume.root / "admin.crt", volume.root / "admin.key")):
        reply = requests.post(f"https://127.0.0.1:{api.port}/api/v1/namespaces/default/configmaps",
                              json={"metadata": {"generateName": "reload-"}, "data": {"k": "v"}},
                              cert=(str(cert[0]), str(cert[1])), verify=str(volume.root / "ca.crt"), timeout=10)
        assert reply.status_code == 201, reply.text
    print(f"\nkube-apiserver and etcd serve the renewed pairs with no restart (apiserver serial "
          f"{new_api.serial_number:x}, etcd serial {new_etcd.serial_number:x})")
