"""PKI for one KarmadaDeployment, on the ``cryptography`` package (no openssl shell-outs).

Plain Python, no Ansible imports: the ``karmada_pki`` module adapts it, tests import it
directly. One call, :func:`reconcile_pki`, takes the desired set (a dict that mirrors the
CR's ``spec.certificates`` plus the service names) and what is stored today (``existing``:
kubeadm file name -> PEM) and returns the full set, per-certificate metadata and the list
of what changed and why. Names follow kubeadm (``ca.crt``, ``apiserver.crt``,
``etcd/server.crt``, ``sa.key``, ``admin.conf``...) so existing certificate monitoring works.

Re-issue rules: a certificate is replaced only when missing, unparseable, inside the
renew window (and a new one would live longer), signed by another CA, with other SANs or
subject, or with other key parameters; a (re)generated or replaced CA re-issues its leaves.
"""

from __future__ import annotations

import base64
import datetime as dt
import ipaddress
import os
import re
import secrets
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from cryptography import x509
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

PrivateKey = rsa.RSAPrivateKey | ec.EllipticCurvePrivateKey

RSA_SIZES = (2048, 3072, 4096)
ECDSA_SIZES = {256: ec.SECP256R1, 384: ec.SECP384R1}
CURVE_SIZES = {"secp256r1": 256, "secp384r1": 384}
BACKDATE = dt.timedelta(minutes=5)  # tolerate small clock skew between nodes

from karmada_operator import components as karmada_components
from karmada_operator.pki import encryption

# The common name of the etcd members' peer certificate: etcd accepts as a peer only a client
# certificate with it (--peer-cert-allowed-cn; plan/plan.py, the etcd StatefulSet).
ETCD_PEER_CN = "etcd-peer"


def known_components() -> tuple[str, ...]:
    """Every component gets a client certificate and a kubeconfig (the registry's install order)."""
    return tuple(c.binary for c in karmada_components.installable())


COMPONENTS = known_components()

# Namespace inside karmada-apiserver that holds Karmada's own system objects.
KARMADA_SYSTEM_NAMESPACE = "karmada-system"

# CA id -> (file stem, CommonName, input key of a bring-your-own CA under `certificates`)
CAS = {
    "ca": ("ca", "karmada", "ca"),
    "etcd/ca": ("etcd/ca", "etcd-ca", "etcdCA"),
    "front-proxy-ca": ("front-proxy-ca", "front-proxy-ca", "frontProxyCA"),
}

SERVER = (ExtendedKeyUsageOID.SERVER_AUTH,)
CLIENT = (ExtendedKeyUsageOID.CLIENT_AUTH,)
BOTH = (ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH)

_DNS_LABEL = re.compile(r"^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$")


