"""karmada_pki: the set, per-role extensions, idempotence, rotation rules and input errors."""

from __future__ import annotations

import copy
import datetime as dt
import json

import pytest
from cryptography import x509
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from karmada_operator.pki import pki as karmada_pki
from support.pki_fixtures import pki_input

PkiInputError = karmada_pki.PkiInputError
SERVER_AUTH, CLIENT_AUTH = ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH
NOW = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)


def reconcile(data=None, existing=None, now=NOW, **overrides):
    return karmada_pki.reconcile_pki(data or pki_input(**overrides), existing=existing or {}, now=now)


@pytest.fixture(scope="module")
def base():
    return reconcile()


def cert(result, name):
    return x509.load_pem_x509_certificate(result.files[f"{name}.crt"].encode())


def changed_names(result):
    return {c["name"] for c in result.changes}


def reasons(result):
    return {c["name"]: c["reasons"] for c in result.changes}


def ext(certificate, cls):
    return certificate.extensions.get_extension_for_class(cls)


# --------------------------------------------------------------------------- the set


KUBEADM_FILES = [
    "ca.crt", "ca.key", "apiserver.crt", "apiserver.key", "apiserver-etcd-client.crt",
    "apiserver-etcd-client.key", "front-proxy-ca.crt", "front-proxy-ca.key", "front-proxy-client.crt",
    "front-proxy-client.key", "sa.key", "sa.pub", "admin.conf", "etcd/ca.crt", "etcd/ca.key",
    "etcd/server.crt", "etcd/server.key", "etcd/peer.crt", "etcd/peer.key",
    "etcd/healthcheck-client.crt", "etcd/healthcheck-client.key",
]  # fmt: skip


def test_full_set_uses_kubeadm_names(base):
    for name in KUBEADM_FILES:
        assert name in base.files, name
    for comp in karmada_pki.COMPONENTS:
        assert {f"{comp}-client.crt", f"{comp}-client.key", f"{comp}.conf"} <= set(base.files)
    assert {"karmada-aggregated-apiserver.crt", "karmada-webhook.crt"} <= set(base.files)
    assert all(c["reasons"] == ["missing"] for c in base.changes)
    assert base.changed and not base.removed and not base.warnings


def test_three_separate_cas(base):
    subjects = {name: cert(base, name).subject for name in ("ca", "etcd/ca", "front-proxy-ca")}
    assert len(set(subjects.values())) == 3
    for name in subjects:
        ca = cert(base, name)
        constraints = ext(ca, x509.BasicConstraints)
        assert constraints.critical and constraints.value.ca
        usage = ext(ca, x509.KeyUsage).value
        assert usage.key_cert_sign and usage.digital_signature
        assert ca.issuer == ca.subject
        assert ca.not_valid_after_utc - ca.not_valid_before_utc >= dt.timedelta(days=3650)


ROLES = {
    # name: (issuer CA, extended key usages, CN, O)
    "apiserver": ("ca", {SERVER_AUTH}, "karmada-apiserver", []),
    "apiserver-etcd-client": ("etcd/ca", {CLIENT_AUTH}, "karmada-apiserver-etcd-client", []),
    "front-proxy-client": ("front-proxy-ca", {CLIENT_AUTH}, "front-proxy-client", []),
    "admin": ("ca", {CLIENT_AUTH}, "karmada-admin", ["system:masters"]),
    "karmada-aggregated-apiserver": ("ca", {SERVER_AUTH}, "system:karmada:karmada-aggregated-apiserver", []),
    "karmada-webhook": ("ca", {SERVER_AUTH}, "system:karmada:karmada-webhook", []),
    # issued because the default component list holds the optional aggregated API servers
    "karmada-search": ("ca", {SERVER_AUTH}, "system:karmada:karmada-search", []),
    "karmada-metrics-adapter": ("ca", {SERVER_AUTH}, "system:karmada:karmada-metrics-adapter", []),
    "etcd/server": ("etcd/ca", {SERVER_AUTH, CLIENT_AUTH}, "etcd-server", []),
    "etcd/peer": ("etcd/ca", {SERVER_AUTH, CLIENT_AUTH}, "etcd-peer", []),
    "etcd/healthcheck-client": ("etcd/ca", {CLIENT_AUTH}, "etcd-healthcheck-client", []),
} | {
    f"{comp}-client": ("ca", {CLIENT_AUTH}, f"system:karmada:{comp}", ["system:masters"])
    for comp in karmada_pki.COMPONENTS
}


