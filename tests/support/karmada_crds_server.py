"""Karmada's crds.tar.gz built from the downloaded Karmada module, served over loopback HTTP.

The release tarball is ``charts/karmada/_crds`` renamed to ``crds/`` (top-level ``crds/``,
directory entries before files, no ``./`` prefix). Tests and the end-to-end bed serve this
instead of reaching GitHub. Run as a script to serve until interrupted:

    python tests/support/karmada_crds_server.py [--port 0] [--out FILE]
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import io
import os
import subprocess
import sys
import tarfile
import threading
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def pinned(key: str) -> str:
    """One pin of hack/versions.env (KARMADA_VERSION, KARMADA_PREVIOUS_VERSION, ...)."""
    for line in (ROOT / "hack" / "versions.env").read_text().splitlines():
        if line.startswith(f"{key}="):
            return line.split("=", 1)[1].strip()
    raise RuntimeError(f"{key} missing from hack/versions.env")


def karmada_version() -> str:
    """KARMADA_VERSION from hack/versions.env (the one pin)."""
    return pinned("KARMADA_VERSION")


def _modcache() -> Path:
    env = os.environ.get("GOMODCACHE")
    if env:
        return Path(env)
    try:
        out = subprocess.run(["go", "env", "GOMODCACHE"], capture_output=True, text=True, timeout=30, check=True)
        if out.stdout.strip():
            return Path(out.stdout.strip())
    except (OSError, subprocess.SubprocessError):
        pass
    return Path(os.environ.get("GOPATH", Path.home() / "go")) / "pkg" / "mod"


def crds_source(version: str | None = None) -> Path:
    """charts/karmada/_crds of the Karmada module the test environment downloaded."""
    version = version or karmada_version()
    path = _modcache() / "github.com" / "karmada-io" / f"karmada@{version}" / "charts" / "karmada" / "_crds"
    if not (path / "bases").is_dir():
        raise RuntimeError(f"{path} not found: run `make testenv-bin` (`make testenv-bin-previous` for the upgrade "
                           f"tests' previous release; they download github.com/karmada-io/karmada@{version}) or "
                           f"`go mod download github.com/karmada-io/karmada@{version}`")
    return path


def build_tarball(source: Path | None = None, top: str = "crds") -> bytes:
    """A gzipped tar of ``source`` under ``top/``: directories before files, sorted, reproducible."""
    source = source or crds_source()
    buf = io.BytesIO()
    # mtime 0 in the gzip header and the entries: the same source gives the same sha256.
    with gzip.GzipFile(fileobj=buf, mode="wb", mtime=0) as gz, tarfile.open(fileobj=gz, mode="w") as tar:
        dirs = sorted(p for p in source.rglob("*") if p.is_dir())
        files = sorted(p for p in source.rglob("*") if p.is_file())
        for path in [source, *dirs]:
            info = tarfile.TarInfo(top if path == source else f"{top}/{path.relative_to(source)}")
            info.type, info.mode, info.mtime = tarfile.DIRTYPE, 0o755, 0
            tar.addfile(info)
        for path in files:
            data = path.read_bytes()
            info = tarfile.TarInfo(f"{top}/{path.relative_to(source)}")
            info.size, info.mode, info.mtime = len(data), 0o644, 0
            tar.addfile(info, io.BytesIO(data))
    return buf.getvalue()


@dataclass
class CrdServer:
    """A loopback HTTP server answering every GET of a path ending in crds.tar.gz with ``data``."""

    server: ThreadingHTTPServer
    thread: threading.Thread
    data: bytes
    version: str

    @property
    def base_url(self) -> str:
        host, port = self.server.server_address[:2]
        return f"http://{host}:{port}"

    @property
    def url(self) -> str:
        return f"{self.base_url}/{self.version}/crds.tar.gz"

    @property
    def sha256(self) -> str:
        return hashlib.sha256(self.data).hexdigest()

    @property
    def hits(self) -> int:
        return self.server.hits  # type: ignore[attr-defined]

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(timeout=10)


def serve(data: bytes | None = None, port: int = 0, version: str | None = None,
          host: str = "127.0.0.1") -> CrdServer:
    """Start serving on ``host`` (loopback unless pods must reach it) in a daemon thread."""
    version = version or karmada_version()
    payload = build_tarball(crds_source(version)) if data is None else data

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 - http.server's naming
            if not self.path.split("?", 1)[0].endswith("/crds.tar.gz"):
                self.send_error(404)
                return
            self.server.hits += 1  # type: ignore[attr-defined]
            self.send_response(200)
            self.send_header("Content-Type", "application/gzip")
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)

        def log_message(self, fmt: str, *args: object) -> None:
            pass

    server = ThreadingHTTPServer((host, port), Handler)
    server.hits = 0  # type: ignore[attr-defined]
    thread = threading.Thread(target=server.serve_forever, name="karmada-crds-server", daemon=True)
    thread.start()
    return CrdServer(server, thread, payload, version)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--port", type=int, default=0, help="loopback port (0: any free port)")
    parser.add_argument("--version", default=None, help="Karmada module version (default: hack/versions.env)")
    parser.add_argument("--out", default=None, help="also write the tarball to this file")
    parser.add_argument("--build-only", action="store_true", help="write --out and exit without serving")
    args = parser.parse_args(argv)
    data = build_tarball(crds_source(args.version))
    if args.out:
        Path(args.out).write_bytes(data)
    if args.build_only:
        print(hashlib.sha256(data).hexdigest())
        return 0
    crd_server = serve(data, args.port, args.version)
    print(f"url={crd_server.url}\nsha256={crd_server.sha256}", flush=True)
    try:
        crd_server.thread.join()
    except KeyboardInterrupt:
        crd_server.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
