"""Client for etcd's v3 JSON gateway (``/v3/...``) over ``requests`` with client TLS.

Plain Python, no Ansible imports: the ``etcd_*`` modules adapt it, tests import it directly.
We use the HTTP gateway every etcd >= 3.4 serves on its client port instead of gRPC, so the
operator image needs no grpc/protobuf pins that could fight Ansible's.

Gateway conventions handled here: keys and values are base64; int64/uint64 fields (IDs,
revisions, sizes) arrive as JSON strings; errors come back as ``{"code", "message"}`` with
gRPC codes; the snapshot RPC streams JSON lines with base64 ``blob`` chunks, and etcd sends
the sha256 of the database as the last 32 bytes (checked here the way ``etcdutl`` does).

Besides the raw calls (:class:`EtcdClient`), the member and health logic the modules need
lives here too (:func:`cluster_health`, :func:`ensure_member_present`,
:func:`ensure_member_absent`) so it is tested without Ansible.
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import json
import mmap
import os
import struct
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import requests
import urllib3

HASH_SIZE = hashlib.sha256().digest_size  # etcd appends sha256(db) to a snapshot stream
BOLT_MAGIC = 0xED0CDAED

# gRPC status codes the gateway reports in {"code": ...}
GRPC_INVALID_ARGUMENT = 3
GRPC_DEADLINE_EXCEEDED = 4
GRPC_NOT_FOUND = 5
GRPC_ALREADY_EXISTS = 6
GRPC_RESOURCE_EXHAUSTED = 8
GRPC_FAILED_PRECONDITION = 9
GRPC_UNAVAILABLE = 14

ALARM_GET, ALARM_ACTIVATE, ALARM_DEACTIVATE = "GET", "ACTIVATE", "DEACTIVATE"


# --------------------------------------------------------------------------- errors


class EtcdError(Exception):
    """Base of every error raised here; the message says what to do next."""

    retryable = False


class EtcdConfigError(EtcdError):
    """Bad client configuration (endpoint scheme, missing certificate files); nothing was sent."""


class EtcdUnreachableError(EtcdError):
    """No connection could be made; the request was not delivered."""

    retryable = True


class EtcdTLSError(EtcdUnreachableError):
    """The TLS handshake failed (trust, SANs or client certificate); retrying will not help."""

    retryable = False


class EtcdTimeoutError(EtcdError):
    """The request was sent but no answer came in time; it may or may not have been applied."""

    retryable = True


class EtcdAPIError(EtcdError):
    """etcd answered with an error. ``code`` is the gRPC code, ``etcd_message`` etcd's text."""

    def __init__(
        self, message: str, code: int | None = None, etcd_message: str = "", endpoint: str = ""
    ) -> None:
        super().__init__(message)
        self.code = code
        self.etcd_message = etcd_message
        self.endpoint = endpoint


class EtcdUnavailableError(EtcdAPIError):
    """The member cannot serve right now (no leader, leader changed, server stopping)."""

    retryable = True


class EtcdLeaderChangedError(EtcdUnavailableError):
    """The leader changed while the request was in flight."""


class EtcdNotFoundError(EtcdAPIError):
    """The member (or other object) named in the request does not exist."""


class EtcdMemberError(EtcdError):
    """A membership change was refused by our own checks (quorum, name taken...); nothing changed."""


class EtcdSnapshotError(EtcdError):
    """A snapshot is truncated, altered or not an etcd database; do not restore from it."""


# --------------------------------------------------------------------------- data


@dataclass(frozen=True)
class Member:
    id: int
    name: str
    peer_urls: tuple[str, ...]
    client_urls: tuple[str, ...]
    is_learner: bool

    @property
    def hex_id(self) -> str:
        return format(self.id, "x")

    @property
    def started(self) -> bool:
        # an added member has no name and no client URLs until its process first joins
        return bool(self.name)

    def as_dict(self) -> dict[str, Any]:
        return {
            "id": self.hex_id,
            "name": self.name,
            "peer_urls": list(self.peer_urls),
            "client_urls": list(self.client_urls),
            "is_learner": self.is_learner,
        }


@dataclass(frozen=True)
class Status:
    endpoint: str
    cluster_id: int
    member_id: int
    version: str
    db_size: int
    db_size_in_use: int
    leader: int
    raft_index: int
    raft_term: int
    raft_applied_index: int
    revision: int
    is_learner: bool
    errors: tuple[str, ...] = ()

    @property
    def is_leader(self) -> bool:
        return self.leader != 0 and self.leader == self.member_id


@dataclass(frozen=True)
class KeyValue:
    key: bytes
    value: bytes
    create_revision: int
    mod_revision: int
    version: int


@dataclass(frozen=True)
class SnapshotResult:
    path: str
    size: int
    sha256: str
    revision: int
    etcd_version: str
    storage_version: str
    endpoint: str
    duration_seconds: float

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


# --------------------------------------------------------------------------- helpers


def b64(data: bytes | str) -> str:
    raw = data.encode() if isinstance(data, str) else data
    return base64.b64encode(raw).decode("ascii")


def unb64(text: str | None) -> bytes:
    return base64.b64decode(text) if text else b""


def as_int(value: Any) -> int:
    """int64/uint64 fields arrive as strings; absent means zero (proto3 default)."""
    return int(value) if value not in (None, "") else 0


def parse_member_id(value: int | str) -> int:
    """Accept an int, a decimal string or etcdctl's hex form (``8e9e05c52164694d``)."""
    if isinstance(value, int):
        return value
    text = str(value).strip().lower().removeprefix("0x")
    try:
        return int(text, 16)
    except ValueError:
        raise EtcdConfigError(f"member id {value!r} is not a hex member id as etcdctl prints it") from None


def prefix_end(prefix: bytes) -> bytes:
    """range_end for a prefix scan (etcd's GetPrefixRangeEnd)."""
    end = bytearray(prefix)
    for i in range(len(end) - 1, -1, -1):
        if end[i] < 0xFF:
            end[i] += 1
            return bytes(end[: i + 1])
    return b"\0"  # whole keyspace


