#!/usr/bin/env python3
"""Assemble a single-layer OCI image archive from host files, without a registry or Docker.

The archive is an OCI image layout (oci-layout, index.json, blobs/sha256/...) that
``ctr -n k8s.io images import`` accepts; every --ref becomes one image name. The layer
is an uncompressed, reproducible tar (fixed mtimes and owners, sorted entries), so the
same inputs always give the same manifest digest, which is printed on stdout.

    oci_image.py --out pause.tar --ref registry.k8s.io/pause:3.10 \
        --file /path/to/pause:/pause --entrypoint /pause
"""

from __future__ import annotations

import argparse
import hashlib
import io
import json
import os
import subprocess
import tarfile
import tempfile
from pathlib import PurePosixPath

MEDIA_MANIFEST = "application/vnd.oci.image.manifest.v1+json"
MEDIA_CONFIG = "application/vnd.oci.image.config.v1+json"
MEDIA_LAYER = "application/vnd.oci.image.layer.v1.tar"
MEDIA_INDEX = "application/vnd.oci.image.index.v1+json"
DEFAULT_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


def parse_args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", required=True, help="archive to write")
    p.add_argument("--ref", action="append", required=True, help="full image name (repeatable)")
    p.add_argument(
        "--file",
        action="append",
        default=[],
        metavar="SRC:DST[:MODE]",
        help="copy a host file into the image (symlinks followed)",
    )
    p.add_argument(
        "--busybox", metavar="PATH", help="install this static busybox as /bin/busybox with a link per applet"
    )
    p.add_argument("--dir", action="append", default=[], metavar="DST[:MODE]", help="create a directory")
    p.add_argument("--entrypoint", nargs="*", default=None)
    p.add_argument("--cmd", nargs="*", default=None)
    p.add_argument("--env", action="append", default=[], metavar="K=V")
    p.add_argument("--workdir", default="/")
    return p.parse_args()


def add_dir(tar: tarfile.TarFile, seen: set[str], path: str, mode: int = 0o755) -> None:
    parts = PurePosixPath(path.strip("/")).parts
    for i in range(1, len(parts) + 1):
        d = "/".join(parts[:i])
        if d in seen:
            continue
        seen.add(d)
        info = tarfile.TarInfo(d + "/")
        info.type = tarfile.DIRTYPE
        info.mode = mode if i == len(parts) else 0o755
        tar.addfile(info)


def build_layer(args: argparse.Namespace, fh) -> None:
    entries: list[tuple[str, str, object]] = []  # (dst, kind, payload)
    for spec in args.file:
        src, dst, *mode = spec.split(":")
        entries.append((dst.lstrip("/"), "file", (src, int(mode[0], 8) if mode else None)))
    for spec in args.dir:
        dst, *mode = spec.split(":")
        entries.append((dst.strip("/"), "dir", int(mode[0], 8) if mode else 0o755))
    if args.busybox:
        entries.append(("bin/busybox", "file", (args.busybox, 0o755)))
        applets = subprocess.run([args.busybox, "--list"], check=True, capture_output=True, text=True)
        for name in sorted(set(applets.stdout.split())):
            if name and name != "busybox":
                entries.append((f"bin/{name}", "link", "busybox"))
    entries.sort(key=lambda e: e[0])

    seen: set[str] = set()
    names: set[str] = set()
    with tarfile.open(fileobj=fh, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for dst, kind, payload in entries:
            parent = str(PurePosixPath(dst).parent)
            if parent not in ("", "."):
                add_dir(tar, seen, parent)
            if kind == "dir":
                add_dir(tar, seen, dst, payload)
                continue
            if dst in names:  # first one wins (explicit files sort with links)
                continue
            names.add(dst)
            info = tarfile.TarInfo(dst)
            if kind == "link":
                info.type = tarfile.SYMTYPE
                info.linkname = payload
                info.mode = 0o777
                tar.addfile(info)
                continue
            src, mode = payload
            st = os.stat(src)
            info.size = st.st_size
            info.mode = mode if mode is not None else (st.st_mode & 0o7777)
            with open(src, "rb") as f:
                tar.addfile(info, f)


def sha256_file(path: str) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def add_bytes(tar: tarfile.TarFile, name: str, data: bytes) -> None:
    info = tarfile.TarInfo(name)
    info.size = len(data)
    info.mode = 0o644
    tar.addfile(info, io.BytesIO(data))


def main() -> None:
    args = parse_args()
    out_dir = os.path.dirname(os.path.abspath(args.out))
    os.makedirs(out_dir, exist_ok=True)
    with tempfile.NamedTemporaryFile(dir=out_dir, suffix=".layer") as layer:
        build_layer(args, layer)
        layer.flush()
        layer_size = os.path.getsize(layer.name)
        layer_digest = sha256_file(layer.name)

        env = [f"PATH={DEFAULT_PATH}"] + [e for e in args.env if not e.startswith("PATH=")]
        cfg: dict = {"Env": env, "WorkingDir": args.workdir}
        if args.entrypoint:
            cfg["Entrypoint"] = args.entrypoint
        if args.cmd:
            cfg["Cmd"] = args.cmd
        config = json.dumps(
            {
                "architecture": "amd64",
                "os": "linux",
                "created": "1970-01-01T00:00:00Z",
                "config": cfg,
                "rootfs": {"type": "layers", "diff_ids": [f"sha256:{layer_digest}"]},
                "history": [{"created": "1970-01-01T00:00:00Z", "created_by": "hack/testenv/oci_image.py"}],
            },
            sort_keys=True,
            separators=(",", ":"),
        ).encode()
        config_digest = hashlib.sha256(config).hexdigest()
        manifest = json.dumps(
            {
                "schemaVersion": 2,
                "mediaType": MEDIA_MANIFEST,
                "config": {"mediaType": MEDIA_CONFIG, "digest": f"sha256:{config_digest}", "size": len(config)},
                "layers": [{"mediaType": MEDIA_LAYER, "digest": f"sha256:{layer_digest}", "size": layer_size}],
            },
            sort_keys=True,
            separators=(",", ":"),
        ).encode()
        manifest_digest = hashlib.sha256(manifest).hexdigest()
        index = json.dumps(
            {
                "schemaVersion": 2,
                "mediaType": MEDIA_INDEX,
                "manifests": [
                    {
                        "mediaType": MEDIA_MANIFEST,
                        "digest": f"sha256:{manifest_digest}",
                        "size": len(manifest),
                        "platform": {"architecture": "amd64", "os": "linux"},
                        "annotations": {
                            "io.containerd.image.name": ref,
                            "org.opencontainers.image.ref.name": ref.rsplit(":", 1)[-1],
                        },
                    }
                    for ref in args.ref
                ],
            },
            sort_keys=True,
            separators=(",", ":"),
        ).encode()

        tmp_out = args.out + ".tmp"
        with tarfile.open(tmp_out, mode="w", format=tarfile.PAX_FORMAT) as tar:
            add_bytes(tar, "oci-layout", b'{"imageLayoutVersion":"1.0.0"}')
            add_bytes(tar, "index.json", index)
            add_bytes(tar, f"blobs/sha256/{manifest_digest}", manifest)
            add_bytes(tar, f"blobs/sha256/{config_digest}", config)
            info = tarfile.TarInfo(f"blobs/sha256/{layer_digest}")
            info.size = layer_size
            info.mode = 0o644
            layer.seek(0)
            tar.addfile(info, layer)
        os.replace(tmp_out, args.out)
    print(f"sha256:{manifest_digest}")


if __name__ == "__main__":
    main()
