"""Transport to etcd: its v3 JSON gateway (``/v3/...``) over ``requests`` with client TLS.

Plain Python, no Ansible imports. We use the HTTP gateway every etcd >= 3.4 serves on its
client port instead of gRPC, so the operator image needs no grpc/protobuf pins that could
fight Ansible's. Holds the endpoints and TLS handling, the raw calls (:class:`EtcdClient`),
the decoded answers (:class:`Member`, :class:`Status`, :class:`KeyValue`), the error
classes every etcd module util raises, and the modules' shared connection options.
Snapshots live in ``etcd_snapshots``, health in ``etcd_cluster_health``, membership changes
in ``etcd_membership``.

Gateway conventions handled here: keys and values are base64; int64/uint64 fields (IDs,
revisions, sizes) arrive as JSON strings; errors come back as ``{"code", "message"}`` with
gRPC codes.
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import shutil
import tempfile
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import requests

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


def api_error(endpoint: str, path: str, status: int, body: Mapping[str, Any]) -> EtcdAPIError:
    """The error for an etcd error answer (a call's body, or an ``error`` line of a stream)."""
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
            raise api_error(endpoint, f"/v3/{path}", resp.status_code, detail)
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

    # ---- streams

    def first_reachable(self) -> str:
        """The first endpoint that answers a status call."""
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

    def stream(
        self, endpoint: str, path: str, timeout: float, body: Mapping[str, Any] | None = None
    ) -> requests.Response:
        """POST ``body`` (default ``{}``) to ``/v3/<path>`` on ``endpoint`` and return the response unread.

        For server-streaming RPCs (one JSON object a line); ``timeout`` bounds the wait for
        each chunk. An error answer before the stream starts raises; the caller closes it.
        """
        resp = self._send(endpoint, path, body or {}, stream=True, timeout=timeout)
        if resp.status_code != 200:
            self._decode(endpoint, path, resp)
        return resp


TLS_KEYS = ("ca.crt", "tls.crt", "tls.key")


def missing_tls(pems: Mapping[str, str] | None) -> list[str]:
    """Which of ca.crt, tls.crt and tls.key a ``tls`` option (PEM by key) lacks."""
    return [k for k in TLS_KEYS if not (pems or {}).get(k)]


@contextlib.contextmanager
def tls_files(pems: Mapping[str, str] | None, prefix: str = "etcd-tls-") -> Iterator[dict[str, str]]:
    """The PEMs of a ``tls`` option as files for the client (``{"ca", "cert", "key"}`` paths) in
    a private directory (0700, files 0600) removed on exit; nothing when ``pems`` is empty.
    Raises ValueError naming what is missing."""
    if not pems:
        yield {}
        return
    missing = missing_tls(pems)
    if missing:
        raise ValueError(f"tls: {', '.join(missing)} missing")
    certs = tempfile.mkdtemp(prefix=prefix)  # 0700
    try:
        paths = {}
        for key, option in zip(TLS_KEYS, ("ca", "cert", "key"), strict=True):
            paths[option] = os.path.join(certs, key)
            with open(os.open(paths[option], os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600), "w") as out:
                out.write(pems[key])
        yield paths
    finally:
        shutil.rmtree(certs, ignore_errors=True)


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


def module_result(module: Any, run: Callable[[dict[str, Any], bool], dict[str, Any]]) -> dict[str, Any]:
    """``run(params, check_mode)`` for an etcd_* AnsibleModule; an EtcdError fails the task with
    its message and its class name as ``error``, instead of a traceback."""
    try:
        return run(module.params, module.check_mode)
    except EtcdError as exc:
        module.fail_json(msg=str(exc), error=type(exc).__name__)
        raise  # not reached: fail_json exits
    except ValueError as exc:  # bad input, e.g. a tls option without its key
        module.fail_json(msg=str(exc), error="InvalidInput")
        raise


# Shared option spec of the etcd_* modules (AnsibleModule argument_spec format).
CONNECTION_ARGS: dict[str, Any] = {
    "endpoints": {"type": "list", "elements": "str", "required": True},
    "cert": {"type": "path"},
    "key": {"type": "path", "no_log": False},
    "ca": {"type": "path"},
    "tls": {"type": "dict", "no_log": True},  # instead of ca/cert/key: the PEMs (ca.crt, tls.crt, tls.key)
    "timeout": {"type": "float", "default": 5.0},
    "tls_server_name": {"type": "str"},
    "resolve": {"type": "dict"},
}