def validate_endpoint(endpoint: str) -> str:
    parts = urlsplit(endpoint)
    if parts.scheme not in ("http", "https"):
        raise EtcdConfigError(
            f"endpoint {endpoint!r} has scheme {parts.scheme or '(none)'!r}; "
            "use http:// or https:// (e.g. https://127.0.0.1:2379)"
        )
    if not parts.hostname:
        raise EtcdConfigError(f"endpoint {endpoint!r} has no host; use https://HOST:PORT")
    return endpoint.rstrip("/")


def _member(raw: Mapping[str, Any]) -> Member:
    return Member(
        id=as_int(raw.get("ID")),
        name=raw.get("name", ""),
        peer_urls=tuple(raw.get("peerURLs") or ()),
        client_urls=tuple(raw.get("clientURLs") or ()),
        is_learner=bool(raw.get("isLearner", False)),
    )


def _kv(raw: Mapping[str, Any]) -> KeyValue:
    return KeyValue(
        unb64(raw.get("key")),
        unb64(raw.get("value")),
        as_int(raw.get("create_revision")),
        as_int(raw.get("mod_revision")),
        as_int(raw.get("version")),
    )


def _api_error(endpoint: str, path: str, status: int, body: Mapping[str, Any]) -> EtcdAPIError:
    code = body.get("code", body.get("grpc_code"))
    text = str(body.get("message") or body.get("error") or f"HTTP {status}")
    where = f"{endpoint}{path}"
    if "leader changed" in text:
        return EtcdLeaderChangedError(
            f"{where}: etcd leader changed during the call ({text}); it may or may not have been "
            "applied: check the state and retry (reads and idempotent writes are safe to retry)",
            code,
            text,
            endpoint,
        )
    if code in (GRPC_UNAVAILABLE, GRPC_DEADLINE_EXCEEDED) or status == 503:
        return EtcdUnavailableError(
            f"{where}: member cannot serve now ({text}); retry in a few seconds or use another "
            "endpoint; if it persists check that a quorum of members is running",
            code,
            text,
            endpoint,
        )
    if code == GRPC_NOT_FOUND or status == 404:
        return EtcdNotFoundError(f"{where}: {text}; list members to get current IDs", code, text, endpoint)
    if code == GRPC_RESOURCE_EXHAUSTED and "space exceeded" in text:
        return EtcdAPIError(
            f"{where}: {text}; compact, defragment every member, then disarm the NOSPACE "
            "alarm (or raise --quota-backend-bytes)",
            code,
            text,
            endpoint,
        )
    return EtcdAPIError(f"{where}: etcd refused the request: {text} (gRPC code {code})", code, text, endpoint)


# --------------------------------------------------------------------------- client


class _ServerNameAdapter(requests.adapters.HTTPAdapter):
    """Sends SNI and checks the certificate for one fixed name, whatever host the URL has."""

    def __init__(self, server_name: str, **kwargs: Any) -> None:
        self._server_name = server_name
        super().__init__(**kwargs)

    def init_poolmanager(self, *args: Any, **kwargs: Any) -> None:
        kwargs["server_hostname"] = self._server_name
        kwargs["assert_hostname"] = self._server_name
        super().init_poolmanager(*args, **kwargs)