@pytest.mark.parametrize("name", sorted(ROLES))
def test_leaf_extensions_per_role(base, name):
    issuer, usages, common_name, orgs = ROLES[name]
    leaf = cert(base, name)
    assert karmada_pki.issued_by(leaf, cert(base, issuer))
    for other in {"ca", "etcd/ca", "front-proxy-ca"} - {issuer}:
        assert not karmada_pki.issued_by(leaf, cert(base, other))
    constraints = ext(leaf, x509.BasicConstraints)
    assert constraints.critical and not constraints.value.ca
    usage = ext(leaf, x509.KeyUsage)
    assert usage.critical and usage.value.digital_signature and not usage.value.key_cert_sign
    assert set(ext(leaf, x509.ExtendedKeyUsage).value) == usages
    assert leaf.subject.get_attributes_for_oid(NameOID.COMMON_NAME)[0].value == common_name
    assert [a.value for a in leaf.subject.get_attributes_for_oid(NameOID.ORGANIZATION_NAME)] == orgs
    has_sans = SERVER_AUTH in usages
    try:
        ext(leaf, x509.SubjectAlternativeName)
        assert has_sans, f"{name} is a client certificate and needs no SANs"
    except x509.ExtensionNotFound:
        assert not has_sans, f"{name} serves TLS and needs SANs"
    assert isinstance(leaf.public_key(), ec.EllipticCurvePublicKey)
    assert leaf.not_valid_after_utc == NOW + dt.timedelta(days=365)


def test_apiserver_sans(base):
    dns, ips = karmada_pki.cert_sans(cert(base, "apiserver"))
    svc = "karmada-apiserver"
    assert {
        svc,
        f"{svc}.karmada-system",
        f"{svc}.karmada-system.svc",
        f"{svc}.karmada-system.svc.cluster.local",
    } <= dns
    assert {
        "kubernetes",
        "kubernetes.default",
        "kubernetes.default.svc",
        "kubernetes.default.svc.cluster.local",
    } <= dns
    assert {"localhost", "karmada.example.test", "extra.example.test"} <= dns
    assert {"127.0.0.1", "127.0.0.2", "10.96.0.1"} <= ips


def test_etcd_sans_cover_every_member_and_service(base):
    for name in ("etcd/server", "etcd/peer"):
        dns, ips = karmada_pki.cert_sans(cert(base, name))
        for i in range(3):
            member = f"karmada-etcd-{i}"
            assert {
                member,
                f"{member}.karmada-etcd",
                f"{member}.karmada-etcd.karmada-system",
                f"{member}.karmada-etcd.karmada-system.svc",
                f"{member}.karmada-etcd.karmada-system.svc.cluster.local",
            } <= dns
        assert {
            "karmada-etcd-client",
            "karmada-etcd-client.karmada-system.svc.cluster.local",
            "localhost",
        } <= dns
        assert "karmada-etcd-3" not in " ".join(dns)
        assert "127.0.0.1" in ips


def test_serving_certs_for_aggregated_apiserver_and_webhook(base):
    for name in ("karmada-aggregated-apiserver", "karmada-webhook"):
        dns, _ = karmada_pki.cert_sans(cert(base, name))
        assert {name, f"{name}.karmada-system.svc", f"{name}.karmada-system.svc.cluster.local"} <= dns