class PkiInputError(ValueError):
    """Bad input; ``field`` names the spec field (dotted path) to fix."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field


# --------------------------------------------------------------------------- input


@dataclass(frozen=True)
class KeyParams:
    algorithm: str  # RSA | ECDSA
    size: int


@dataclass(frozen=True)
class ByoCa:
    cert: x509.Certificate
    key: PrivateKey
    cert_pem: str
    key_pem: str


@dataclass(frozen=True)
class PkiSpec:
    """Validated input; build it with :func:`parse_spec`."""

    namespace: str
    name: str
    cluster_domain: str
    etcd_members: tuple[str, ...]
    etcd_headless_service: str
    etcd_client_service: str
    apiserver_service: str
    apiserver_port: int
    # component -> Service of its serving certificate (components of the set that serve only)
    serving_services: dict[str, str]
    lb_addresses: tuple[str, ...]
    lb_dns_names: tuple[str, ...]
    lb_port: int
    cert_sans: tuple[str, ...]
    admin_server_url: str
    component_server_url: str
    components: tuple[str, ...]
    ca_validity: dt.timedelta
    leaf_validity: dt.timedelta
    renew_before: dt.timedelta
    key: KeyParams
    byo_cas: dict[str, ByoCa] = field(default_factory=dict)
    force_renew: tuple[str, ...] = ()
    force_renew_issued_before: dt.datetime | None = None
    # a CA rotation's phase in this pass: (CA id, Trusting | Reissuing | Dropping), or None
    ca_rotation: tuple[str, str] | None = None
    # spec.apiServer.encryption with its defaults (pki/encryption.py settings), or None: no file
    encryption: dict[str, Any] | None = None


def _get(data: Mapping[str, Any], key: str, default: Any) -> Any:
    value = data.get(key, default)
    return default if value is None else value


def _section(data: Mapping[str, Any], key: str, path: str = "") -> Mapping[str, Any]:
    value = data.get(key) or {}
    if not isinstance(value, Mapping):
        raise PkiInputError(path or key, f"must be a mapping, got {type(value).__name__}")
    return value


def validate_dns_name(name: Any, path: str) -> str:
    """Return the lower-cased DNS name or raise naming ``path``; allows one leading ``*.``."""
    if not isinstance(name, str) or not name or len(name) > 253:
        raise PkiInputError(path, f"{name!r} is not a DNS name (1-253 characters)")
    labels = name.lower().rstrip(".").split(".")
    if labels[0] == "*" and len(labels) > 1:
        labels = labels[1:]
    for label in labels:
        if not _DNS_LABEL.match(label):
            raise PkiInputError(
                path,
                f"{name!r} is not a valid DNS name: label {label!r} must be 1-63 of a-z, 0-9 and '-', "
                "starting and ending with a letter or digit",
            )
    return name.lower().rstrip(".")


def validate_ip(value: Any, path: str) -> str:
    try:
        return str(ipaddress.ip_address(str(value).strip()))
    except ValueError:
        raise PkiInputError(path, f"{value!r} is not an IPv4 or IPv6 address") from None


def _is_ip(value: str) -> bool:
    try:
        ipaddress.ip_address(value)
    except ValueError:
        return False
    return True


def _str_list(data: Mapping[str, Any], key: str, path: str) -> list[str]:
    value = data.get(key) or []
    if isinstance(value, str) or not isinstance(value, Iterable):
        raise PkiInputError(path, f"must be a list of strings, got {value!r}")
    return [str(item) for item in value]


def _positive_int(value: Any, path: str, minimum: int = 1) -> int:
    if isinstance(value, bool):
        raise PkiInputError(path, f"must be an integer >= {minimum}, got {value!r}")
    try:
        number = int(value)
    except (TypeError, ValueError):
        raise PkiInputError(path, f"must be an integer >= {minimum}, got {value!r}") from None
    if number < minimum or number != float(value):
        raise PkiInputError(path, f"must be an integer >= {minimum}, got {value!r}")
    return number


def _port(value: Any, path: str) -> int:
    port = _positive_int(value, path)
    if port > 65535:
        raise PkiInputError(path, f"must be a TCP port 1-65535, got {value!r}")
    return port


def _key_params(certs: Mapping[str, Any]) -> KeyParams:
    algorithm = str(_get(certs, "keyAlgorithm", "RSA")).upper()
    if algorithm not in ("RSA", "ECDSA"):
        raise PkiInputError("certificates.keyAlgorithm", f"must be RSA or ECDSA, got {algorithm!r}")
    default = 3072 if algorithm == "RSA" else 256
    size = _positive_int(_get(certs, "keySize", default), "certificates.keySize")
    allowed = RSA_SIZES if algorithm == "RSA" else tuple(ECDSA_SIZES)
    if size not in allowed:
        raise PkiInputError(
            "certificates.keySize",
            f"{size} is not supported with keyAlgorithm {algorithm}; "
            f"use one of {', '.join(map(str, allowed))}",
        )
    return KeyParams(algorithm, size)


# A duration as spec.certificates.leafValidity/renewBefore take it: Go's form restricted to
# hours, minutes and seconds ("720h", "20m", "1h30m"), which CEL's duration() also reads.
# Defaults of spec.certificates (the CRD's defaults are generated from these).
DEFAULT_CA_DAYS, DEFAULT_LEAF_DAYS, DEFAULT_RENEW_DAYS = 3650, 365, 30
DURATION_PATTERN = r"^([0-9]+(\.[0-9]+)?(h|m|s))+$"
_DURATION_PART = re.compile(r"([0-9]+(?:\.[0-9]+)?)(h|m|s)")
_DURATION_UNIT = {"h": 3600.0, "m": 60.0, "s": 1.0}


def parse_duration(value: Any, path: str) -> dt.timedelta:
    text = str(value).strip()
    if not re.fullmatch(DURATION_PATTERN, text):
        raise PkiInputError(path, f"{value!r} is not a duration like 720h, 20m or 1h30m")
    seconds = sum(float(n) * _DURATION_UNIT[u] for n, u in _DURATION_PART.findall(text))
    if seconds <= 0:
        raise PkiInputError(path, f"{value!r} must be longer than zero")
    return dt.timedelta(seconds=seconds)


def _human(delta: dt.timedelta) -> str:
    days, rest = divmod(int(delta.total_seconds()), 86400)
    return f"{days} days" if not rest else (f"{days}d{rest}s" if days else f"{rest}s")


def _validity(certs: Mapping[str, Any]) -> tuple[dt.timedelta, dt.timedelta, dt.timedelta]:
    """CA lifetime, leaf lifetime and renewal window. ``leafValidity``/``renewBefore`` (durations)
    win over ``leafValidityDays``/``renewBeforeDays`` (which the CRD defaults) when set."""
    ca = dt.timedelta(days=_positive_int(_get(certs, "caValidityDays", DEFAULT_CA_DAYS), "certificates.caValidityDays"))
    leaf_field, renew_field = "certificates.leafValidityDays", "certificates.renewBeforeDays"
    if certs.get("leafValidity") not in (None, ""):
        leaf_field = "certificates.leafValidity"
        leaf = parse_duration(certs["leafValidity"], leaf_field)
    else:
        leaf = dt.timedelta(days=_positive_int(_get(certs, "leafValidityDays", DEFAULT_LEAF_DAYS), leaf_field))
    if certs.get("renewBefore") not in (None, ""):
        renew_field = "certificates.renewBefore"
        renew = parse_duration(certs["renewBefore"], renew_field)
    else:
        renew = dt.timedelta(days=_positive_int(_get(certs, "renewBeforeDays", DEFAULT_RENEW_DAYS), renew_field, 0))
    if leaf > ca:
        raise PkiInputError(
            leaf_field,
            f"{_human(leaf)} would outlive the CA ({_human(ca)}, certificates.caValidityDays); "
            f"lower {leaf_field.split('.')[-1]} or raise caValidityDays",
        )
    if renew >= leaf:
        raise PkiInputError(
            renew_field,
            f"{_human(renew)} must be shorter than the leaf lifetime ({_human(leaf)}, {leaf_field}), "
            "or every certificate would be re-issued on every reconcile",
        )
    return ca, leaf, renew


def renewal_window(certs: Mapping[str, Any]) -> dt.timedelta:
    """How long before its notAfter a certificate is renewed (spec.certificates)."""
    return _validity(certs)[2]


def _etcd_members(etcd: Mapping[str, Any], name: str) -> tuple[str, ...]:
    replicas = _positive_int(_get(etcd, "replicas", 1), "etcd.replicas")
    sts = validate_dns_name(_get(etcd, "statefulSetName", f"{name}-etcd"), "etcd.statefulSetName")
    members = _str_list(etcd, "memberNames", "etcd.memberNames") or [f"{sts}-{i}" for i in range(replicas)]
    if len(members) != replicas:
        raise PkiInputError("etcd.memberNames", f"has {len(members)} names but etcd.replicas is {replicas}")
    return tuple(validate_dns_name(m, f"etcd.memberNames[{i}]") for i, m in enumerate(members))


def _sans(raw: list[str], path: str) -> tuple[str, ...]:
    out = []
    for i, item in enumerate(raw):
        item = item.strip()
        out.append(
            validate_ip(item, f"{path}[{i}]") if _is_ip(item) else validate_dns_name(item, f"{path}[{i}]")
        )
    return tuple(out)


def _timestamp(value: Any, path: str) -> dt.datetime | None:
    if value in (None, ""):
        return None
    if isinstance(value, dt.datetime):
        moment = value
    else:
        try:
            moment = dt.datetime.fromisoformat(str(value).replace("Z", "+00:00"))
        except ValueError:
            raise PkiInputError(
                path, f"{value!r} is not an RFC 3339 time like 2026-05-01T00:00:00Z"
            ) from None
    return moment if moment.tzinfo else moment.replace(tzinfo=dt.UTC)


def _serving_services(data: Mapping[str, Any], name: str, components: tuple[str, ...]) -> dict[str, str]:
    """Serving certificates of the components of the set that serve (registry), by Service name.

    ``servingServices`` (component -> Service) overrides the default ``<name>-<suffix>``.
    """
    given = _section(data, "servingServices")
    registered = karmada_components.by_binary()
    for comp in given:
        if comp not in registered or not registered[comp].serving:
            raise PkiInputError(f"servingServices.{comp}", "not a component with a serving certificate")
    return {
        comp: validate_dns_name(str(given.get(comp) or f"{name}-{registered[comp].suffix}"),
                                f"servingServices.{comp}")
        for comp in components if registered[comp].serving
    }


def _url(host: str, port: int) -> str:
    return f"https://[{host}]:{port}" if ":" in host else f"https://{host}:{port}"


def parse_spec(data: Mapping[str, Any]) -> PkiSpec:
    """Validate the input dict (see docs/certificates.md) into a :class:`PkiSpec`."""
    namespace = validate_dns_name(_get(data, "namespace", "karmada-system"), "namespace")
    name = validate_dns_name(_get(data, "name", "karmada"), "name")
    domain = validate_dns_name(_get(data, "clusterDomain", "cluster.local"), "clusterDomain")
    etcd, api = _section(data, "etcd"), _section(data, "apiServer")
    certs = _section(data, "certificates")
    lb = _section(api, "externalLoadBalancer", "apiServer.externalLoadBalancer")
    lb_addresses = tuple(
        validate_ip(a, f"apiServer.externalLoadBalancer.addresses[{i}]")
        for i, a in enumerate(_str_list(lb, "addresses", "apiServer.externalLoadBalancer.addresses"))
    )
    lb_dns = tuple(
        validate_dns_name(d, f"apiServer.externalLoadBalancer.dnsNames[{i}]")
        for i, d in enumerate(_str_list(lb, "dnsNames", "apiServer.externalLoadBalancer.dnsNames"))
    )
    lb_port = _port(_get(lb, "port", 443), "apiServer.externalLoadBalancer.port")
    api_service = validate_dns_name(_get(api, "serviceName", f"{name}-apiserver"), "apiServer.serviceName")
    api_port = _port(_get(api, "port", 5443), "apiServer.port")
    in_cluster = _url(f"{api_service}.{namespace}.svc.{domain}", api_port)
    lb_hosts = lb_dns + lb_addresses
    admin_url = str(api.get("adminServerURL") or (_url(lb_hosts[0], lb_port) if lb_hosts else in_cluster))
    known = known_components()
    components = tuple(data.get("components") or known)
    for i, comp in enumerate(components):
        if comp not in known:
            raise PkiInputError(
                f"components[{i}]", f"unknown component {comp!r}; known: {', '.join(known)}"
            )
    serving = _serving_services(data, name, components)
    ca_validity, leaf_validity, renew_before = _validity(certs)
    force = tuple(_str_list(data, "forceRenew", "forceRenew"))
    return PkiSpec(
        namespace=namespace,
        name=name,
        cluster_domain=domain,
        etcd_members=_etcd_members(etcd, name),
        etcd_headless_service=validate_dns_name(
            _get(etcd, "headlessServiceName", f"{name}-etcd"), "etcd.headlessServiceName"
        ),
        etcd_client_service=validate_dns_name(
            _get(etcd, "clientServiceName", f"{name}-etcd-client"), "etcd.clientServiceName"
        ),
        apiserver_service=api_service,
        apiserver_port=api_port,
        serving_services=serving,
        lb_addresses=lb_addresses,
        lb_dns_names=lb_dns,
        lb_port=lb_port,
        cert_sans=_sans(_str_list(api, "certSANs", "apiServer.certSANs"), "apiServer.certSANs"),
        admin_server_url=admin_url,
        component_server_url=str(api.get("componentServerURL") or in_cluster),
        components=components,
        ca_validity=ca_validity,
        leaf_validity=leaf_validity,
        renew_before=renew_before,
        key=_key_params(certs),
        byo_cas=_byo_cas(certs),
        force_renew=force,
        force_renew_issued_before=_timestamp(data.get("forceRenewIssuedBefore"), "forceRenewIssuedBefore"),
        ca_rotation=_ca_rotation(data.get("caRotation"), certs),
        encryption=_encryption_settings(api),
    )


def _encryption_settings(api: Mapping[str, Any]) -> dict[str, Any] | None:
    """apiServer.encryption as the plan made it (encryption.settings: enabled, resources, rotation,
    provider, kms; the plan and the CRD have refused a list without secrets and KMSv2 without kms)."""
    enc = api.get("encryption")
    if enc is None:
        return None
    resources = list(enc.get("resources") or encryption.DEFAULT_RESOURCES)
    rotation = str(enc.get("rotation") or "")
    if rotation and rotation not in encryption.ROTATION_PHASES:
        raise PkiInputError("apiServer.encryption.rotation", f"unknown phase {rotation!r}")
    try:
        provider, kms = encryption.provider_settings(enc)
    except encryption.EncryptionError as err:
        raise PkiInputError("apiServer.encryption.provider", err.message) from err
    return {"enabled": bool(enc.get("enabled", True)), "resources": resources, "rotation": rotation,
            "provider": provider, "kms": kms}


ROTATION_PHASES = ("Trusting", "Reissuing", "Dropping")


def _ca_rotation(value: Any, certs: Mapping[str, Any]) -> tuple[str, str] | None:
    """``{ca: <CA id>, phase}`` (karmada_ca_rotation.pki_input) -> (CA id, phase)."""
    if not value:
        return None
    if not isinstance(value, Mapping):
        raise PkiInputError("caRotation", f"must be a mapping {{ca, phase}}, got {value!r}")
    ca_id, phase = value.get("ca"), value.get("phase")
    if ca_id not in CAS:
        raise PkiInputError("caRotation.ca", f"{ca_id!r} is not one of {', '.join(CAS)}")
    if phase not in ROTATION_PHASES:
        raise PkiInputError("caRotation.phase", f"{phase!r} is not one of {', '.join(ROTATION_PHASES)}")
    if certs.get(CAS[ca_id][2]):
        raise PkiInputError(f"certificates.{CAS[ca_id][2]}",
                            "a bring-your-own CA cannot be rotated by the operator; replace it instead")
    return str(ca_id), str(phase)


# --------------------------------------------------------------------------- keys and PEM


def generate_key(params: KeyParams) -> PrivateKey:
    if params.algorithm == "RSA":
        return rsa.generate_private_key(public_exponent=65537, key_size=params.size)
    return ec.generate_private_key(ECDSA_SIZES[params.size]())


def key_params_of(key: Any) -> KeyParams | None:
    if isinstance(key, (rsa.RSAPrivateKey, rsa.RSAPublicKey)):
        return KeyParams("RSA", key.key_size)
    if isinstance(key, (ec.EllipticCurvePrivateKey, ec.EllipticCurvePublicKey)):
        return KeyParams("ECDSA", CURVE_SIZES.get(key.curve.name, key.curve.key_size))
    return None


def key_pem(key: PrivateKey) -> str:
    fmt = serialization.PrivateFormat.TraditionalOpenSSL  # RSA/EC PRIVATE KEY, as kubeadm writes
    return key.private_bytes(serialization.Encoding.PEM, fmt, serialization.NoEncryption()).decode()


def public_pem(key: PrivateKey) -> str:
    return (
        key.public_key()
        .public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
        .decode()
    )


def cert_pem(cert: x509.Certificate) -> str:
    return cert.public_bytes(serialization.Encoding.PEM).decode()


def load_cert(pem: str | bytes) -> x509.Certificate:
    return x509.load_pem_x509_certificate(pem.encode() if isinstance(pem, str) else pem)


def load_bundle(pem: str | bytes) -> list[x509.Certificate]:
    """Every certificate of a PEM bundle (a CA's ``ca.crt`` holds two during a rotation)."""
    certs = x509.load_pem_x509_certificates(pem.encode() if isinstance(pem, str) else pem)
    if not certs:
        raise ValueError("no PEM certificate")
    return certs


def bundle_pem(certs: Iterable[x509.Certificate]) -> str:
    return "".join(cert_pem(c) for c in certs)


def signer_of(bundle: str | bytes, key: str | bytes) -> x509.Certificate:
    """The certificate of a bundle that belongs to ``key`` (the CA that signs now)."""
    private = load_key(key, validate=False)
    for cert in load_bundle(bundle):
        if key_matches(cert, private):
            return cert
    raise ValueError("no certificate of the bundle matches the CA key")


def load_key(pem: str | bytes, validate: bool = True) -> PrivateKey:
    """Load an unencrypted RSA/ECDSA key; ``validate=False`` skips the slow RSA consistency check
    (fine for keys this module wrote and stored itself: a no-op reconcile drops from ~2 s to ~0.1 s)."""
    data = pem.encode() if isinstance(pem, str) else pem
    key = serialization.load_pem_private_key(data, password=None, unsafe_skip_rsa_key_validation=not validate)
    if not isinstance(key, (rsa.RSAPrivateKey, ec.EllipticCurvePrivateKey)):
        raise ValueError(f"unsupported private key type {type(key).__name__}; use RSA or ECDSA")
    return key


def _spki(key: Any) -> bytes:
    return key.public_bytes(serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo)


def key_matches(cert: x509.Certificate, key: PrivateKey) -> bool:
    return _spki(cert.public_key()) == _spki(key.public_key())


def _byo_pem(entry: Mapping[str, Any], names: tuple[str, ...]) -> str | None:
    for name in names:
        if entry.get(name):
            return str(entry[name])
    return None


def _byo_cas(certs: Mapping[str, Any]) -> dict[str, ByoCa]:
    out = {}
    for ca_id, (_, _, key_name) in CAS.items():
        entry = certs.get(key_name)
        if entry:
            out[ca_id] = parse_byo_ca(entry, f"certificates.{key_name}")
    return out


def parse_byo_ca(entry: Mapping[str, Any], path: str) -> ByoCa:
    """Validate a bring-your-own CA: ``{cert, key}`` PEM (or Secret keys tls.crt/tls.key, ca.crt/ca.key)."""
    crt = _byo_pem(entry, ("cert", "tls.crt", "ca.crt"))
    key = _byo_pem(entry, ("key", "tls.key", "ca.key"))
    if not crt:
        raise PkiInputError(f"{path}.cert", "the CA secret has no certificate (tls.crt or ca.crt); add it")
    if not key:
        raise PkiInputError(
            f"{path}.key",
            "the CA secret has a certificate but no private key (tls.key or ca.key); "
            "the operator needs the CA key to sign leaves",
        )
    try:
        cert = load_cert(crt)
    except ValueError as exc:
        raise PkiInputError(f"{path}.cert", f"is not a PEM certificate ({exc})") from None
    try:
        private = load_key(key)
    except (ValueError, TypeError) as exc:
        raise PkiInputError(
            f"{path}.key", f"is not an unencrypted PEM RSA/ECDSA private key ({exc})"
        ) from None
    if not is_ca(cert):
        raise PkiInputError(
            f"{path}.cert", "is not a CA certificate (BasicConstraints CA:TRUE and keyCertSign are required)"
        )
    if not key_matches(cert, private):
        raise PkiInputError(f"{path}.key", "does not match the CA certificate's public key; supply the pair")
    return ByoCa(cert, private, crt, key)


def is_ca(cert: x509.Certificate) -> bool:
    try:
        constraints = cert.extensions.get_extension_for_class(x509.BasicConstraints).value
    except x509.ExtensionNotFound:
        return False
    try:
        usage = cert.extensions.get_extension_for_class(x509.KeyUsage).value
    except x509.ExtensionNotFound:
        return constraints.ca
    return constraints.ca and usage.key_cert_sign


# --------------------------------------------------------------------------- what to issue


@dataclass(frozen=True)
class LeafProfile:
    """One leaf certificate of the set."""

    name: str  # file stem: apiserver -> apiserver.crt / apiserver.key
    ca: str  # CA id (key of CAS)
    common_name: str
    usages: tuple[x509.ObjectIdentifier, ...]
    organizations: tuple[str, ...] = ()
    dns_names: tuple[str, ...] = ()
    ips: tuple[str, ...] = ()


@dataclass(frozen=True)
class KubeconfigProfile:
    name: str  # admin -> admin.conf
    leaf: str  # client certificate stem
    user: str
    server: str


def service_names(service: str, namespace: str, domain: str) -> list[str]:
    """All forms a pod may use for a Service: svc, svc.ns, svc.ns.svc, svc.ns.svc.<domain>."""
    return [
        service,
        f"{service}.{namespace}",
        f"{service}.{namespace}.svc",
        f"{service}.{namespace}.svc.{domain}",
    ]


def _split_sans(values: Iterable[str]) -> tuple[tuple[str, ...], tuple[str, ...]]:
    dns, ips = [], []
    for value in values:
        (ips if _is_ip(value) else dns).append(value)
    return tuple(dict.fromkeys(dns)), tuple(dict.fromkeys(str(ipaddress.ip_address(i)) for i in ips))


def _local() -> list[str]:
    return ["localhost", "127.0.0.1", "::1"]


def apiserver_sans(spec: PkiSpec) -> list[str]:
    ns, domain = spec.namespace, spec.cluster_domain
    names = ["kubernetes", "kubernetes.default", "kubernetes.default.svc", f"kubernetes.default.svc.{domain}"]
    names += service_names(spec.apiserver_service, ns, domain)
    return names + _local() + list(spec.lb_dns_names) + list(spec.lb_addresses) + list(spec.cert_sans)


def etcd_sans(spec: PkiSpec) -> list[str]:
    ns, domain, headless = spec.namespace, spec.cluster_domain, spec.etcd_headless_service
    names: list[str] = []
    for member in spec.etcd_members:
        names += [member] + [f"{member}.{n}" for n in service_names(headless, ns, domain)]
    names += service_names(spec.etcd_client_service, ns, domain) + service_names(headless, ns, domain)
    return names + _local()


def leaf_profiles(spec: PkiSpec) -> list[LeafProfile]:
    """The leaves of the set, in a stable order."""
    ns, domain = spec.namespace, spec.cluster_domain
    profiles = [
        LeafProfile("apiserver", "ca", "karmada-apiserver", SERVER, (), *_split_sans(apiserver_sans(spec))),
        LeafProfile("apiserver-etcd-client", "etcd/ca", "karmada-apiserver-etcd-client", CLIENT),
        LeafProfile("front-proxy-client", "front-proxy-ca", "front-proxy-client", CLIENT),
        LeafProfile("admin", "ca", karmada_components.ADMIN_USER, CLIENT, ("system:masters",)),
    ]
    for comp in spec.components:
        # Karmada binds its components through system:masters (hack/deploy-karmada.sh, operator)
        profiles.append(
            LeafProfile(f"{comp}-client", "ca", f"system:karmada:{comp}", CLIENT, ("system:masters",))
        )
    aggregated = {c.binary for c in karmada_components.components() if c.api_services}
    for comp, service in spec.serving_services.items():
        sans = service_names(service, ns, domain) + _local()
        if comp in aggregated and ns != KARMADA_SYSTEM_NAMESPACE:
            # karmada-apiserver's aggregator dials the APIService's Service inside Karmada
            # (an ExternalName in karmada-system) and checks the certificate against that name.
            sans += service_names(service, KARMADA_SYSTEM_NAMESPACE, domain)
        profiles.append(LeafProfile(comp, "ca", f"system:karmada:{comp}", SERVER, (), *_split_sans(sans)))
    member_sans = _split_sans(etcd_sans(spec))
    profiles += [
        LeafProfile("etcd/server", "etcd/ca", "etcd-server", BOTH, (), *member_sans),
        LeafProfile("etcd/peer", "etcd/ca", ETCD_PEER_CN, BOTH, (), *member_sans),
        LeafProfile("etcd/healthcheck-client", "etcd/ca", "etcd-healthcheck-client", CLIENT),
    ]
    return profiles


def leaves_of(spec: PkiSpec, ca_id: str) -> list[str]:
    """The leaves a CA signs (what a rotation of it re-issues); the Karmada CA also signs the
    client certificate of every kubeconfig."""
    return [p.name for p in leaf_profiles(spec) if p.ca == ca_id]


def kubeconfig_profiles(spec: PkiSpec) -> list[KubeconfigProfile]:
    """admin.conf goes to the external balancer when there is one; components stay in-cluster."""
    out = [KubeconfigProfile("admin", "admin", karmada_components.ADMIN_USER, spec.admin_server_url)]
    out += [KubeconfigProfile(c, f"{c}-client", c, spec.component_server_url) for c in spec.components]
    return out


# --------------------------------------------------------------------------- issuing


def _name(common_name: str, organizations: Iterable[str] = ()) -> x509.Name:
    attrs = [x509.NameAttribute(NameOID.ORGANIZATION_NAME, o) for o in organizations]
    return x509.Name(attrs + [x509.NameAttribute(NameOID.COMMON_NAME, common_name)])


def _key_usage(cert_sign: bool, encipher: bool) -> x509.KeyUsage:
    return x509.KeyUsage(
        digital_signature=True,
        content_commitment=False,
        key_encipherment=encipher,
        data_encipherment=False,
        key_agreement=False,
        key_cert_sign=cert_sign,
        crl_sign=False,
        encipher_only=False,
        decipher_only=False,
    )


def _hash_for(key: PrivateKey) -> hashes.HashAlgorithm:
    if isinstance(key, ec.EllipticCurvePrivateKey) and key.curve.key_size >= 384:
        return hashes.SHA384()
    return hashes.SHA256()


def issue_ca(common_name: str, key: PrivateKey, now: dt.datetime, validity: dt.timedelta) -> x509.Certificate:
    subject = _name(common_name)
    public = key.public_key()
    builder = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(subject)
        .public_key(public)
        .serial_number(_serial())
        .not_valid_before(now - BACKDATE)
        .not_valid_after(now + validity)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .add_extension(_key_usage(True, isinstance(key, rsa.RSAPrivateKey)), critical=True)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(public), critical=False)
    )
    return builder.sign(key, _hash_for(key))