class EtcdClient:
    """Talks to an etcd cluster through the v3 JSON gateway of its members.

    ``endpoints``: client URLs (``https://host:2379``). Calls without an explicit endpoint go
    to the first endpoint that accepts a connection (fail-over only when nothing was sent).
    ``cert``/``key``: client certificate and key files; ``ca``: CA bundle for the servers.
    """

    def __init__(
        self,
        endpoints: str | Sequence[str],
        cert: str | None = None,
        key: str | None = None,
        ca: str | None = None,
        timeout: float = 5.0,
        connect_timeout: float = 3.0,
        session: requests.Session | None = None,
        tls_server_name: str | None = None,
        resolve: Mapping[str, str] | None = None,
    ) -> None:
        """``tls_server_name``: check the servers' certificates against this name instead of the
        URL's host (e.g. dialling pod IPs). ``resolve``: host -> address overrides, like curl's
        --resolve, for members whose advertised DNS names only resolve inside their cluster."""
        items = [endpoints] if isinstance(endpoints, str) else list(endpoints)
        items = [e.strip() for item in items for e in str(item).split(",") if e.strip()]
        if not items:
            raise EtcdConfigError(
                "no etcd endpoints given; pass at least one client URL like https://127.0.0.1:2379"
            )
        self.endpoints = [validate_endpoint(e) for e in items]
        for label, path in (("cert", cert), ("key", key), ("ca", ca)):
            if path and not os.path.isfile(path):
                raise EtcdConfigError(
                    f"{label} file {path} does not exist or is not a file; "
                    "point it at the PEM file (kubeadm layout: /etc/kubernetes/pki/etcd/)"
                )
        if bool(cert) != bool(key):
            raise EtcdConfigError("client cert and key go together: give both or neither")
        self.cert, self.key, self.ca = cert, key, ca
        self.timeout, self.connect_timeout = timeout, connect_timeout
        self.session = session or requests.Session()
        # Ignore REQUESTS_CA_BUNDLE/*_PROXY: they would override our CA and route etcd traffic away.
        self.session.trust_env = False
        self.tls_server_name = tls_server_name or None
        self.resolve = dict(resolve or {})
        self._resolved_mounts: set[str] = set()
        if self.tls_server_name and session is None:
            self.session.mount("https://", _ServerNameAdapter(self.tls_server_name))
        self._verify: str | bool = ca if ca else True
        self._cert = (cert, key) if cert and key else None

    def with_endpoints(self, endpoints: Sequence[str]) -> EtcdClient:
        """A client for other endpoints of the same cluster, sharing TLS settings and session."""
        return EtcdClient(
            list(endpoints) or self.endpoints,
            self.cert,
            self.key,
            self.ca,
            self.timeout,
            self.connect_timeout,
            self.session,
            self.tls_server_name,
            self.resolve,
        )

    # ---- transport

    def _url(self, endpoint: str, path: str) -> str:
        if self.resolve:
            parts = urlsplit(endpoint)
            address = self.resolve.get(parts.hostname or "")
            if address:
                host = f"[{address}]" if ":" in address else address
                netloc = f"{host}:{parts.port}" if parts.port else host
                endpoint = parts._replace(netloc=netloc).geturl()
                # The certificate names the host, not the address: check it against the host.
                prefix = f"{endpoint}/"
                if not self.tls_server_name and prefix not in self._resolved_mounts:
                    self.session.mount(prefix, _ServerNameAdapter(parts.hostname or ""))
                    self._resolved_mounts.add(prefix)
        return f"{endpoint}/v3/{path}"

    def _send(
        self,
        endpoint: str,
        path: str,
        body: Mapping[str, Any],
        stream: bool = False,
        timeout: float | None = None,
    ) -> requests.Response:
        url = self._url(endpoint, path)
        try:
            return self.session.post(
                url,
                data=json.dumps(body),
                stream=stream,
                verify=self._verify,
                cert=self._cert,
                timeout=(self.connect_timeout, timeout or self.timeout),
                headers={"Content-Type": "application/json"},
            )
        except requests.exceptions.SSLError as exc:
            raise EtcdTLSError(
                f"TLS handshake with {endpoint} failed ({exc.__class__.__name__}: {exc}); check that the CA "
                "signed the server cert, the server cert has this host in its SANs and the client "
                "cert is signed by the etcd CA"
            ) from exc
        except (requests.exceptions.ConnectTimeout, requests.exceptions.ConnectionError) as exc:
            if isinstance(exc, requests.exceptions.ReadTimeout):
                raise self._timeout(endpoint, path, exc) from exc
            raise EtcdUnreachableError(
                f"cannot connect to etcd at {endpoint} ({exc.__class__.__name__}); check the member "
                "is running and the URL/port is right, or try another endpoint"
            ) from exc
        except requests.exceptions.Timeout as exc:
            raise self._timeout(endpoint, path, exc) from exc

    def _timeout(self, endpoint: str, path: str, exc: Exception) -> EtcdTimeoutError:
        return EtcdTimeoutError(
            f"{endpoint}/v3/{path} did not answer within {self.timeout}s ({exc.__class__.__name__}); the "
            "request may or may not have been applied: check the state, then retry or raise the timeout"
        )

    def call(
        self,
        path: str,
        body: Mapping[str, Any] | None = None,
        endpoint: str | None = None,
        timeout: float | None = None,
    ) -> dict[str, Any]:
        """POST ``body`` to ``/v3/<path>``; on one endpoint, or fail over across all of them."""
        targets = [validate_endpoint(endpoint)] if endpoint else self.endpoints
        last: EtcdUnreachableError | None = None
        for target in targets:
            try:
                resp = self._send(target, path, body or {}, timeout=timeout)
            except EtcdUnreachableError as exc:
                last = exc
                continue
            return self._decode(target, path, resp)
        assert last is not None
        if len(targets) > 1:
            raise EtcdUnreachableError(
                f"no etcd endpoint of {', '.join(targets)} accepted a connection; "
                f"check the members are running (last error: {last})"
            ) from last
        raise last

    def _decode(self, endpoint: str, path: str, resp: requests.Response) -> dict[str, Any]:
        try:
            body = resp.json()
        except ValueError:
            body = {"message": resp.text[:300]}
        if resp.status_code != 200 or (
            isinstance(body, dict) and "code" in body and "message" in body and "header" not in body
        ):
            detail = body if isinstance(body, dict) else {}
            raise _api_error(endpoint, f"/v3/{path}", resp.status_code, detail)
        return body

    # ---- cluster

    def member_list(self, linearizable: bool = True, endpoint: str | None = None) -> list[Member]:
        body = self.call("cluster/member/list", {"linearizable": linearizable}, endpoint)
        return [_member(m) for m in body.get("members", [])]

    def member_add(self, peer_urls: Sequence[str], learner: bool = True) -> Member:
        body = self.call("cluster/member/add", {"peerURLs": list(peer_urls), "isLearner": learner})
        return _member(body["member"])

    def member_promote(self, member_id: int | str) -> list[Member]:
        body = self.call("cluster/member/promote", {"ID": str(parse_member_id(member_id))})
        return [_member(m) for m in body.get("members", [])]

    def member_remove(self, member_id: int | str) -> list[Member]:
        mid = parse_member_id(member_id)
        try:
            body = self.call("cluster/member/remove", {"ID": str(mid)})
        except EtcdNotFoundError as exc:
            raise EtcdNotFoundError(
                f"member {mid:x} is not in the cluster; nothing was removed "
                "(list members to see current IDs)",
                exc.code,
                exc.etcd_message,
                exc.endpoint,
            ) from exc
        return [_member(m) for m in body.get("members", [])]

    # ---- maintenance

    def status(self, endpoint: str | None = None) -> Status:
        target = endpoint or self.endpoints[0]
        body = self.call("maintenance/status", {}, target)
        header = body.get("header", {})
        return Status(
            endpoint=target,
            cluster_id=as_int(header.get("cluster_id")),
            member_id=as_int(header.get("member_id")),
            version=body.get("version", ""),
            db_size=as_int(body.get("dbSize")),
            db_size_in_use=as_int(body.get("dbSizeInUse")),
            leader=as_int(body.get("leader")),
            raft_index=as_int(body.get("raftIndex")),
            raft_term=as_int(body.get("raftTerm")),
            raft_applied_index=as_int(body.get("raftAppliedIndex")),
            revision=as_int(header.get("revision")),
            is_learner=bool(body.get("isLearner", False)),
            errors=tuple(body.get("errors") or ()),
        )

    def alarms(self, endpoint: str | None = None) -> list[dict[str, Any]]:
        """Active alarms as ``[{"member_id": hex, "alarm": "NOSPACE"|"CORRUPT"}]``."""
        body = self.call("maintenance/alarm", {"action": ALARM_GET}, endpoint)
        return [
            {"member_id": format(as_int(a.get("memberID")), "x"), "alarm": a.get("alarm", "NONE")}
            for a in body.get("alarms", [])
        ]

    def alarm_disarm(self, member_id: int | str, alarm: str) -> None:
        self.call(
            "maintenance/alarm",
            {"action": ALARM_DEACTIVATE, "memberID": str(parse_member_id(member_id)), "alarm": alarm},
        )

    def defragment(self, endpoint: str, timeout: float = 300.0) -> None:
        """Defragment one member (blocks its reads and writes while it runs)."""
        self.call("maintenance/defragment", {}, endpoint, timeout=timeout)

    def hash_kv(self, endpoint: str, revision: int = 0) -> dict[str, int]:
        body = self.call("maintenance/hashkv", {"revision": str(revision)}, endpoint, timeout=60)
        return {
            "hash": as_int(body.get("hash")),
            "compact_revision": as_int(body.get("compact_revision")),
            "hash_revision": as_int(body.get("hash_revision")),
            "revision": as_int(body.get("header", {}).get("revision")),
        }

    def move_leader(self, target_id: int | str, leader_endpoint: str | None = None) -> None:
        """Hand leadership to ``target_id``. etcd only accepts this on the current leader."""
        endpoint = leader_endpoint or self.leader_endpoint()
        self.call(
            "maintenance/transfer-leadership",
            {"targetID": str(parse_member_id(target_id))},
            endpoint,
            timeout=max(self.timeout, 15),
        )

    def leader_endpoint(self) -> str:
        """Client URL of the current leader (asks the members which one leads)."""
        leader = 0
        for endpoint in self.endpoints:
            try:
                leader = self.status(endpoint).leader
            except EtcdError:
                continue
            if leader:
                break
        if not leader:
            raise EtcdUnavailableError("no reachable member knows a leader; check quorum (etcd_health)")
        for member in self.member_list(linearizable=False):
            if member.id == leader and member.client_urls:
                return member.client_urls[0]
        raise EtcdUnavailableError(f"leader {leader:x} has no client URL in the member list; retry shortly")

    # ---- kv

    def range(
        self,
        key: bytes | str,
        range_end: bytes | str | None = None,
        limit: int = 0,
        serializable: bool = False,
        revision: int = 0,
        keys_only: bool = False,
        count_only: bool = False,
        endpoint: str | None = None,
    ) -> dict[str, Any]:
        body: dict[str, Any] = {"key": b64(key), "serializable": serializable}
        if range_end is not None:
            body["range_end"] = b64(range_end)
        if limit:
            body["limit"] = str(limit)
        if revision:
            body["revision"] = str(revision)
        if keys_only:
            body["keys_only"] = True
        if count_only:
            body["count_only"] = True
        raw = self.call("kv/range", body, endpoint, timeout=max(self.timeout, 60))
        return {
            "kvs": [_kv(kv) for kv in raw.get("kvs", [])],
            "count": as_int(raw.get("count")),
            "more": bool(raw.get("more", False)),
            "revision": as_int(raw.get("header", {}).get("revision")),
        }

    def get(self, key: bytes | str, serializable: bool = False, endpoint: str | None = None) -> bytes | None:
        kvs = self.range(key, serializable=serializable, endpoint=endpoint)["kvs"]
        return kvs[0].value if kvs else None

    def iter_prefix(
        self, prefix: bytes | str, page: int = 5000, serializable: bool = False, endpoint: str | None = None
    ) -> Iterator[KeyValue]:
        """All keys under ``prefix`` at one revision, fetched in pages."""
        start = prefix.encode() if isinstance(prefix, str) else prefix
        end = prefix_end(start)
        revision = 0
        while True:
            res = self.range(
                start, end, limit=page, serializable=serializable, revision=revision, endpoint=endpoint
            )
            revision = revision or res["revision"]
            yield from res["kvs"]
            if not res["more"] or not res["kvs"]:
                return
            start = res["kvs"][-1].key + b"\0"

    def put(self, key: bytes | str, value: bytes | str, endpoint: str | None = None) -> int:
        """Write one key; returns the revision of the write."""
        raw = self.call("kv/put", {"key": b64(key), "value": b64(value)}, endpoint)
        return as_int(raw.get("header", {}).get("revision"))

    def put_many(self, items: Iterable[tuple[bytes | str, bytes | str]], endpoint: str | None = None) -> int:
        """Write several keys in one transaction (at most the server's --max-txn-ops)."""
        ops = [{"request_put": {"key": b64(k), "value": b64(v)}} for k, v in items]
        raw = self.call("kv/txn", {"success": ops}, endpoint, timeout=max(self.timeout, 60))
        return as_int(raw.get("header", {}).get("revision"))

    def health_read(self, endpoint: str) -> None:
        """A serializable read on one member: answers from its own state, no quorum round-trip."""
        self.range("health", serializable=True, endpoint=endpoint)

    # ---- snapshot

    def snapshot_save(
        self, path: str | os.PathLike[str], endpoint: str | None = None, chunk_timeout: float = 60.0
    ) -> SnapshotResult:
        """Stream a snapshot from one member into ``path``, verifying etcd's sha256 trailer.

        Written to ``<path>.part`` first and renamed only once the trailer matches, so a
        half-written or corrupted file never takes the final name.
        """
        target = validate_endpoint(endpoint) if endpoint else self._first_reachable()
        final = Path(path)
        final.parent.mkdir(parents=True, exist_ok=True)
        part = final.with_name(final.name + ".part")
        started = time.monotonic()
        resp = self._send(target, "maintenance/snapshot", {}, stream=True, timeout=chunk_timeout)
        if resp.status_code != 200:
            self._decode(target, "maintenance/snapshot", resp)
        digest = hashlib.sha256()  # of the database: must equal the trailer
        whole = hashlib.sha256()  # of the file as written, returned to the caller
        tail = b""  # the last HASH_SIZE bytes seen, not yet hashed
        size = 0
        storage_version = ""
        try:
            with open(part, "wb") as out:
                for line in _json_lines(resp):
                    blob = _fast_blob(line)
                    if blob is None:  # not the common shape: parse it properly
                        msg = json.loads(line)
                        if "error" in msg:
                            err = (
                                msg["error"] if isinstance(msg["error"], dict) else {"message": msg["error"]}
                            )
                            raise _api_error(
                                target, "/v3/maintenance/snapshot", err.get("http_code", 500), err
                            )
                        result = msg.get("result", msg)
                        storage_version = result.get("version", storage_version)
                        blob = base64.b64decode(result.get("blob", ""))
                    elif size == 0:  # the first message also says the storage version (etcd >= 3.6)
                        storage_version = json.loads(line).get("result", {}).get("version", "")
                    out.write(blob)
                    whole.update(blob)
                    size += len(blob)
                    if len(blob) >= HASH_SIZE:
                        digest.update(tail)
                        digest.update(memoryview(blob)[:-HASH_SIZE])
                        tail = blob[-HASH_SIZE:]
                    else:
                        buf = tail + blob
                        digest.update(buf[:-HASH_SIZE])
                        tail = buf[-HASH_SIZE:]
        except (requests.exceptions.RequestException, urllib3.exceptions.HTTPError) as exc:
            part.unlink(missing_ok=True)
            raise EtcdSnapshotError(
                f"snapshot stream from {target} broke after {size} bytes ({exc}); "
                "retry the backup, preferably from another member"
            ) from exc
        except BaseException:
            part.unlink(missing_ok=True)
            raise
        finally:
            resp.close()
        if size <= HASH_SIZE or digest.digest() != tail:
            part.unlink(missing_ok=True)
            raise EtcdSnapshotError(
                f"snapshot from {target} failed its sha256 check ({size} bytes "
                "received); the stream was cut or corrupted: retry the backup"
            )
        revision = snapshot_revision(part)
        os.replace(part, final)
        status_version = ""
        with contextlib.suppress(EtcdError):  # the file is good; the version is informational
            status_version = self.status(target).version
        return SnapshotResult(
            str(final),
            size,
            whole.hexdigest(),
            revision,
            status_version,
            storage_version,
            target,
            round(time.monotonic() - started, 3),
        )

    def _first_reachable(self) -> str:
        errors = []
        for endpoint in self.endpoints:
            try:
                self.status(endpoint)
                return endpoint
            except EtcdError as exc:
                errors.append(str(exc))
        raise EtcdUnreachableError(
            "no endpoint answered a status call; check the members are running: " + "; ".join(errors)
        )