def test_metadata_for_status(base):
    meta = {c["name"]: c for c in base.certificates}
    assert meta["apiserver"]["notAfter"] == "2027-01-01T00:00:00Z"
    assert meta["apiserver"]["issuer"] == "ca" and meta["ca"]["issuer"] == "self-signed"
    assert meta["etcd/server"]["issuer"] == "etcd/ca"
    assert "127.0.0.2" in meta["apiserver"]["sans"]
    assert all(c["notAfter"].endswith("Z") for c in base.certificates)
    assert "PRIVATE" not in json.dumps(base.certificates)


def test_kubeconfig_servers():
    import yaml

    result = reconcile()
    admin = yaml.safe_load(result.files["admin.conf"])
    assert admin["clusters"][0]["cluster"]["server"] == "https://karmada.example.test:443"
    assert admin["users"][0]["user"]["client-key-data"]
    scheduler = yaml.safe_load(result.files["karmada-scheduler.conf"])
    assert scheduler["clusters"][0]["cluster"]["server"] == (
        "https://karmada-apiserver.karmada-system.svc.cluster.local:5443"
    )
    plain = reconcile(pki_input(apiServer={}))
    assert (
        "server: https://karmada-apiserver.karmada-system.svc.cluster.local:5443" in plain.files["admin.conf"]
    )
    by_ip = reconcile(
        pki_input(apiServer={"externalLoadBalancer": {"addresses": ["10.0.0.10"], "port": 6443}})
    )
    assert "server: https://10.0.0.10:6443" in by_ip.files["admin.conf"]
    override = reconcile(pki_input(apiServer={"adminServerURL": "https://lb.example:8443"}))
    assert "server: https://lb.example:8443" in override.files["admin.conf"]


# --------------------------------------------------------------------------- idempotence and rotation


def test_second_run_changes_nothing(base):
    again = reconcile(existing=base.files, now=NOW + dt.timedelta(days=10))
    assert again.changes == [] and not again.changed
    assert again.files == base.files
    assert all(again.files[k] == base.files[k] for k in base.files)  # byte-identical
    assert again.certificates == base.certificates


def test_renewal_inside_window(base):
    later = reconcile(existing=base.files, now=NOW + dt.timedelta(days=340))
    leaves = {name for name in ROLES}
    renewed = {c["name"] for c in later.changes if c["reasons"] == ["renew-window"]}
    assert renewed == leaves
    assert not {"ca", "etcd/ca", "front-proxy-ca", "sa"} & changed_names(later)
    assert cert(later, "apiserver").not_valid_after_utc == NOW + dt.timedelta(days=340 + 365)
    assert karmada_pki.issued_by(cert(later, "apiserver"), cert(base, "ca"))
    assert reconcile(existing=later.files, now=NOW + dt.timedelta(days=341)).changes == []


def test_renewal_when_renew_before_exceeds_remaining():
    short = reconcile(certificates={"keyAlgorithm": "ECDSA", "keySize": 256, "leafValidityDays": 100})
    data = pki_input(certificates={"keyAlgorithm": "ECDSA", "keySize": 256, "renewBeforeDays": 200})
    longer = reconcile(data, existing=short.files)
    assert reasons(longer)["apiserver"] == ["renew-window"]
    assert cert(longer, "apiserver").not_valid_after_utc == NOW + dt.timedelta(days=365)


def test_short_lived_leaves_renew_inside_a_duration_window():
    data = pki_input(certificates={"keyAlgorithm": "ECDSA", "keySize": 256, "leafValidity": "20m",
                                   "renewBefore": "15m"})
    first = reconcile(data)
    assert cert(first, "apiserver").not_valid_after_utc == NOW + dt.timedelta(minutes=20)
    # 4 minutes in: 16 minutes left, outside the window; 6 minutes in: inside it, every leaf renews
    assert reconcile(data, existing=first.files, now=NOW + dt.timedelta(minutes=4)).changes == []
    later = reconcile(data, existing=first.files, now=NOW + dt.timedelta(minutes=6))
    assert {c["name"] for c in later.changes if c["reasons"] == ["renew-window"]} == set(ROLES)
    assert cert(later, "apiserver").not_valid_after_utc == NOW + dt.timedelta(minutes=26)
    assert not {"ca", "etcd/ca", "front-proxy-ca", "sa"} & changed_names(later)  # CAs last years


