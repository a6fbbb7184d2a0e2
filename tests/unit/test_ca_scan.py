"""The old-CA search of the CA rotation proof finds a CA wherever Kubernetes objects keep one."""

import base64
import datetime as dt

import yaml
from cryptography import x509
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.serialization import Encoding
from cryptography.x509.oid import NameOID

from support import ca_scan


def make_ca(name: str) -> x509.Certificate:
    key = ec.generate_private_key(ec.SECP256R1())
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
    now = dt.datetime.now(dt.UTC)
    return (x509.CertificateBuilder().subject_name(subject).issuer_name(subject).public_key(key.public_key())
            .serial_number(x509.random_serial_number()).not_valid_before(now)
            .not_valid_after(now + dt.timedelta(days=1))
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .sign(key, hashes.SHA256()))


def objects_holding(pem: bytes) -> list[dict]:
    b64 = base64.b64encode(pem).decode()
    kubeconfig = yaml.safe_dump({"clusters": [{"name": "k", "cluster": {"server": "https://x",
                                                                       "certificate-authority-data": b64}}]})
    return [
        {"kind": "ConfigMap", "metadata": {"name": "kube-root-ca.crt", "namespace": "default"},
         "data": {"ca.crt": pem.decode()}},
        {"kind": "Secret", "metadata": {"name": "pki", "namespace": "ns"}, "data": {"ca.crt": b64}},
        {"kind": "Secret", "metadata": {"name": "agent", "namespace": "ns"},
         "data": {"kubeconfig": base64.b64encode(kubeconfig.encode()).decode()}},
        {"kind": "APIService", "metadata": {"name": "v1alpha1.cluster.karmada.io"}, "spec": {"caBundle": b64}},
        {"kind": "ConfigMap", "metadata": {"name": "bundle", "namespace": "x"},
         "data": {"ca.crt": "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n" + pem.decode()}},
    ]


def test_the_ca_is_found_in_each_place_it_is_kept_and_nowhere_else():
    old, new = make_ca("old"), make_ca("new")
    old_pem = old.public_bytes(Encoding.PEM)
    new_pem = new.public_bytes(Encoding.PEM)
    found = ca_scan.places(objects_holding(old_pem), old)
    assert found == ["ConfigMap default/kube-root-ca.crt .data.ca.crt", "Secret ns/pki .data.ca.crt",
                     "Secret ns/agent .data.kubeconfig", "APIService /v1alpha1.cluster.karmada.io .spec.caBundle",
                     "ConfigMap x/bundle .data.ca.crt"]
    assert ca_scan.places(objects_holding(new_pem), old) == []


def test_the_ca_is_found_inside_a_bundle_of_two_in_a_kubeconfig_in_a_secret():
    """A CA rotation's mid-state left behind: a kubeconfig Secret whose certificate-authority-data
    is the bundle new+old. The base64 of the bundle does not hold the base64 of the old PEM
    (alignment), so the search decodes the inner token too (a mutation that kept the old CA in
    the host agent's kubeconfig passed the rotation proof before)."""
    old, new = make_ca("old"), make_ca("new")
    for bundle in (new.public_bytes(Encoding.PEM) + old.public_bytes(Encoding.PEM),
                   old.public_bytes(Encoding.PEM) + new.public_bytes(Encoding.PEM),
                   b"# a comment\n" + new.public_bytes(Encoding.PEM) + old.public_bytes(Encoding.PEM)):
        conf = yaml.safe_dump({"clusters": [{"name": "karmada", "cluster": {
            "server": "https://x", "certificate-authority-data": base64.b64encode(bundle).decode()}}]})
        secret = {"kind": "Secret", "metadata": {"name": "fleet-agent-member3-kubeconfig", "namespace": "ns"},
                  "data": {"karmada-kubeconfig": base64.b64encode(conf.encode()).decode()}}
        assert ca_scan.places([secret], old) == ["Secret ns/fleet-agent-member3-kubeconfig .data.karmada-kubeconfig"]
        assert ca_scan.places([secret], make_ca("other")) == []