def _serial() -> int:
    return secrets.randbits(127) | 1  # positive, non-zero, < 20 octets (RFC 5280)


def issue_leaf(
    profile: LeafProfile,
    key: PrivateKey,
    ca_cert: x509.Certificate,
    ca_key: PrivateKey,
    now: dt.datetime,
    not_after: dt.datetime,
) -> x509.Certificate:
    public = key.public_key()
    builder = (
        x509.CertificateBuilder()
        .subject_name(_name(profile.common_name, profile.organizations))
        .issuer_name(ca_cert.subject)
        .public_key(public)
        .serial_number(_serial())
        .not_valid_before(now - BACKDATE)
        .not_valid_after(not_after)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(_key_usage(False, isinstance(key, rsa.RSAPrivateKey)), critical=True)
        .add_extension(x509.ExtendedKeyUsage(list(profile.usages)), critical=False)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(public), critical=False)
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), critical=False
        )
    )
    sans: list[x509.GeneralName] = [x509.DNSName(d) for d in profile.dns_names]
    sans += [x509.IPAddress(ipaddress.ip_address(i)) for i in profile.ips]
    if sans:
        builder = builder.add_extension(x509.SubjectAlternativeName(sans), critical=False)
    return builder.sign(ca_key, _hash_for(ca_key))