@pytest.mark.parametrize("text,seconds", [("20m", 1200), ("1h30m", 5400), ("8760h", 8760 * 3600),
                                          ("90s", 90), ("1.5h", 5400)])
def test_durations_read_like_go(text, seconds):
    assert karmada_pki.parse_duration(text, "f").total_seconds() == seconds


def test_san_change_reissues_only_that_leaf(base):
    data = pki_input()
    data["apiServer"] = copy.deepcopy(data["apiServer"])
    data["apiServer"]["certSANs"].append("192.0.2.7")
    result = reconcile(data, existing=base.files)
    assert reasons(result) == {"apiserver": ["san-mismatch"]}
    assert "192.0.2.7" in karmada_pki.cert_sans(cert(result, "apiserver"))[1]
    assert result.files["apiserver.key"] != base.files["apiserver.key"]


def test_etcd_scale_reissues_server_and_peer(base):
    result = reconcile(pki_input(etcd={"replicas": 5}), existing=base.files)
    assert reasons(result) == {"etcd/server": ["san-mismatch"], "etcd/peer": ["san-mismatch"]}
    assert (
        "karmada-etcd-4.karmada-etcd.karmada-system.svc.cluster.local"
        in karmada_pki.cert_sans(cert(result, "etcd/server"))[0]
    )


def test_forced_ca_rotation_reissues_its_leaves(base):
    result = reconcile(pki_input(forceRenew=["ca"]), existing=base.files)
    got = reasons(result)
    assert got.pop("ca") == ["forced"]
    karmada_leaves = {n for n, role in ROLES.items() if role[0] == "ca"}
    assert {n for n, r in got.items() if r == ["ca-rotated"]} == karmada_leaves
    kubeconfigs = {n for n in got if n.endswith(".conf")}
    assert kubeconfigs == {"admin.conf"} | {f"{c}.conf" for c in karmada_pki.COMPONENTS}
    assert not {"etcd/ca", "etcd/server", "apiserver-etcd-client", "front-proxy-client", "sa"} & set(got)
    for name in karmada_leaves:
        assert karmada_pki.issued_by(cert(result, name), cert(result, "ca"))
    assert reconcile(pki_input(), existing=result.files).changes == []


def test_force_renew_issued_before_is_idempotent(base):
    data = pki_input(forceRenew=["apiserver", "etcd/ca"], forceRenewIssuedBefore="2026-02-01T00:00:00Z")
    later = NOW + dt.timedelta(days=40)
    first = reconcile(data, existing=base.files, now=later)
    got = reasons(first)
    assert (
        got["apiserver"] == ["forced"]
        and got["etcd/ca"] == ["forced"]
        and got["etcd/server"] == ["ca-rotated"]
    )
    assert reconcile(data, existing=first.files, now=later + dt.timedelta(hours=1)).changes == []


def test_missing_etcd_ca_rotates_etcd_leaves(base):
    existing = {k: v for k, v in base.files.items() if not k.startswith("etcd/ca.")}
    got = reasons(reconcile(existing=existing))
    assert got == {
        "etcd/ca": ["missing"],
        "apiserver-etcd-client": ["ca-rotated"],
        "etcd/server": ["ca-rotated"],
        "etcd/peer": ["ca-rotated"],
        "etcd/healthcheck-client": ["ca-rotated"],
    }


def test_leaf_from_another_ca_is_reissued(base):
    other = reconcile()
    existing = dict(base.files)
    existing["apiserver.crt"], existing["apiserver.key"] = (
        other.files["apiserver.crt"],
        other.files["apiserver.key"],
    )
    result = reconcile(existing=existing)
    assert reasons(result) == {"apiserver": ["wrong-issuer"]}
    assert karmada_pki.issued_by(cert(result, "apiserver"), cert(base, "ca"))


