"""A real S3 server for tests: versitygw (hack/versions.env VERSITYGW_VERSION) on loopback.

versitygw's posix backend serves a plain directory: bucket ``b`` is ``<data>/b`` and object
``k`` is the file ``<data>/b/k``, so a test can damage a stored object on disk. Each server
gets a free port, a fresh directory and random credentials; with ``tls=True`` it serves
HTTPS with a certificate from a throw-away CA whose PEM the test hands to the store (the
CA-bundle path is exercised for real). Build the binary with
``hack/testenv/build-bins.sh versitygw``.

Fixtures (registered in tests/conftest.py): ``s3_server`` (HTTP) and ``s3_server_tls``
(HTTPS), one per session.
"""

from __future__ import annotations

import datetime as dt
import ipaddress
import secrets
import subprocess
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import requests

from support.etcd_cluster import free_port
from support.processes import stop_process
from support.waiting import wait_for


@dataclass
class S3Server:
    """A running versitygw; ``endpoint`` is http(s)://<host>:<port> (host 127.0.0.1 unless a
    test needs pods to reach it: then the node's address)."""

    binary: str
    workdir: Path
    tls: bool = False
    access_key: str = field(default_factory=lambda: "AK" + secrets.token_hex(9).upper())
    secret_key: str = field(default_factory=lambda: secrets.token_urlsafe(30), repr=False)
    port: int = field(default_factory=free_port)
    ca_pem: str = ""
    proc: subprocess.Popen | None = None
    host: str = "127.0.0.1"

    @property
    def data_dir(self) -> Path:
        return self.workdir / "data"

    @property
    def log_path(self) -> Path:
        return self.workdir / "versitygw.log"

    @property
    def endpoint(self) -> str:
        return f"{'https' if self.tls else 'http'}://{self.host}:{self.port}"

    @property
    def ca_file(self) -> str:
        return str(self.workdir / "ca.crt")

    def start(self, timeout: float = 30) -> S3Server:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        args = [self.binary, "--port", f"{self.host}:{self.port}", "--health", "/health", "--quiet"]
        if self.tls:
            cert, key = self._issue_certs()
            args += ["--cert", cert, "--key", key]
        args += ["posix", str(self.data_dir)]
        env = {"ROOT_ACCESS_KEY": self.access_key, "ROOT_SECRET_KEY": self.secret_key, "PATH": "/usr/bin:/bin"}
        with open(self.log_path, "ab") as log:  # credentials go by environment: not in ps output
            self.proc = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT, env=env,
                                         start_new_session=True)
        wait_for(self._healthy, timeout, f"versitygw on {self.endpoint}", self.log_tail, interval=0.2)
        return self

    def _healthy(self) -> bool:
        if self.proc is None or self.proc.poll() is not None:
            raise AssertionError(f"versitygw exited ({self.proc and self.proc.returncode}):\n{self.log_tail()}")
        try:
            resp = requests.get(f"{self.endpoint}/health", timeout=2, verify=self.ca_file if self.tls else True)
        except requests.RequestException:
            return False
        return resp.status_code == 200

    def _issue_certs(self) -> tuple[str, str]:
        """A CA and a server certificate for 127.0.0.1/localhost (ECDSA P-256: fast)."""
        from cryptography import x509
        from cryptography.hazmat.primitives import hashes, serialization
        from cryptography.hazmat.primitives.asymmetric import ec
        from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

        now = dt.datetime.now(dt.UTC)
        ca_key = ec.generate_private_key(ec.SECP256R1())
        ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "s3-test-ca")])
        ca = (x509.CertificateBuilder().subject_name(ca_name).issuer_name(ca_name)
              .public_key(ca_key.public_key()).serial_number(x509.random_serial_number())
              .not_valid_before(now - dt.timedelta(minutes=5)).not_valid_after(now + dt.timedelta(days=1))
              .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
              .add_extension(x509.KeyUsage(digital_signature=True, key_cert_sign=True, crl_sign=True,
                                           content_commitment=False, key_encipherment=False,
                                           data_encipherment=False, key_agreement=False,
                                           encipher_only=False, decipher_only=False), critical=True)
              .sign(ca_key, hashes.SHA256()))
        key = ec.generate_private_key(ec.SECP256R1())
        cert = (x509.CertificateBuilder()
                .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "s3-test")]))
                .issuer_name(ca_name).public_key(key.public_key()).serial_number(x509.random_serial_number())
                .not_valid_before(now - dt.timedelta(minutes=5)).not_valid_after(now + dt.timedelta(days=1))
                .add_extension(x509.SubjectAlternativeName([
                    x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), critical=False)
                .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
                .sign(ca_key, hashes.SHA256()))
        pem = serialization.Encoding.PEM
        self.ca_pem = ca.public_bytes(pem).decode()
        Path(self.ca_file).write_text(self.ca_pem)
        cert_path, key_path = self.workdir / "server.crt", self.workdir / "server.key"
        cert_path.write_bytes(cert.public_bytes(pem))
        key_path.write_bytes(key.private_bytes(pem, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()))
        key_path.chmod(0o600)
        return str(cert_path), str(key_path)

    def client(self, **overrides: Any) -> Any:
        """A plain boto3 client for this server (to prepare buckets and look behind the store)."""
        import boto3

        kwargs: dict[str, Any] = {
            "endpoint_url": self.endpoint, "aws_access_key_id": self.access_key,
            "aws_secret_access_key": self.secret_key, "region_name": "us-east-1",
            "verify": self.ca_file if self.tls else True,
        }
        kwargs.update(overrides)
        return boto3.client("s3", **kwargs)

    def create_bucket(self, name: str | None = None) -> str:
        name = name or f"snap-{secrets.token_hex(4)}"
        self.client().create_bucket(Bucket=name)
        return name

    def object_path(self, bucket: str, key: str) -> Path:
        """The file behind an object (posix backend)."""
        return self.data_dir / bucket / key

    def log_tail(self, chars: int = 4000) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-chars:]
        except FileNotFoundError:
            return ""

    def stop(self) -> None:
        stop_process(self.proc, timeout=10)


def start_s3_server(binary: str, workdir: str | Path | None = None, tls: bool = False,
                    host: str = "127.0.0.1") -> S3Server:
    base = Path(workdir) if workdir else Path(tempfile.mkdtemp(prefix="s3-server-"))
    return S3Server(binary=binary, workdir=base, tls=tls, host=host).start()


def _server(bin_path: Any, tmp_path_factory: pytest.TempPathFactory, tls: bool) -> Iterator[S3Server]:
    server = start_s3_server(bin_path("versitygw"), tmp_path_factory.mktemp("s3tls" if tls else "s3"), tls=tls)
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="session")
def s3_server(bin_path: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[S3Server]:
    """versitygw over plain HTTP on a free loopback port, for the whole session."""
    yield from _server(bin_path, tmp_path_factory, tls=False)


@pytest.fixture(scope="session")
def s3_server_tls(bin_path: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[S3Server]:
    """versitygw over HTTPS with a certificate from a throw-away CA (``ca_pem``, ``ca_file``)."""
    yield from _server(bin_path, tmp_path_factory, tls=True)