# --------------------------------------------------------------------------- checking what exists


def cert_sans(cert: x509.Certificate) -> tuple[set[str], set[str]]:
    try:
        ext = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    except x509.ExtensionNotFound:
        return set(), set()
    dns = {d.lower() for d in ext.get_values_for_type(x509.DNSName)}
    return dns, {str(i) for i in ext.get_values_for_type(x509.IPAddress)}


def common_name(cert: x509.Certificate) -> str:
    """The subject's common name ("" when it has none)."""
    attrs = cert.subject.get_attributes_for_oid(NameOID.COMMON_NAME)
    return str(attrs[0].value) if attrs else ""


def issued_by(cert: x509.Certificate, ca: x509.Certificate) -> bool:
    try:
        cert.verify_directly_issued_by(ca)
    except (ValueError, TypeError, InvalidSignature):
        return False
    return True


def _load_pair(existing: Mapping[str, str], stem: str) -> tuple[x509.Certificate, PrivateKey] | str:
    """The stored pair, or a reason it cannot be used."""
    crt, key = existing.get(f"{stem}.crt"), existing.get(f"{stem}.key")
    if not crt or not key:
        return "missing"
    try:
        cert, private = load_cert(crt), load_key(key, validate=False)
    except (ValueError, TypeError):
        return "unparseable"
    if not key_matches(cert, private):
        return "key-mismatch"
    return cert, private