_BLOB_PREFIX = b'{"result":{"blob":"'


def _fast_blob(line: bytes) -> bytes | None:
    """The blob of a ``{"result":{"blob":"<base64>",...}}`` line without building a JSON tree.

    Base64 never contains '"' or '\\', so the first quote after the prefix ends it. Any other
    shape (errors, a reordered object) returns None and goes through json.loads.
    """
    if not line.startswith(_BLOB_PREFIX):
        return None
    end = line.find(b'"', len(_BLOB_PREFIX))
    if end < 0:
        return None
    return base64.b64decode(line[len(_BLOB_PREFIX) : end], validate=True)


def _json_lines(resp: requests.Response, chunk: int = 1 << 20) -> Iterator[bytes]:
    """Non-empty lines of a streamed response, read in large chunks (cheaper than iter_lines)."""
    pending = b""
    for data in resp.raw.stream(chunk, decode_content=True):
        pending += data
        lines = pending.split(b"\n")
        pending = lines.pop()
        yield from (line for line in lines if line.strip())
    if pending.strip():
        yield pending


# --------------------------------------------------------------------------- snapshot files


def file_sha256(path: str | os.PathLike[str]) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def verify_snapshot(path: str | os.PathLike[str]) -> dict[str, Any]:
    """Check a snapshot file before anything restores from it; return size, sha256, revision.

    Same rule as ``etcdutl snapshot restore``: a snapshot taken over the wire is the bbolt
    file (a whole number of 512-byte sectors) plus 32 bytes of sha256 over the rest.
    """
    p = Path(path)
    if not p.is_file():
        raise EtcdSnapshotError(f"snapshot {p} does not exist; check the path or fetch it from the store")
    size = p.stat().st_size
    if size <= HASH_SIZE or size % 512 != HASH_SIZE:
        raise EtcdSnapshotError(
            f"snapshot {p} is {size} bytes, not a database plus its 32-byte sha256 trailer: it is truncated "
            "or not a snapshot from `etcdctl snapshot save`/etcd_snapshot; use another backup"
        )
    whole = hashlib.sha256()
    digest = hashlib.sha256()
    with open(p, "rb") as handle:
        remaining = size - HASH_SIZE
        while remaining:
            chunk = handle.read(min(1 << 20, remaining))
            if not chunk:
                raise EtcdSnapshotError(f"snapshot {p} shrank while reading; retry")
            digest.update(chunk)
            whole.update(chunk)
            remaining -= len(chunk)
        trailer = handle.read(HASH_SIZE)
        whole.update(trailer)
    if digest.digest() != trailer:
        raise EtcdSnapshotError(
            f"snapshot {p} fails its sha256 check: the file was altered or corrupted; "
            "do not restore it, use another backup"
        )
    return {"path": str(p), "size": size, "sha256": whole.hexdigest(), "revision": snapshot_revision(p)}