def test_key_not_matching_cert_is_reissued(base):
    existing = dict(base.files)
    existing["admin.key"] = base.files["karmada-scheduler-client.key"]
    got = reasons(reconcile(existing=existing))
    assert got == {"admin": ["key-mismatch"], "admin.conf": ["content-changed"]}


def test_key_parameter_change_reissues_leaves_not_cas(base):
    rsa = pki_input(certificates={"keyAlgorithm": "RSA", "keySize": 2048})
    result = reconcile(rsa, existing=base.files)
    got = reasons(result)
    assert {n for n, r in got.items() if r == ["key-mismatch"]} == set(ROLES)
    assert not {"ca", "etcd/ca", "front-proxy-ca", "sa"} & set(got)
    assert cert(result, "apiserver").public_key().key_size == 2048


def test_unparseable_and_removed_files(base):
    existing = dict(base.files)
    existing["karmada-webhook.crt"] = "garbage"
    existing["old-component-client.crt"] = "stale"
    result = reconcile(existing=existing)
    assert reasons(result) == {"karmada-webhook": ["unparseable"]}
    assert result.removed == ["old-component-client.crt"]
    assert result.changed


def test_leaf_clamped_to_nearer_ca_expiry():
    certs = {"keyAlgorithm": "ECDSA", "keySize": 256, "caValidityDays": 400}
    first = reconcile(pki_input(certificates=certs))
    later = NOW + dt.timedelta(days=100)
    result = reconcile(
        pki_input(certificates=certs, forceRenew=["apiserver"]), existing=first.files, now=later
    )
    assert reasons(result) == {"apiserver": ["forced"]}
    ca_end = cert(first, "ca").not_valid_after_utc
    assert cert(result, "apiserver").not_valid_after_utc == ca_end
    assert any("apiserver" in w and "clamped" in w for w in result.warnings)


def test_renew_before_rotates_expiring_ca():
    certs = {"keyAlgorithm": "ECDSA", "keySize": 256, "caValidityDays": 400}
    first = reconcile(pki_input(certificates=certs))
    result = reconcile(pki_input(certificates=certs), existing=first.files, now=NOW + dt.timedelta(days=380))
    got = reasons(result)
    assert got["ca"] == got["etcd/ca"] == got["front-proxy-ca"] == ["renew-window"]
    assert got["apiserver"] == ["ca-rotated"]


# --------------------------------------------------------------------------- bring your own CA


@pytest.fixture(scope="module")
def byo_ca():
    key = ec.generate_private_key(ec.SECP256R1())
    ca = karmada_pki.issue_ca("corp-root", key, NOW - dt.timedelta(days=1), dt.timedelta(days=3000))
    return karmada_pki.cert_pem(ca), karmada_pki.key_pem(key)


def byo_input(entry):
    return pki_input(certificates={"keyAlgorithm": "ECDSA", "keySize": 256, "ca": entry})


def test_byo_ca_signs_karmada_leaves(base, byo_ca):
    crt, key = byo_ca
    result = reconcile(byo_input({"tls.crt": crt, "tls.key": key}), existing=base.files)
    assert result.files["ca.crt"] == crt and result.files["ca.key"] == key
    got = reasons(result)
    assert got["ca"] == ["ca-replaced"] and got["apiserver"] == ["ca-rotated"]
    assert "etcd/ca" not in got
    assert karmada_pki.issued_by(cert(result, "admin"), cert(result, "ca"))
    meta = {c["name"]: c for c in result.certificates}
    assert meta["ca"]["issuer"] == "certificates.ca"
    assert reconcile(byo_input({"cert": crt, "key": key}), existing=result.files).changes == []


