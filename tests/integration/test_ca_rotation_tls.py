"""A rotation of the Karmada CA seen by a real kube-apiserver (docs/certificates.md, "CA rotation").

A 1-member etcd and a kube-apiserver (the pinned test-bed binaries on loopback) read their
certificates from a directory laid out as the kubelet lays out a Secret volume (see
test_cert_reload.SecretVolume). The test runs the PKI through the rotation's phases
(``caRotation: {ca: ca, phase: Trusting | Reissuing | Dropping}``), writes each phase's files as
the kubelet would, and asks kube-apiserver who it takes two clients for (a SelfSubjectReview):

- one with a client certificate of the old CA (the admin certificate from before the rotation),
- one with a client certificate of the new CA (signed with the new CA's key in Trusting, when
  the operator signs nothing with it yet; the re-issued admin certificate from Reissuing on).

Both are accepted while Trusting and Reissuing; after Dropping only the new one is. The
apiserver's serving certificate verifies against the bundle of each phase, and against the new
CA alone after Dropping. kube-apiserver is not restarted: it reloads ``--client-ca-file`` and its
serving pair from disk, so the transition holds even before the operator's restart of it.

The front-proxy CA the same way: a request with X-Remote-User from a front-proxy client of the
old and of the new CA is taken for that user in Trusting and Reissuing, only the new one's after
Dropping (kube-apiserver reloads --requestheader-client-ca-file).

The etcd CA's rotation is run as the operator runs it (a 3-member etcd restarted one member at a
time in each phase, then kube-apiserver): every member stays healthy after each restart, the
objects written before are all there, and etcd ends up served and checked by the new CA alone.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator
from pathlib import Path

import pytest
import requests
from test_cert_reload import SecretVolume, served

from karmada_operator.pki import pki as karmada_pki
from support.pki_fixtures import EtcdCluster, KubeApiserver, pki_input, signed_by, wait_until

DATA = {"certificates": {"keyAlgorithm": "ECDSA", "keySize": 256}, "etcd": {"replicas": 1}}
ADMIN = "karmada-admin"


def phase_input(phase: str) -> dict:
    return {**pki_input(**DATA), "caRotation": {"ca": "ca", "phase": phase}}



@pytest.fixture(scope="module")
def plane(bin_path, tmp_path_factory) -> Iterator[tuple[SecretVolume, karmada_pki.PkiResult, KubeApiserver]]:
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
        yield volume, first, api
    finally:
        api.stop()
        etcd.stop()


class Client:
    """A client certificate kept on disk; asks kube-apiserver who it is."""

    def __init__(self, directory: Path, name: str, crt: str, key: str):
        directory.mkdir(parents=True, exist_ok=True)
        self.crt, self.key = directory / f"{name}.crt", directory / f"{name}.key"
        self.crt.write_text(crt)
        self.key.write_text(key)
        self.cert = karmada_pki.load_cert(crt)

    def who(self, port: int, trust: Path) -> str:
        """The user kube-apiserver authenticates this client as, or the HTTP status it refused with."""
        reply = requests.post(
            f"https://127.0.0.1:{port}/apis/authentication.k8s.io/v1/selfsubjectreviews",
            json={"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"},
            cert=(str(self.crt), str(self.key)), verify=str(trust), timeout=10)
        if reply.status_code != 201:
            return f"HTTP {reply.status_code}"
        return reply.json()["status"]["userInfo"]["username"]


def test_old_and_new_ca_clients_during_the_transition_and_only_the_new_after(plane, tmp_path: Path):
    volume, first, api = plane
    trust = volume.root / "ca.crt"  # the bundle of the phase, as every kubeconfig carries it
    old_ca = karmada_pki.load_cert(first.files["ca.crt"])
    old_client = Client(tmp_path, "old-admin", first.files["admin.crt"], first.files["admin.key"])
    assert old_client.who(api.port, trust) == ADMIN
    pid = api.process.proc.pid
    seen: dict[str, dict[str, str]] = {}

    # Trusting: the bundle is old+new; nothing is signed by the new CA, so sign a client with its key
    trusting = karmada_pki.reconcile_pki(phase_input("Trusting"), existing=first.files)
    old_in_bundle, new_ca = karmada_pki.load_bundle(trusting.files["ca.crt"])
    assert old_in_bundle == old_ca
    assert trusting.files["admin.crt"] == first.files["admin.crt"]
    new_key = karmada_pki.load_key(trusting.files["ca-next.key"])
    profile = next(p for p in karmada_pki.leaf_profiles(karmada_pki.parse_spec(pki_input(**DATA)))
                   if p.name == "admin")
    now = dt.datetime.now(dt.UTC)
    leaf_key = karmada_pki.generate_key(karmada_pki.KeyParams("ECDSA", 256))
    early = karmada_pki.issue_leaf(profile, leaf_key, new_ca, new_key, now, now + dt.timedelta(hours=1))
    new_client = Client(tmp_path, "new-admin-trusting", karmada_pki.cert_pem(early), karmada_pki.key_pem(leaf_key))
    assert signed_by(new_client.cert, new_ca) and not signed_by(new_client.cert, old_ca)
    volume.write(trusting.files)
    # kube-apiserver reloads --client-ca-file on the file event of the swap
    wait_until(lambda: new_client.who(api.port, trust) == ADMIN, 90,
               "kube-apiserver accepting a client of the new CA (Trusting)", api.process.log_tail)
    seen["Trusting"] = {"old": old_client.who(api.port, trust), "new": new_client.who(api.port, trust)}

    # Reissuing: every leaf from the new CA (the admin certificate too); both CAs still trusted
    reissuing = karmada_pki.reconcile_pki(phase_input("Reissuing"), existing=trusting.files)
    reissued = Client(tmp_path, "new-admin", reissuing.files["admin.crt"], reissuing.files["admin.key"])
    assert signed_by(reissued.cert, new_ca)
    new_serving = karmada_pki.load_cert(reissuing.files["apiserver.crt"])
    assert signed_by(new_serving, new_ca)
    volume.write(reissuing.files)
    wait_until(lambda: served(api.port).serial_number == new_serving.serial_number, 90,
               "kube-apiserver serving its certificate from the new CA", api.process.log_tail)
    seen["Reissuing"] = {"old": old_client.who(api.port, trust), "new": reissued.who(api.port, trust),
                         "new (signed in Trusting)": new_client.who(api.port, trust)}

    # Dropping: the new CA alone
    dropping = karmada_pki.reconcile_pki(phase_input("Dropping"), existing=reissuing.files)
    assert karmada_pki.load_bundle(dropping.files["ca.crt"]) == [new_ca]
    assert "ca-previous.key" in dropping.removed
    volume.write(dropping.files)
    wait_until(lambda: old_client.who(api.port, trust) != ADMIN, 90,
               "kube-apiserver refusing the old CA's client (Dropping)", api.process.log_tail)
    seen["Dropping"] = {"old": old_client.who(api.port, trust), "new": reissued.who(api.port, trust)}
    # the serving certificate checks out against the new CA alone (trust = the new ca.crt)
    assert api.ready()

    print("\nwho kube-apiserver takes each client for, per phase:")
    for phase, row in seen.items():
        print(f"  {phase:10s} " + ", ".join(f"{k}: {v}" for k, v in row.items()))
    assert seen["Trusting"] == {"old": ADMIN, "new": ADMIN}
    assert seen["Reissuing"] == {"old": ADMIN, "new": ADMIN, "new (signed in Trusting)": ADMIN}
    assert seen["Dropping"]["new"] == ADMIN
    assert seen["Dropping"]["old"] in ("HTTP 401", "HTTP 403", "system:anonymous")
    assert api.process.proc.pid == pid and api.process.alive()  # no restart was needed


def restart(process) -> None:
    process.stop()
    process.start()


def test_etcd_ca_rotation_with_the_operators_restarts_keeps_quorum_and_data(bin_path, tmp_path_factory):
    """The etcd CA's rotation as the operator runs it: in each phase the files change, then the
    etcd members restart one at a time (each waited for: every member healthy, so the peers still
    trust each other), then kube-apiserver (it reads --etcd-cafile once). Objects written before
    are still there at the end; etcd is served and checked by the new CA alone."""
    data = {**DATA, "etcd": {"replicas": 3}}
    first = karmada_pki.reconcile_pki(pki_input(**data))
    volume = SecretVolume(tmp_path_factory.mktemp("volume") / "pki")
    volume.write(first.files)
    members = list(karmada_pki.parse_spec(pki_input(**data)).etcd_members)
    etcd = EtcdCluster(bin_path("etcd"), volume.root, tmp_path_factory.mktemp("etcd"), members)
    etcd.start()
    api = KubeApiserver(bin_path("kube-apiserver"), volume.root, tmp_path_factory.mktemp("apiserver"),
                        etcd.endpoints)
    old_ca = karmada_pki.load_cert(first.files["etcd/ca.crt"])
    files, written, took = first.files, [], {}
    try:
        api.start()

        def write(tag: str) -> None:
            reply = requests.post(f"https://127.0.0.1:{api.port}/api/v1/namespaces/default/configmaps",
                                  json={"metadata": {"name": f"before-{tag.lower()}"}, "data": {"k": tag}},
                                  cert=(str(volume.root / "admin.crt"), str(volume.root / "admin.key")),
                                  verify=str(volume.root / "ca.crt"), timeout=10)
            assert reply.status_code == 201, reply.text
            written.append(f"before-{tag.lower()}")

        for phase in ("Trusting", "Reissuing", "Dropping"):
            write(phase)
            started = dt.datetime.now(dt.UTC)
            files = karmada_pki.reconcile_pki({**pki_input(**data), "caRotation": {"ca": "etcd/ca", "phase": phase}},
                                              existing=files).files
            volume.write(files)
            for process in etcd.processes:
                restart(process)
                wait_until(etcd.healthy, 60, f"every etcd member healthy after restarting {process.name} "
                           f"({phase})", etcd.logs)
            api.stop()
            api.start()
            took[phase] = (dt.datetime.now(dt.UTC) - started).total_seconds()
        (new_ca,) = karmada_pki.load_bundle(files["etcd/ca.crt"])
        assert new_ca != old_ca
        for name in ("etcd/server", "etcd/peer", "etcd/healthcheck-client", "apiserver-etcd-client"):
            assert signed_by(karmada_pki.load_cert(files[f"{name}.crt"]), new_ca), name
        port = int(etcd.endpoints[0].rsplit(":", 1)[1])
        assert signed_by(served(port, (volume.root / "etcd" / "healthcheck-client.crt",
                                       volume.root / "etcd" / "healthcheck-client.key")), new_ca)
        listed = requests.get(f"https://127.0.0.1:{api.port}/api/v1/namespaces/default/configmaps",
                              cert=(str(volume.root / "admin.crt"), str(volume.root / "admin.key")),
                              verify=str(volume.root / "ca.crt"), timeout=10).json()
        names = {item["metadata"]["name"] for item in listed["items"]}
        assert set(written) <= names, (written, names)
    finally:
        api.stop()
        etcd.stop()
    print("\netcd CA rotation, seconds per phase (files, 3 etcd restarts one at a time, kube-apiserver restart): "
          + ", ".join(f"{p} {s:.0f}" for p, s in took.items()))


def test_front_proxy_clients_of_both_cas_during_the_transition_and_only_the_new_after(plane, tmp_path: Path):
    """The front-proxy CA (kube-apiserver's --requestheader-client-ca-file): a request carrying
    X-Remote-User from a front-proxy client certificate is taken for that user while its CA is
    trusted. The rotation starts from what the Karmada CA test left in the volume (read back)."""
    volume, _, api = plane
    files = {str(p.relative_to(volume.root / "..data")): p.read_text()
             for p in (volume.root / "..data").rglob("*") if p.is_file()}
    trust = volume.root / "ca.crt"

    def as_proxy(crt: str, key: str, name: str) -> str:
        client = Client(tmp_path, name, crt, key)
        reply = requests.post(
            f"https://127.0.0.1:{api.port}/apis/authentication.k8s.io/v1/selfsubjectreviews",
            json={"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"},
            headers={"X-Remote-User": "proxied-user", "X-Remote-Group": "system:authenticated"},
            cert=(str(client.crt), str(client.key)), verify=str(trust), timeout=10)
        return reply.json()["status"]["userInfo"]["username"] if reply.status_code == 201 else \
            f"HTTP {reply.status_code}"

    old = (files["front-proxy-client.crt"], files["front-proxy-client.key"])
    assert as_proxy(*old, "old-proxy") == "proxied-user"
    seen = {}
    trusting = karmada_pki.reconcile_pki({**pki_input(**DATA), "caRotation": {"ca": "front-proxy-ca",
                                                                               "phase": "Trusting"}}, existing=files)
    volume.write(trusting.files)
    reissuing = karmada_pki.reconcile_pki({**pki_input(**DATA), "caRotation": {"ca": "front-proxy-ca",
                                                                                "phase": "Reissuing"}},
                                          existing=trusting.files)
    new = (reissuing.files["front-proxy-client.crt"], reissuing.files["front-proxy-client.key"])
    # kube-apiserver reloads the requestheader CA on the file event
    wait_until(lambda: as_proxy(*new, "new-proxy") == "proxied-user", 90,
               "a front-proxy client of the new CA accepted (Trusting)", api.process.log_tail)
    seen["Trusting"] = (as_proxy(*old, "old-proxy"), as_proxy(*new, "new-proxy"))
    volume.write(reissuing.files)
    seen["Reissuing"] = (as_proxy(*old, "old-proxy"), as_proxy(*new, "new-proxy"))
    dropping = karmada_pki.reconcile_pki({**pki_input(**DATA), "caRotation": {"ca": "front-proxy-ca",
                                                                               "phase": "Dropping"}},
                                         existing=reissuing.files)
    volume.write(dropping.files)
    wait_until(lambda: as_proxy(*old, "old-proxy") != "proxied-user", 90,
               "the old front-proxy client refused (Dropping)", api.process.log_tail)
    seen["Dropping"] = (as_proxy(*old, "old-proxy"), as_proxy(*new, "new-proxy"))
    print("\nfront-proxy clients (old CA, new CA) taken for: "
          + "; ".join(f"{p}: {o}, {n}" for p, (o, n) in seen.items()))
    assert seen["Trusting"] == seen["Reissuing"] == ("proxied-user", "proxied-user")
    assert seen["Dropping"][1] == "proxied-user" and seen["Dropping"][0] != "proxied-user"