def snapshot_revision(path: str | os.PathLike[str]) -> int:
    """Latest revision stored in an etcd db/snapshot: the last key of its bbolt ``key`` bucket.

    The same number ``etcdutl snapshot status`` prints; read directly from the bbolt pages.
    """
    with open(path, "rb") as handle, mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ) as data:
        try:
            return _bolt_last_revision(data)
        except (struct.error, IndexError, ValueError) as exc:
            raise EtcdSnapshotError(
                f"{path} is not a readable etcd database ({exc}); use another backup"
            ) from exc


def _bolt_last_revision(data: mmap.mmap | bytes) -> int:
    metas = []
    page_size = struct.unpack_from("<I", data, 16 + 8)[0]
    for pgid in (0, 1):
        base = pgid * page_size + 16
        magic, _ver, psize, _flags, root, _seq, _free, _hwm, txid = struct.unpack_from("<IIII5Q", data, base)
        if magic == BOLT_MAGIC and psize == page_size:
            metas.append((txid, root))
    if not metas:
        raise ValueError("no valid bbolt meta page")
    _, root = max(metas)

    def page(pgid: int) -> tuple[int, int, int]:
        off = pgid * page_size
        _pid, flags, count, _overflow = struct.unpack_from("<QHHI", data, off)
        return off, flags, count

    def find(buf: Any, off: int, flags: int, count: int, key: bytes, inline: bool) -> bytes | None:
        elems = off + 16
        if flags & 0x01:  # branch: follow the last element whose key <= target
            child = None
            for i in range(count):
                e = elems + 16 * i
                pos, ksize, pgid = struct.unpack_from("<IIQ", buf, e)
                if bytes(buf[e + pos : e + pos + ksize]) <= key or child is None:
                    child = pgid
                else:
                    break
            assert child is not None
            return find(data, *page(child), key, False)
        for i in range(count):
            e = elems + 16 * i
            eflags, pos, ksize, vsize = struct.unpack_from("<IIII", buf, e)
            if bytes(buf[e + pos : e + pos + ksize]) == key and eflags & 0x01:
                return bytes(buf[e + pos + ksize : e + pos + ksize + vsize])
        return None

    bucket = find(data, *page(root), b"key", False)
    if bucket is None:
        raise ValueError("no 'key' bucket: not an etcd database")
    broot = struct.unpack_from("<Q", bucket, 0)[0]
    if broot == 0:  # inline bucket: its single leaf page follows the bucket header
        buf, off = bucket, 16
        _pid, flags, count, _ov = struct.unpack_from("<QHHI", buf, off)
    else:
        buf = data
        off, flags, count = page(broot)
        while flags & 0x01:
            e = off + 16 + 16 * (count - 1)
            _pos, _ksize, child = struct.unpack_from("<IIQ", buf, e)
            off, flags, count = page(child)
    if count == 0:
        return 0
    e = off + 16 + 16 * (count - 1)
    _f, pos, ksize, _v = struct.unpack_from("<IIII", buf, e)
    return struct.unpack(">Q", bytes(buf[e + pos : e + pos + 8]))[0]