def leaf_reasons(
    profile: LeafProfile,
    cert: x509.Certificate,
    ca: x509.Certificate,
    spec: PkiSpec,
    now: dt.datetime,
) -> list[str]:
    """Why a stored, parseable leaf whose key matches must be re-issued (empty: keep it)."""
    reasons = []
    if not issued_by(cert, ca):
        reasons.append("wrong-issuer")
    remaining = cert.not_valid_after_utc - now
    # re-issuing only helps when the new one lives longer (a BYO CA near its end caps both)
    if remaining <= spec.renew_before and leaf_not_after(spec, ca, now) > cert.not_valid_after_utc:
        reasons.append("renew-window")
    dns, ips = cert_sans(cert)
    if dns != set(profile.dns_names) or ips != set(profile.ips):
        reasons.append("san-mismatch")
    if cert.subject != _name(profile.common_name, profile.organizations):
        reasons.append("subject-mismatch")
    if key_params_of(cert.public_key()) != spec.key:
        reasons.append("key-mismatch")
    if forced(spec, profile.name, cert) or forced(spec, ALL_LEAVES, cert):
        reasons.append("forced")
    return reasons


# In forceRenew: every leaf (and so every kubeconfig), not the CAs and not the sa keys.
ALL_LEAVES = "leaves"