def test_byo_ca_nearer_expiry_clamps_leaves():
    key = ec.generate_private_key(ec.SECP256R1())
    ca = karmada_pki.issue_ca("short-root", key, NOW, dt.timedelta(days=200))
    data = byo_input({"cert": karmada_pki.cert_pem(ca), "key": karmada_pki.key_pem(key)})
    result = reconcile(data)
    assert cert(result, "apiserver").not_valid_after_utc == ca.not_valid_after_utc
    assert any("clamped" in w for w in result.warnings)
    # inside the window a new leaf could not live longer: keep it, warn about the CA, no churn
    late = reconcile(data, existing=result.files, now=NOW + dt.timedelta(days=190))
    assert late.changes == []
    assert any("bring-your-own CA" in w for w in late.warnings)


def _not_a_ca():
    key = ec.generate_private_key(ec.SECP256R1())
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca = karmada_pki.issue_ca("x", ca_key, NOW, dt.timedelta(days=10))
    profile = karmada_pki.LeafProfile("x", "ca", "leaf", karmada_pki.CLIENT)
    leaf = karmada_pki.issue_leaf(profile, key, ca, ca_key, NOW, NOW + dt.timedelta(days=5))
    return {"cert": karmada_pki.cert_pem(leaf), "key": karmada_pki.key_pem(key)}


def test_byo_ca_errors(byo_ca):
    crt, key = byo_ca
    other_key = karmada_pki.key_pem(ec.generate_private_key(ec.SECP256R1()))
    cases = [
        ({"cert": crt}, "certificates.ca.key", "no private key"),
        ({"key": key}, "certificates.ca.cert", "no certificate"),
        ({"cert": crt, "key": other_key}, "certificates.ca.key", "does not match"),
        ({"cert": "nope", "key": key}, "certificates.ca.cert", "not a PEM certificate"),
        ({"cert": crt, "key": "nope"}, "certificates.ca.key", "private key"),
        (_not_a_ca(), "certificates.ca.cert", "not a CA"),
    ]
    for entry, field, words in cases:
        with pytest.raises(PkiInputError) as err:
            reconcile(byo_input(entry))
        assert err.value.field == field, entry
        assert words in str(err.value)


def test_expired_byo_ca(byo_ca):
    crt, key = byo_ca
    with pytest.raises(PkiInputError) as err:
        reconcile(byo_input({"cert": crt, "key": key}), now=NOW + dt.timedelta(days=4000))
    assert err.value.field == "certificates.ca.cert" and "expired" in str(err.value)


def test_byo_etcd_ca_is_separate(byo_ca):
    crt, key = byo_ca
    data = pki_input(
        certificates={"keyAlgorithm": "ECDSA", "keySize": 256, "etcdCA": {"cert": crt, "key": key}}
    )
    result = reconcile(data)
    assert result.files["etcd/ca.crt"] == crt and result.files["ca.crt"] != crt
    assert karmada_pki.issued_by(cert(result, "etcd/server"), cert(result, "etcd/ca"))


# --------------------------------------------------------------------------- bad input


def lb(**kw):
    return {"apiServer": {"externalLoadBalancer": kw}}


def certs(**kw):
    return {"certificates": {"keyAlgorithm": "ECDSA", "keySize": 256} | kw}