# --------------------------------------------------------------------------- health


def quorum(voters: int) -> int:
    return voters // 2 + 1


def cluster_health(client: EtcdClient, extra_endpoints: Sequence[str] = ()) -> dict[str, Any]:
    """Per-member and cluster health, for the ``etcd_health`` module and for our own checks.

    A member is healthy when its status answers, it knows a leader, a serializable read works
    and no alarm is raised for it. The cluster has quorum when a majority of voting members
    (learners do not vote) is healthy.
    """
    members: list[Member] = []
    list_error = ""
    for linearizable in (True, False):
        try:
            members = client.member_list(linearizable=linearizable)
            break
        except EtcdError as exc:
            list_error = str(exc)
    try:
        alarms = client.alarms()
    except EtcdError:
        alarms = []
    reports = []
    seen_urls: set[str] = set()
    for member in members:
        urls = list(member.client_urls)
        seen_urls.update(urls)
        reports.append(_member_health(client, member, urls, alarms))
    for url in list(client.endpoints) + list(extra_endpoints):
        if url not in seen_urls and not members:
            reports.append(_member_health(client, None, [url], alarms))
    voters = [r for r in reports if not r["learner"]]
    healthy_voters = [r for r in voters if r["healthy"]]
    leaders = {r["leader_id"] for r in reports if r["reachable"] and r["leader_id"]}
    has_quorum = bool(voters) and len(healthy_voters) >= quorum(len(voters))
    return {
        "healthy": has_quorum and all(r["healthy"] for r in reports),
        "has_quorum": has_quorum,
        "healthy_count": sum(1 for r in reports if r["healthy"]),
        "member_count": len(reports),
        "voting_count": len(voters),
        "quorum_size": quorum(len(voters)) if voters else 0,
        "leader_id": next(iter(leaders)) if len(leaders) == 1 else "",
        "cluster_id": next((r["cluster_id"] for r in reports if r["cluster_id"]), ""),
        "alarms": alarms,
        "members": reports,
        "errors": [list_error] if list_error and not members else [],
    }