def forced(spec: PkiSpec, name: str, cert: x509.Certificate | None) -> bool:
    """Listed in forceRenew and, with forceRenewIssuedBefore, issued before that time (idempotent)."""
    if name not in spec.force_renew:
        return False
    if spec.force_renew_issued_before is None or cert is None:
        return True
    return cert.not_valid_before_utc + BACKDATE < spec.force_renew_issued_before


def leaf_not_after(spec: PkiSpec, ca: x509.Certificate, now: dt.datetime) -> dt.datetime:
    """A leaf never outlives its CA: clamp to the CA's notAfter."""
    return min(now + spec.leaf_validity, ca.not_valid_after_utc)


def ca_reasons(cert: x509.Certificate, ca_id: str, spec: PkiSpec, now: dt.datetime) -> list[str]:
    reasons = []
    if not is_ca(cert):
        reasons.append("not-a-ca")
    if cert.not_valid_after_utc - now <= spec.renew_before:
        reasons.append("renew-window")
    if forced(spec, ca_id, cert):
        reasons.append("forced")
    return reasons


# --------------------------------------------------------------------------- the whole set


@dataclass
class PkiResult:
    files: dict[str, str]
    certificates: list[dict[str, Any]]
    changes: list[dict[str, Any]]
    warnings: list[str]
    removed: list[str]
    # with a caRotation input: {oldSerial, newSerial, state} of the rotated CA after this run
    rotation: dict[str, str] = field(default_factory=dict)

    @property
    def changed(self) -> bool:
        return bool(self.changes or self.removed)

    def as_dict(self) -> dict[str, Any]:
        return {
            "files": self.files,
            "certificates": self.certificates,
            "changes": self.changes,
            "warnings": self.warnings,
            "removed": self.removed,
            "changed": self.changed,
            "rotation": self.rotation,
        }


@dataclass
class _Run:
    spec: PkiSpec
    existing: Mapping[str, str]
    now: dt.datetime
    key_factory: Callable[[KeyParams], PrivateKey]
    files: dict[str, str] = field(default_factory=dict)
    changes: list[dict[str, Any]] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    cas: dict[str, tuple[x509.Certificate, PrivateKey]] = field(default_factory=dict)
    rotated: set[str] = field(default_factory=set)
    meta: dict[str, dict[str, Any]] = field(default_factory=dict)
    # the rotated CA's serials and stored state after this run (caRotation input only)
    rotation: dict[str, str] = field(default_factory=dict)

    def keep(self, stem: str) -> None:
        for ext in (".crt", ".key"):
            self.files[stem + ext] = self.existing[stem + ext]

    def store(self, stem: str, cert: x509.Certificate, key: PrivateKey, reasons: list[str]) -> None:
        self.files[f"{stem}.crt"], self.files[f"{stem}.key"] = cert_pem(cert), key_pem(key)
        self.changes.append({"name": stem, "reasons": reasons})


def _ensure_ca(run: _Run, ca_id: str) -> None:
    stem, common_name, key_name = CAS[ca_id]
    byo = run.spec.byo_cas.get(ca_id)
    if byo is not None:
        _use_byo_ca(run, ca_id, byo, key_name)
        return
    stored = _load_ca(run.existing, stem)
    rotating = run.spec.ca_rotation is not None and run.spec.ca_rotation[0] == ca_id
    if rotating and not isinstance(stored, str):
        _rotate_ca(run, ca_id, stored[0], stored[1], run.spec.ca_rotation[1])  # type: ignore[index]
        return
    if isinstance(stored, str):
        reasons = [stored]
    else:
        reasons = ca_reasons(signer(stored[0], stored[1]), ca_id, run.spec, run.now)
    if not reasons and not isinstance(stored, str):
        run.keep(stem)  # the bundle as stored (one CA outside a rotation)
        run.cas[ca_id] = (signer(stored[0], stored[1]), stored[1])
        return
    key = run.key_factory(run.spec.key)
    cert = issue_ca(common_name, key, run.now, run.spec.ca_validity)
    run.store(stem, cert, key, reasons)
    run.cas[ca_id] = (cert, key)
    run.rotated.add(ca_id)


def _load_ca(existing: Mapping[str, str], stem: str) -> tuple[list[x509.Certificate], PrivateKey] | str:
    """The stored CA bundle and signing key, or a reason they cannot be used."""
    crt, key = existing.get(f"{stem}.crt"), existing.get(f"{stem}.key")
    if not crt or not key:
        return "missing"
    try:
        certs, private = load_bundle(crt), load_key(key, validate=False)
    except (ValueError, TypeError):
        return "unparseable"
    if not any(key_matches(c, private) for c in certs):
        return "key-mismatch"
    return certs, private


def signer(bundle: list[x509.Certificate], key: PrivateKey) -> x509.Certificate:
    return next(c for c in bundle if key_matches(c, key))


def _stored_key(existing: Mapping[str, str], name: str, bundle: list[x509.Certificate],
                not_this: x509.Certificate) -> tuple[x509.Certificate, PrivateKey] | None:
    """A stored extra CA key (``<stem>-next.key``, ``<stem>-previous.key``) and its certificate in
    the bundle (not the signer's), or None."""
    text = existing.get(name)
    if not text:
        return None
    try:
        private = load_key(text, validate=False)
    except (ValueError, TypeError):
        return None
    for cert in bundle:
        if cert != not_this and key_matches(cert, private):
            return cert, private
    return None