BAD_INPUTS = {
    "lb-ip": (lb(addresses=["10.0.0.300"]), "apiServer.externalLoadBalancer.addresses[0]"),
    "lb-ip-is-name": (lb(addresses=["lb.example.com"]), "apiServer.externalLoadBalancer.addresses[0]"),
    "lb-dns": (lb(dnsNames=["bad_name.example.com"]), "apiServer.externalLoadBalancer.dnsNames[0]"),
    "lb-dns-dash": (lb(dnsNames=["-lb.example.com"]), "apiServer.externalLoadBalancer.dnsNames[0]"),
    "lb-port": (lb(port=70000), "apiServer.externalLoadBalancer.port"),
    "cert-san": ({"apiServer": {"certSANs": ["ok.example", "not valid!"]}}, "apiServer.certSANs[1]"),
    "cert-san-long-label": ({"apiServer": {"certSANs": ["a" * 64 + ".example"]}}, "apiServer.certSANs[0]"),
    "ca-validity-0": (certs(caValidityDays=0), "certificates.caValidityDays"),
    "leaf-validity-negative": (certs(leafValidityDays=-5), "certificates.leafValidityDays"),
    "leaf-validity-text": (certs(leafValidityDays="soon"), "certificates.leafValidityDays"),
    "renew-negative": (certs(renewBeforeDays=-1), "certificates.renewBeforeDays"),
    "leaf-outlives-ca": (certs(caValidityDays=100, leafValidityDays=365), "certificates.leafValidityDays"),
    "renew-before-too-big": (certs(leafValidityDays=30, renewBeforeDays=30), "certificates.renewBeforeDays"),
    "leaf-validity-not-duration": (certs(leafValidity="20 minutes"), "certificates.leafValidity"),
    "leaf-validity-zero": (certs(leafValidity="0m"), "certificates.leafValidity"),
    "leaf-validity-days-window": (certs(leafValidity="20m"), "certificates.renewBeforeDays"),
    "renew-before-longer": (certs(leafValidity="20m", renewBefore="20m"), "certificates.renewBefore"),
    "leaf-validity-outlives-ca": (certs(caValidityDays=1, leafValidity="25h", renewBefore="1h"),
                                  "certificates.leafValidity"),
    "rsa-1024": ({"certificates": {"keyAlgorithm": "RSA", "keySize": 1024}}, "certificates.keySize"),
    "ecdsa-521": ({"certificates": {"keyAlgorithm": "ECDSA", "keySize": 521}}, "certificates.keySize"),
    "ecdsa-3072": ({"certificates": {"keyAlgorithm": "ECDSA", "keySize": 3072}}, "certificates.keySize"),
    "dsa": ({"certificates": {"keyAlgorithm": "DSA", "keySize": 2048}}, "certificates.keyAlgorithm"),
    "replicas-0": ({"etcd": {"replicas": 0}}, "etcd.replicas"),
    "member-names": ({"etcd": {"replicas": 3, "memberNames": ["a", "b"]}}, "etcd.memberNames"),
    "member-name-bad": ({"etcd": {"replicas": 1, "memberNames": ["Etcd_0"]}}, "etcd.memberNames[0]"),
    "namespace": ({"namespace": "Bad Namespace"}, "namespace"),
    "cluster-domain": ({"clusterDomain": "cluster..local"}, "clusterDomain"),
    "component": ({"components": ["karmada-scheduler", "kube-scheduler"]}, "components[1]"),
    "force-renew-time": ({"forceRenewIssuedBefore": "yesterday"}, "forceRenewIssuedBefore"),
    "force-renew": ({"forceRenew": ["apiserver", "apiserver.crt"]}, "forceRenew[1]"),
}


@pytest.mark.parametrize("case", sorted(BAD_INPUTS))
def test_bad_input_names_the_field(case):
    overrides, field = BAD_INPUTS[case]
    data = pki_input()
    data.update(overrides)
    with pytest.raises(PkiInputError) as err:
        karmada_pki.reconcile_pki(data, now=NOW)
    assert err.value.field == field
    assert str(err.value).startswith(f"{field}: ")


def test_valid_key_sizes_produce_that_key():
    for algorithm, size in (("RSA", 2048), ("ECDSA", 384)):
        params = karmada_pki.KeyParams(algorithm, size)
        assert karmada_pki.key_params_of(karmada_pki.generate_key(params)) == params


# --------------------------------------------------------------------------- storage helpers


def test_secret_groups_round_trip(base):
    groups = karmada_pki.secret_groups(base.files)
    assert set(groups) == {"pki", "etcd", "kubeconfig"}
    assert {"ca.crt", "server.crt", "peer.key", "healthcheck-client.crt"} <= set(groups["etcd"])
    assert "ca.crt" in groups["pki"] and "admin.conf" in groups["kubeconfig"]
    assert all("/" not in key for group in groups.values() for key in group)
    assert karmada_pki.files_from_secret_groups(groups) == base.files