def _member_health(
    client: EtcdClient, member: Member | None, urls: Sequence[str], alarms: Sequence[Mapping[str, str]]
) -> dict[str, Any]:
    report: dict[str, Any] = {
        "id": member.hex_id if member else "",
        "name": member.name if member else "",
        "client_urls": list(urls),
        "peer_urls": list(member.peer_urls) if member else [],
        "started": member.started if member else True,
        "reachable": False,
        "healthy": False,
        "leader": False,
        "leader_id": "",
        "learner": member.is_learner if member else False,
        "version": "",
        "db_size": 0,
        "db_size_in_use": 0,
        "raft_index": 0,
        "raft_term": 0,
        "revision": 0,
        "cluster_id": "",
        "alarms": [],
        "error": "",
        "endpoint": "",
    }
    if member is not None:
        report["alarms"] = [a["alarm"] for a in alarms if a["member_id"] == member.hex_id]
    if not urls:
        report["error"] = "member has not started yet (no client URLs); start its etcd process"
        return report
    errors = []
    for url in urls:
        try:
            st = client.status(url)
        except EtcdError as exc:
            errors.append(str(exc))
            continue
        report.update(
            reachable=True,
            endpoint=url,
            leader=st.is_leader,
            leader_id=format(st.leader, "x") if st.leader else "",
            learner=st.is_learner,
            version=st.version,
            db_size=st.db_size,
            db_size_in_use=st.db_size_in_use,
            raft_index=st.raft_index,
            raft_term=st.raft_term,
            revision=st.revision,
            cluster_id=format(st.cluster_id, "x"),
        )
        if not report["id"]:
            report["id"] = format(st.member_id, "x")
        try:
            if not st.is_learner:  # learners refuse even serializable range in some versions
                client.health_read(url)
        except EtcdError as exc:
            errors.append(str(exc))
            break
        if not st.leader:
            errors.append(f"{url}: member has no leader (election in progress or quorum lost)")
        elif st.errors:
            errors.extend(st.errors)
        elif not report["alarms"]:
            report["healthy"] = True
        break
    report["error"] = "; ".join(errors) if not report["healthy"] else ""
    if report["alarms"] and not report["error"]:
        report["error"] = f"alarms raised: {', '.join(report['alarms'])}"
    return report


# --------------------------------------------------------------------------- membership


def initial_cluster(members: Iterable[Member], extra: Mapping[str, Sequence[str]] | None = None) -> str:
    """``--initial-cluster`` value for a joining member: started members plus ``extra``."""
    parts = [f"{m.name}={u}" for m in members if m.name for u in m.peer_urls]
    for name, urls in (extra or {}).items():
        parts += [f"{name}={u}" for u in urls]
    return ",".join(parts)


def _wait(what: str, check: Callable[[], bool], timeout: float, interval: float = 0.5) -> None:
    deadline = time.monotonic() + timeout
    while True:
        if check():
            return
        if time.monotonic() > deadline:
            raise EtcdTimeoutError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(interval)


def ensure_member_present(
    client: EtcdClient,
    name: str,
    peer_urls: Sequence[str],
    promote: bool = True,
    wait_timeout: float = 120.0,
    check_mode: bool = False,
) -> dict[str, Any]:
    """Make ``name`` a voting member (or a learner when ``promote`` is false).

    Adds it as a learner when missing (its process must then be started with
    ``--initial-cluster-state existing`` and the returned ``initial_cluster``); promotes a
    learner once it has caught up with the leader, waiting at most ``wait_timeout`` seconds.
    """
    if not name:
        raise EtcdMemberError("member name is empty; give the etcd --name of the member")
    if not peer_urls:
        raise EtcdMemberError(f"member {name}: peer_urls is empty; give its --initial-advertise-peer-urls")
    for url in peer_urls:
        validate_endpoint(url)
    wanted = set(peer_urls)
    members = client.member_list()
    mine = [m for m in members if set(m.peer_urls) & wanted]
    same_name = [m for m in members if m.name == name and m not in mine]
    if same_name:
        raise EtcdMemberError(
            f"member name {name!r} is already taken by member {same_name[0].hex_id} with peer URLs "
            f"{', '.join(same_name[0].peer_urls)}; pick another name or remove that member first"
        )
    if len(mine) > 1:
        raise EtcdMemberError(
            f"peer URLs {', '.join(peer_urls)} are split across several members "
            f"({', '.join(m.hex_id for m in mine)}); remove the stale ones first"
        )
    if mine and mine[0].name and mine[0].name != name:
        raise EtcdMemberError(
            f"peer URLs {', '.join(peer_urls)} belong to member {mine[0].name!r} "
            f"({mine[0].hex_id}); remove it first or use its name"
        )
    result: dict[str, Any] = {"changed": False, "added": False, "promoted": False, "name": name}
    member = mine[0] if mine else None
    if member is None:
        result.update(changed=True, added=True)
        if check_mode:
            result.update(
                member_id="", learner=True, initial_cluster=initial_cluster(members, {name: list(peer_urls)})
            )
            return result
        member = _add_learner(client, list(peer_urls), wait_timeout)
        members = client.member_list()
    elif set(member.peer_urls) != wanted:
        raise EtcdMemberError(
            f"member {member.hex_id} has peer URLs {', '.join(member.peer_urls)}, not "
            f"{', '.join(peer_urls)}; updating peer URLs is not supported here: "
            "remove and re-add the member"
        )
    result["initial_cluster"] = initial_cluster(
        [m for m in members if m.id != member.id], {name: list(member.peer_urls)}
    )
    if member.is_learner and promote:
        result["changed"] = True
        if not check_mode:
            promote_when_ready(client, member.id, wait_timeout)
            result["promoted"] = True
    members = client.member_list()
    final = next((m for m in members if m.id == member.id), member)
    result.update(
        member_id=final.hex_id,
        learner=final.is_learner if not check_mode else member.is_learner,
        members=[m.as_dict() for m in members],
    )
    return result


def _add_learner(client: EtcdClient, peer_urls: list[str], wait_timeout: float) -> Member:
    """member/add, retried while etcd refuses it as "unhealthy cluster" (peers connected < 5s)."""
    try:
        return _retry_unavailable(lambda: client.member_add(peer_urls, learner=True), wait_timeout)
    except EtcdAPIError as exc:
        if exc.code != GRPC_ALREADY_EXISTS:
            raise
        # an earlier attempt that timed out was applied after all
        found = [m for m in client.member_list() if set(m.peer_urls) & set(peer_urls)]
        if not found:
            raise
        return found[0]