def _rotate_ca(run: _Run, ca_id: str, bundle: list[x509.Certificate], key: PrivateKey, phase: str) -> None:
    """One phase of a CA rotation (karmada_ca_rotation), from whatever state the files are in.

    Stored state: ``<stem>.crt`` the bundle, ``<stem>.key`` the key that signs now,
    ``<stem>-next.key`` the new CA's key while it is only trusted (Trusting),
    ``<stem>-previous.key`` the old CA's key while it is only trusted (Reissuing). Each phase only
    moves forward: a phase asked for again (a retried pass) or late (a stale copy of the
    KarmadaDeployment) keeps what is stored.
    """
    stem, common_name, _ = CAS[ca_id]
    current = signer(bundle, key)
    nxt = _stored_key(run.existing, f"{stem}-next.key", bundle, current)
    prev = _stored_key(run.existing, f"{stem}-previous.key", bundle, current)
    run.cas[ca_id] = (current, key)
    state = "reissuing" if prev else ("trusting" if nxt else "single")
    if phase == "Trusting" and state == "single":
        new_key = run.key_factory(run.spec.key)
        new_cert = issue_ca(common_name, new_key, run.now, run.spec.ca_validity)
        run.files[f"{stem}.crt"] = bundle_pem([current, new_cert])
        run.files[f"{stem}.key"] = run.existing[f"{stem}.key"]
        run.files[f"{stem}-next.key"] = key_pem(new_key)
        run.changes.append({"name": stem, "reasons": ["ca-rotation-trusting"]})
        run.rotation = {"oldSerial": _hex(current), "newSerial": _hex(new_cert), "state": "trusting"}
        return
    if phase == "Reissuing" and state == "trusting":
        new_cert, new_key = nxt  # type: ignore[misc]
        run.files[f"{stem}.crt"] = bundle_pem([current, new_cert])
        run.files[f"{stem}.key"] = key_pem(new_key)
        run.files[f"{stem}-previous.key"] = run.existing[f"{stem}.key"]
        run.changes.append({"name": stem, "reasons": ["ca-rotation-reissuing"]})
        run.cas[ca_id] = (new_cert, new_key)
        run.rotated.add(ca_id)  # every leaf of this CA: ca-rotated
        run.rotation = {"oldSerial": _hex(current), "newSerial": _hex(new_cert), "state": "reissuing"}
        return
    if phase == "Dropping" and (state != "single" or len(bundle) > 1):
        run.files[f"{stem}.crt"] = cert_pem(current)
        run.files[f"{stem}.key"] = run.existing[f"{stem}.key"]
        run.changes.append({"name": stem, "reasons": ["ca-rotation-dropping"]})
        olds = [c for c in bundle if c != current]
        run.rotation = {"oldSerial": _hex(olds[0]) if olds else "", "newSerial": _hex(current), "state": "single"}
        return
    # already done (a retried pass, or a phase seen late): keep what is stored
    run.keep(stem)
    extra = {"trusting": (f"{stem}-next.key", nxt), "reissuing": (f"{stem}-previous.key", prev)}.get(state)
    if extra:
        run.files[extra[0]] = run.existing[extra[0]]
    other = (nxt or prev or (None,))[0]
    if state == "trusting":
        run.rotation = {"oldSerial": _hex(current), "newSerial": _hex(other), "state": state}
    else:
        run.rotation = {"oldSerial": _hex(other) if other is not None else "", "newSerial": _hex(current),
                        "state": state}


def _hex(cert: x509.Certificate) -> str:
    return format(cert.serial_number, "x")


def _use_byo_ca(run: _Run, ca_id: str, byo: ByoCa, key_name: str) -> None:
    stem = CAS[ca_id][0]
    if byo.cert.not_valid_after_utc <= run.now:
        raise PkiInputError(
            f"certificates.{key_name}.cert",
            f"the CA expired at {iso(byo.cert.not_valid_after_utc)}; supply a valid CA",
        )
    if byo.cert.not_valid_after_utc - run.now <= run.spec.renew_before:
        run.warnings.append(
            f"{stem}: the bring-your-own CA (certificates.{key_name}) expires at "
            f"{iso(byo.cert.not_valid_after_utc)}, inside renewBeforeDays; replace it"
        )
    run.cas[ca_id] = (byo.cert, byo.key)
    stored = _load_pair(run.existing, stem)
    if not isinstance(stored, str) and stored[0] == byo.cert:
        run.keep(stem)  # the stored key matches the same certificate: keep the stored bytes
        return
    run.files[f"{stem}.crt"], run.files[f"{stem}.key"] = byo.cert_pem, byo.key_pem
    run.changes.append({"name": stem, "reasons": [stored if stored == "missing" else "ca-replaced"]})
    run.rotated.add(ca_id)


def _ensure_leaf(run: _Run, profile: LeafProfile) -> None:
    ca_cert, ca_key = run.cas[profile.ca]
    pair = _load_pair(run.existing, profile.name)
    if isinstance(pair, str):
        reasons = [pair]
    elif profile.ca in run.rotated:
        reasons = ["ca-rotated"]
    else:
        reasons = leaf_reasons(profile, pair[0], ca_cert, run.spec, run.now)
    if not reasons and not isinstance(pair, str):
        run.keep(profile.name)
        return
    not_after = leaf_not_after(run.spec, ca_cert, run.now)
    if not_after < run.now + run.spec.leaf_validity:
        run.warnings.append(
            f"{profile.name}: notAfter clamped to its CA's notAfter {iso(not_after)} "
            f"(shorter than leafValidityDays); rotate the CA ({CAS[profile.ca][0]}) to get full validity"
        )
    key = run.key_factory(run.spec.key)
    run.store(profile.name, issue_leaf(profile, key, ca_cert, ca_key, run.now, not_after), key, reasons)


def _ensure_service_account(run: _Run) -> None:
    """sa.key / sa.pub: kept as long as they match; never rotated for key-parameter changes (tokens)."""
    key_pem_text, pub = run.existing.get("sa.key"), run.existing.get("sa.pub")
    reasons: list[str] = []
    if not key_pem_text or not pub:
        reasons = ["missing"]
    else:
        try:
            if public_pem(load_key(key_pem_text, validate=False)).strip() != pub.strip():
                reasons = ["key-mismatch"]
        except (ValueError, TypeError):
            reasons = ["unparseable"]
    if not reasons and forced(run.spec, "sa", None):
        reasons.append("forced")  # sa.* carry no issue time: one-shot, tokens signed before stop working
    if not reasons:
        run.files["sa.key"], run.files["sa.pub"] = key_pem_text, pub  # type: ignore[assignment]
        return
    key = run.key_factory(run.spec.key)
    run.files["sa.key"], run.files["sa.pub"] = key_pem(key), public_pem(key)
    run.changes.append({"name": "sa", "reasons": reasons})


def _ensure_encryption(run: _Run) -> None:
    """The EncryptionConfiguration of karmada-apiserver (pki/encryption.py): its key kept as long
    as it is stored, made when it is not; rendered again when the settings change."""
    if run.spec.encryption is None:
        return
    text, reasons = encryption.ensure(run.existing.get(encryption.FILE), run.spec.encryption)
    run.files[encryption.FILE] = text
    if reasons:
        run.changes.append({"name": "encryption-config", "reasons": reasons})