def test_write_pki_dir_layout(base, tmp_path):
    karmada_pki.write_pki_dir(base.files, tmp_path)
    assert (tmp_path / "etcd" / "server.crt").read_text() == base.files["etcd/server.crt"]
    assert (tmp_path / "sa.key").stat().st_mode & 0o777 == 0o600
    assert (tmp_path / "admin.conf").stat().st_mode & 0o777 == 0o600
    assert (tmp_path / "ca.crt").stat().st_mode & 0o777 == 0o644


def test_aggregated_apiserver_cert_names_the_service_inside_karmada_system():
    """The aggregator in karmada-apiserver reaches the APIService through an ExternalName
    Service in karmada-system and checks the serving certificate against that name."""
    from karmada_operator.pki import pki
    spec = pki.parse_spec({"namespace": "tenant-a", "name": "prod"})
    agg = next(p for p in pki.leaf_profiles(spec) if p.name == "karmada-aggregated-apiserver")
    assert "prod-aggregated-apiserver.karmada-system.svc" in agg.dns_names
    assert "prod-aggregated-apiserver.tenant-a.svc.cluster.local" in agg.dns_names


def test_optional_aggregated_api_servers_get_serving_certs_only_when_enabled():
    """karmada-search and karmada-metrics-adapter serve through the aggregator like the
    aggregated apiserver (so their certificates name the karmada-system ExternalName too), and
    get no certificate while switched off."""
    spec = karmada_pki.parse_spec({"namespace": "tenant-a", "name": "prod",
                                   "components": ["karmada-webhook", "karmada-search",
                                                  "karmada-metrics-adapter"],
                                   "servingServices": {"karmada-search": "prod-search"}})
    by_name = {p.name: p for p in karmada_pki.leaf_profiles(spec)}
    assert "prod-search.karmada-system.svc" in by_name["karmada-search"].dns_names
    assert "prod-search.tenant-a.svc.cluster.local" in by_name["karmada-search"].dns_names
    assert "prod-metrics-adapter.karmada-system.svc" in by_name["karmada-metrics-adapter"].dns_names
    # the webhook is called by its host-cluster name only
    assert not [n for n in by_name["karmada-webhook"].dns_names if ".karmada-system." in n]

    off = karmada_pki.parse_spec({"namespace": "tenant-a", "name": "prod", "components": ["karmada-webhook"]})
    names = {p.name for p in karmada_pki.leaf_profiles(off)}
    assert not names & {"karmada-search", "karmada-metrics-adapter",
                        "karmada-search-client", "karmada-metrics-adapter-client"}


def test_switching_search_on_and_off_touches_only_its_own_certificates(base):
    components = [c for c in karmada_pki.COMPONENTS if c != "karmada-search"]
    off = reconcile(existing=base.files, components=components)
    assert {c["name"] for c in off.changes} == set()
    assert "karmada-search.crt" not in off.files and "karmada-search.conf" not in off.files
    on = reconcile(existing=off.files, components=list(karmada_pki.COMPONENTS))
    assert {c["name"] for c in on.changes} == {"karmada-search", "karmada-search-client", "karmada-search.conf"}
    unchanged = {k: v for k, v in off.files.items()}
    assert all(on.files[k] == v for k, v in unchanged.items())


def test_force_renew_leaves_reissues_every_leaf_once_and_no_ca(base):
    data = pki_input(forceRenew=["leaves"], forceRenewIssuedBefore="2026-01-01T00:10:00Z")
    later = reconcile(data, existing=base.files, now=NOW + dt.timedelta(minutes=20))
    assert {c["name"] for c in later.changes if c["reasons"] == ["forced"]} == set(ROLES)
    assert not {"ca", "etcd/ca", "front-proxy-ca", "sa"} & changed_names(later)
    assert cert(later, "apiserver").not_valid_after_utc > cert(base, "apiserver").not_valid_after_utc
    # the next reconcile finds them issued after the time: nothing more
    assert reconcile(data, existing=later.files, now=NOW + dt.timedelta(minutes=21)).changes == []