def promote_when_ready(client: EtcdClient, member_id: int, wait_timeout: float) -> None:
    """Promote a learner, retrying while etcd says it has not caught up (bounded by ``wait_timeout``)."""
    deadline = time.monotonic() + wait_timeout
    last = ""
    while True:
        try:
            client.member_promote(member_id)
            return
        except EtcdAPIError as exc:
            text = exc.etcd_message
            not_ready = (
                "in sync" in text
                or "not started" in text
                or "not ready" in text
                or isinstance(exc, EtcdUnavailableError)
            )
            if not not_ready:
                if "not a learner" in text:
                    return  # promoted by an earlier, interrupted run
                raise
            last = text
        except (EtcdTimeoutError, EtcdUnreachableError) as exc:
            last = str(exc)
        if time.monotonic() > deadline:
            raise EtcdTimeoutError(
                f"learner {member_id:x} did not catch up within {wait_timeout}s ({last}); check its etcd "
                "process is running with --initial-cluster-state existing and can reach the peers, then "
                "rerun (or raise wait_timeout for a large database)"
            )
        time.sleep(1.0)


def find_member(
    members: Sequence[Member],
    name: str | None = None,
    member_id: int | str | None = None,
    peer_url: str | None = None,
) -> Member | None:
    for m in members:
        if member_id is not None and m.id == parse_member_id(member_id):
            return m
        if name and m.name == name:
            return m
        if peer_url and peer_url in m.peer_urls:
            return m
    return None


def ensure_member_absent(
    client: EtcdClient,
    name: str | None = None,
    member_id: int | str | None = None,
    peer_url: str | None = None,
    force: bool = False,
    wait_timeout: float = 60.0,
    check_mode: bool = False,
) -> dict[str, Any]:
    """Remove a member, refusing when the voters left could not form a quorum (unless ``force``).

    When the member leads, leadership is handed to a healthy voter first so the cluster does
    not sit through an election timeout. A member given by ``member_id`` that does not exist
    is an error; by name or peer URL it is "already absent" (idempotent).
    """
    if name is None and member_id is None and peer_url is None:
        raise EtcdMemberError("say which member to remove: name, member_id or peer_url")
    members = client.member_list()
    target = find_member(members, name, member_id, peer_url)
    result: dict[str, Any] = {"changed": False, "moved_leader": False, "name": name or ""}
    if target is None:
        if member_id is not None:
            raise EtcdNotFoundError(
                f"member {parse_member_id(member_id):x} is not in the cluster; nothing "
                f"was removed. Current members: {', '.join(m.hex_id for m in members)}"
            )
        result.update(member_id="", members=[m.as_dict() for m in members])
        return result
    result.update(member_id=target.hex_id, name=target.name or name or "")
    health = cluster_health(client)
    by_id = {r["id"]: r for r in health["members"]}
    if not target.is_learner:
        voters = [m for m in members if not m.is_learner]
        remaining = [m for m in voters if m.id != target.id]
        healthy_left = [m for m in remaining if by_id.get(m.hex_id, {}).get("healthy")]
        if not remaining:
            raise EtcdMemberError(
                f"member {target.hex_id} is the last voting member; removing it would "
                "destroy the cluster. Delete the cluster instead"
            )
        if len(healthy_left) < quorum(len(remaining)) and not force:
            raise EtcdMemberError(
                f"removing {target.name or target.hex_id} would leave {len(remaining)} voting members of "
                f"which only {len(healthy_left)} are healthy, below the quorum of {quorum(len(remaining))}: "
                "the cluster would stop accepting writes. Bring the unhealthy members back (or replace them) "
                "first, or set force=true if you accept the outage"
            )
        if by_id.get(target.hex_id, {}).get("leader") and not check_mode:
            successor = next((m for m in healthy_left if not m.is_learner), None)
            if successor is not None:
                _move_leadership(client, target, successor, wait_timeout)
                result["moved_leader"] = True
    result["changed"] = True
    if check_mode:
        result["members"] = [m.as_dict() for m in members if m.id != target.id]
        return result
    # Never send the removal through the member being removed: it shuts down right after.
    others = [u for m in members if m.id != target.id for u in m.client_urls]
    remover = client.with_endpoints([u for u in client.endpoints if u not in target.client_urls] or others)
    members = _retry_unavailable(lambda: remover.member_remove(target.id), wait_timeout)
    result["members"] = [m.as_dict() for m in members]
    return result


def _move_leadership(client: EtcdClient, leader: Member, successor: Member, wait_timeout: float) -> None:
    endpoint = leader.client_urls[0]
    _retry_unavailable(lambda: client.move_leader(successor.id, endpoint), wait_timeout)

    def moved() -> bool:
        try:
            return client.status(successor.client_urls[0]).leader == successor.id
        except EtcdError:
            return False

    _wait(f"leadership to move to {successor.name or successor.hex_id}", moved, wait_timeout)


def _retry_unavailable(call: Callable[[], Any], timeout: float) -> Any:
    """Retry an etcd call that failed because the cluster was briefly unavailable."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            return call()
        except (EtcdUnavailableError, EtcdUnreachableError):
            if time.monotonic() > deadline:
                raise
            time.sleep(0.5)


def client_from_params(params: Mapping[str, Any]) -> EtcdClient:
    """Build a client from the modules' shared options (endpoints, cert, key, ca, timeout)."""
    return EtcdClient(
        params["endpoints"],
        cert=params.get("cert"),
        key=params.get("key"),
        ca=params.get("ca"),
        timeout=float(params.get("timeout") or 5.0),
        tls_server_name=params.get("tls_server_name"),
        resolve=params.get("resolve"),
    )


# Shared option spec of the etcd_* modules (AnsibleModule argument_spec format).
CONNECTION_ARGS: dict[str, Any] = {
    "endpoints": {"type": "list", "elements": "str", "required": True},
    "cert": {"type": "path"},
    "key": {"type": "path", "no_log": False},
    "ca": {"type": "path"},
    "timeout": {"type": "float", "default": 5.0},
    "tls_server_name": {"type": "str"},
    "resolve": {"type": "dict"},
}