def iso(moment: dt.datetime) -> str:
    return moment.astimezone(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def certificate_metadata(name: str, cert: x509.Certificate, issuer: str) -> dict[str, Any]:
    dns, ips = cert_sans(cert)
    params = key_params_of(cert.public_key())
    return {
        "name": name,
        "file": f"{name}.crt",
        "subject": cert.subject.rfc4514_string(),
        "issuer": issuer,
        "notBefore": iso(cert.not_valid_before_utc),
        "notAfter": iso(cert.not_valid_after_utc),
        "sans": sorted(dns) + sorted(ips),
        "keyAlgorithm": params.algorithm if params else "unknown",
        "keySize": params.size if params else 0,
        "serial": format(cert.serial_number, "x"),
    }


def _metadata(run: _Run, profiles: list[LeafProfile]) -> list[dict[str, Any]]:
    out = []
    for ca_id, (stem, _, key_name) in CAS.items():
        issuer = f"certificates.{key_name}" if ca_id in run.spec.byo_cas else "self-signed"
        current = run.cas[ca_id][0]
        out.append(certificate_metadata(stem, current, issuer))
        # during a rotation the bundle holds the other CA too: the one coming, or the one going
        other = "next" if f"{stem}-next.key" in run.files else "previous"
        for cert in load_bundle(run.files[f"{stem}.crt"]):
            if cert != current:
                out.append(certificate_metadata(f"{stem}-{other}", cert, issuer))
    for profile in profiles:
        out.append(
            certificate_metadata(profile.name, load_cert(run.files[f"{profile.name}.crt"]), profile.ca)
        )
    return out


# The Karmada CA that signs, alone: kube-controller-manager's --cluster-signing-cert-file takes
# exactly one certificate, and ca.crt is a bundle of two during a rotation.
SIGNER_FILE = "ca-signer.crt"


def _ensure_signer_file(run: _Run) -> None:
    text = cert_pem(run.cas["ca"][0])
    old = run.existing.get(SIGNER_FILE)
    run.files[SIGNER_FILE] = text
    if old != text:
        run.changes.append({"name": "ca-signer", "reasons": ["missing" if old is None else "content-changed"]})


def render_kubeconfig(cluster: str, server: str, user: str, ca: str, crt: str, key: str) -> str:
    """A kubeconfig with embedded credentials, as YAML text (deterministic for the same input)."""

    def b64(text: str) -> str:
        return base64.b64encode(text.encode()).decode()

    context = f"{user}@{cluster}"
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": cluster, "cluster": {"server": server, "certificate-authority-data": b64(ca)}}],
        "users": [{"name": user, "user": {"client-certificate-data": b64(crt), "client-key-data": b64(key)}}],
        "contexts": [{"name": context, "context": {"cluster": cluster, "user": user}}],
        "current-context": context,
        "preferences": {},
    }
    return yaml.safe_dump(config, sort_keys=False, default_flow_style=False)


def _ensure_kubeconfigs(run: _Run) -> None:
    for kc in kubeconfig_profiles(run.spec):
        text = render_kubeconfig(
            run.spec.name,
            kc.server,
            kc.user,
            run.files["ca.crt"],
            run.files[f"{kc.leaf}.crt"],
            run.files[f"{kc.leaf}.key"],
        )
        filename = f"{kc.name}.conf"
        old = run.existing.get(filename)
        run.files[filename] = text
        if old != text:
            run.changes.append(
                {"name": filename, "reasons": ["missing" if old is None else "content-changed"]}
            )


def reconcile_pki(
    data: Mapping[str, Any],
    existing: Mapping[str, str] | None = None,
    now: dt.datetime | None = None,
    key_factory: Callable[[KeyParams], PrivateKey] = generate_key,
) -> PkiResult:
    """Compute the full PKI set for the input ``data``, keeping whatever in ``existing`` is still good.

    ``existing`` defaults to ``data["existing"]``; ``now`` (UTC) is for tests.
    Raises :class:`PkiInputError` for bad input.
    """
    spec = parse_spec(data)
    stored = dict(existing if existing is not None else data.get("existing") or {})
    run = _Run(spec, stored, now or dt.datetime.now(dt.UTC), key_factory)
    for ca_id in CAS:
        _ensure_ca(run, ca_id)
    _ensure_signer_file(run)
    _ensure_service_account(run)
    _ensure_encryption(run)
    profiles = leaf_profiles(spec)
    _check_force_renew(spec, profiles)
    for profile in profiles:
        _ensure_leaf(run, profile)
    _ensure_kubeconfigs(run)
    removed = sorted(set(stored) - set(run.files))
    return PkiResult(run.files, _metadata(run, profiles), run.changes, run.warnings, removed, run.rotation)


def _check_force_renew(spec: PkiSpec, profiles: list[LeafProfile]) -> None:
    known = [stem for stem, _, _ in CAS.values()] + ["sa", ALL_LEAVES] + [p.name for p in profiles]
    for i, name in enumerate(spec.force_renew):
        if name not in known:
            raise PkiInputError(
                f"forceRenew[{i}]", f"unknown certificate {name!r}; known: {', '.join(known)}"
            )


# --------------------------------------------------------------------------- files and Secrets


def secret_groups(files: Mapping[str, str]) -> dict[str, dict[str, str]]:
    """Split the set into Secret-sized groups with valid data keys (no '/').

    ``pki``: Karmada and front-proxy CAs, leaves and sa.*; ``etcd``: the etcd/ files without the
    prefix (etcd material kept apart); ``kubeconfig``: the *.conf files.
    """
    groups: dict[str, dict[str, str]] = {"pki": {}, "etcd": {}, "kubeconfig": {}}
    for name, text in sorted(files.items()):
        if name.startswith("etcd/"):
            groups["etcd"][name[len("etcd/") :]] = text
        elif name.endswith(".conf"):
            groups["kubeconfig"][name] = text
        else:
            groups["pki"][name] = text
    return groups


def files_from_secret_groups(groups: Mapping[str, Mapping[str, str]]) -> dict[str, str]:
    """Inverse of :func:`secret_groups`: rebuild ``existing`` from the stored Secrets' data."""
    files: dict[str, str] = {}
    for group, data in groups.items():
        for key, text in (data or {}).items():
            files[f"etcd/{key}" if group == "etcd" else key] = text
    return files


def write_pki_dir(files: Mapping[str, str], directory: str | os.PathLike[str]) -> Path:
    """Write the set in kubeadm layout (``etcd/`` subdirectory); keys and kubeconfigs get mode 0600."""
    root = Path(directory)
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        secret = name.endswith((".key", ".conf"))
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600 if secret else 0o644)
        with os.fdopen(fd, "w") as handle:
            handle.write(text)
        os.chmod(path, 0o600 if secret else 0o644)
    return root
