#!/usr/bin/env python3
r"""Assemble an OCI image archive from host files, without a registry or Docker.

The archive is an OCI image layout (oci-layout, index.json, blobs/sha256/...) that
``ctr -n k8s.io images import`` accepts; every --ref becomes one image name. Layers are
uncompressed, reproducible tars (fixed mtimes, numeric owners, no user/group names, sorted
entries), so the same inputs always give the same manifest digest, which is printed on stdout.

    oci_image.py --out pause.tar --ref registry.k8s.io/pause:3.10 \
        --file /path/to/pause:/pause --entrypoint /pause

The layer built from --file/--tree/--dir/--symlink/--busybox goes on top of the --layer
tars, if any (lower first). A big, rarely changing part such as a whole Debian root file
system can be written once with --layer-out and reused with --layer:

    oci_image.py --layer-out base.tar --tree /path/to/rootfs:/
    oci_image.py --out app.tar --ref example.local/app:dev --layer base.tar \
        --tree ./roles:/opt/app/roles:0:0 --user 1001 --workdir /opt/app --entrypoint /app

--tree copies a directory recursively: directories, regular files, symlinks (kept as
symlinks) and hard links (kept as hard links); device nodes, sockets and FIFOs are skipped
(the container runtime provides /dev). Modes are kept; owners are the host's numeric ones
unless UID:GID is given. Every entry gets mtime 0, so Python byte code meant for such a tree
should be compiled with ``--invalidation-mode unchecked-hash``.
"""

from __future__ import annotations

import argparse
import fnmatch
import hashlib
import io
import json
import os
import stat
import subprocess
import tarfile
import tempfile
from dataclasses import dataclass
from pathlib import PurePosixPath

MEDIA_MANIFEST = "application/vnd.oci.image.manifest.v1+json"
MEDIA_CONFIG = "application/vnd.oci.image.config.v1+json"
MEDIA_LAYER = "application/vnd.oci.image.layer.v1.tar"
MEDIA_INDEX = "application/vnd.oci.image.index.v1+json"
DEFAULT_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
CREATED = "1970-01-01T00:00:00Z"


@dataclass
class Entry:
    """One path of the layer being built. kind: file, dir, link (symlink) or hardlink."""

    dst: str
    kind: str
    src: str | None = None  # file: host path to read
    mode: int | None = None  # None: the host file's mode (file) / 0o755 (dir)
    target: str | None = None  # link: link target; hardlink: the layer path it links to
    uid: int = 0
    gid: int = 0


def parse_args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", help="archive to write (required unless --layer-out)")
    p.add_argument("--ref", action="append", default=[], help="full image name (repeatable; required with --out)")
    p.add_argument(
        "--digest-ref",
        action="append",
        default=[],
        metavar="REPO",
        help="also name the image REPO@sha256:<its manifest digest> (repeatable): a reference by digest "
        "resolves locally where a controller forces imagePullPolicy Always on tagged images",
    )
    p.add_argument(
        "--file",
        action="append",
        default=[],
        metavar="SRC:DST[:MODE]",
        help="copy a host file into the image (symlinks followed)",
    )
    p.add_argument(
        "--tree",
        action="append",
        default=[],
        metavar="SRC:DST[:UID:GID]",
        help="copy a host directory tree into the image at DST (symlinks and hard links kept)",
    )
    p.add_argument(
        "--root-mode",
        default=None,
        metavar="MODE",
        help="start the layer with an entry for / with this mode (octal), owned by root: without it "
        "containerd leaves the snapshot's root directory 0700, which only root can enter",
    )
    p.add_argument(
        "--exclude",
        action="append",
        default=[],
        metavar="GLOB",
        help="skip --tree entries whose base name matches (a directory with everything in it)",
    )
    p.add_argument(
        "--busybox", metavar="PATH", help="install this static busybox as /bin/busybox with a link per applet"
    )
    p.add_argument("--dir", action="append", default=[], metavar="DST[:MODE[:UID:GID]]", help="create a directory")
    p.add_argument("--symlink", action="append", default=[], metavar="DST:TARGET", help="create a symbolic link")
    p.add_argument(
        "--layer",
        action="append",
        default=[],
        metavar="TAR",
        help="uncompressed layer tar (e.g. from --layer-out) under the built layer (repeatable, lowest first)",
    )
    p.add_argument("--layer-out", metavar="TAR", help="only write the built layer to TAR (print its digest); no image")
    p.add_argument("--entrypoint", nargs="*", default=None)
    p.add_argument("--cmd", nargs="*", default=None)
    # argparse cannot take "--" as a value of --entrypoint (e.g. tini's "/tini -- prog"):
    p.add_argument("--entrypoint-json", metavar="JSON", help='entrypoint as a JSON list, e.g. \'["/tini","--","x"]\'')
    p.add_argument("--cmd-json", metavar="JSON", help="cmd as a JSON list")
    p.add_argument("--env", action="append", default=[], metavar="K=V", help="PATH=... replaces the default PATH")
    p.add_argument("--label", action="append", default=[], metavar="K=V", help="image config label (repeatable)")
    p.add_argument("--workdir", default="/")
    p.add_argument("--user", help="user (and group) the container runs as, e.g. 1001 or 1001:0")
    args = p.parse_args()
    for name in ("entrypoint", "cmd"):
        raw = getattr(args, f"{name}_json")
        if raw is not None:
            value = json.loads(raw)
            if not (isinstance(value, list) and all(isinstance(v, str) for v in value)):
                p.error(f"--{name}-json: expected a JSON list of strings")
            setattr(args, name, value)
    if not args.layer_out:
        if not args.out:
            p.error("--out is required (unless --layer-out)")
        if not args.ref:
            p.error("--ref is required with --out")
    return args


def owner(spec: list[str], what: str) -> tuple[int, int] | None:
    if not spec:
        return None
    if len(spec) != 2:
        raise SystemExit(f"oci_image.py: {what}: expected UID:GID after the path, got {':'.join(spec)}")
    return int(spec[0]), int(spec[1])


def tree_entries(src: str, dst: str, own: tuple[int, int] | None, excludes: list[str]) -> list[Entry]:
    """Every path under host directory src as layer entries under dst (dst itself included)."""
    out: list[Entry] = []
    first_of_inode: dict[tuple[int, int], str] = {}

    def walk(host: str, rel: str) -> None:
        st = os.lstat(host)
        uid, gid = own if own else (st.st_uid, st.st_gid)
        mode = stat.S_IMODE(st.st_mode)
        if stat.S_ISDIR(st.st_mode):
            if rel:
                out.append(Entry(rel, "dir", mode=mode, uid=uid, gid=gid))
            for name in sorted(os.listdir(host)):
                if any(fnmatch.fnmatchcase(name, g) for g in excludes):
                    continue
                walk(os.path.join(host, name), f"{rel}/{name}" if rel else name)
        elif stat.S_ISLNK(st.st_mode):
            out.append(Entry(rel, "link", target=os.readlink(host), uid=uid, gid=gid))
        elif stat.S_ISREG(st.st_mode):
            key = (st.st_dev, st.st_ino)
            if st.st_nlink > 1 and key in first_of_inode:
                out.append(Entry(rel, "hardlink", target=first_of_inode[key], uid=uid, gid=gid, mode=mode))
            else:
                first_of_inode[key] = rel
                out.append(Entry(rel, "file", src=host, mode=mode, uid=uid, gid=gid))
        # device nodes, sockets, FIFOs: skipped (the runtime mounts its own /dev)

    base = dst.strip("/")
    walk(src, base)
    # Hard links must point at the entry that comes first in the (sorted) layer.
    groups: dict[str, list[Entry]] = {}
    for e in out:
        if e.kind in ("file", "hardlink"):
            groups.setdefault(e.target if e.kind == "hardlink" else e.dst, []).append(e)
    for members in groups.values():
        if len(members) < 2:
            continue
        members.sort(key=lambda e: e.dst)
        primary = members[0]
        src_path = next(m.src for m in members if m.kind == "file")
        primary.kind, primary.src, primary.target = "file", src_path, None
        for m in members[1:]:
            m.kind, m.src, m.target = "hardlink", None, primary.dst
    return out


def add_dir(tar: tarfile.TarFile, seen: set[str], path: str, mode: int = 0o755, explicit: dict | None = None) -> None:
    parts = PurePosixPath(path.strip("/")).parts
    for i in range(1, len(parts) + 1):
        d = "/".join(parts[:i])
        if d in seen:
            continue
        seen.add(d)
        info = tarfile.TarInfo(d + "/")
        info.type = tarfile.DIRTYPE
        info.mode = mode if i == len(parts) else 0o755
        if explicit and d in explicit:  # a --dir or --tree directory: its own mode and owner
            info.mode, info.uid, info.gid = explicit[d]
        tar.addfile(info)


def layer_entries(args: argparse.Namespace) -> list[Entry]:
    entries: list[Entry] = []
    for spec in args.file:
        src, dst, *mode = spec.split(":")
        entries.append(Entry(dst.lstrip("/"), "file", src=src, mode=int(mode[0], 8) if mode else None))
    for spec in args.dir:
        dst, *rest = spec.split(":")
        own = owner(rest[1:], f"--dir {spec}") or (0, 0)
        entries.append(Entry(dst.strip("/"), "dir", mode=int(rest[0], 8) if rest else 0o755, uid=own[0], gid=own[1]))
    for spec in args.symlink:
        dst, target = spec.split(":", 1)
        entries.append(Entry(dst.strip("/"), "link", target=target))
    for spec in args.tree:
        src, dst, *rest = spec.split(":")
        entries.extend(tree_entries(src, dst, owner(rest, f"--tree {spec}"), args.exclude))
    if args.busybox:
        entries.append(Entry("bin/busybox", "file", src=args.busybox, mode=0o755))
        applets = subprocess.run([args.busybox, "--list"], check=True, capture_output=True, text=True)
        for name in sorted(set(applets.stdout.split())):
            if name and name != "busybox":
                entries.append(Entry(f"bin/{name}", "link", target="busybox"))
    entries.sort(key=lambda e: e.dst)  # stable: among equal paths the order above wins
    return entries


def build_layer(args: argparse.Namespace, fh) -> int:
    """Write the layer to fh; return how many entries it has."""
    entries = layer_entries(args)
    # Directories named by --dir (listed first, so they win over --tree ones) keep their mode
    # and owner even when created as the parent of something else.
    explicit: dict[str, tuple[int, int, int]] = {}
    for e in entries:
        if e.kind == "dir" and e.dst:
            explicit.setdefault(e.dst, (e.mode, e.uid, e.gid))

    seen: set[str] = set()
    names: set[str] = set()
    with tarfile.open(fileobj=fh, mode="w", format=tarfile.PAX_FORMAT) as tar:
        if args.root_mode:
            root = tarfile.TarInfo("./")
            root.type = tarfile.DIRTYPE
            root.mode = int(args.root_mode, 8)
            tar.addfile(root)
        for e in entries:
            parent = str(PurePosixPath(e.dst).parent)
            if parent not in ("", "."):
                add_dir(tar, seen, parent, explicit=explicit)
            if e.kind == "dir":
                add_dir(tar, seen, e.dst, e.mode, explicit=explicit)
                continue
            if e.dst in names:  # first one wins (explicit files sort with links)
                continue
            names.add(e.dst)
            info = tarfile.TarInfo(e.dst)
            info.uid, info.gid = e.uid, e.gid
            if e.kind == "link":
                info.type = tarfile.SYMTYPE
                info.linkname = e.target
                info.mode = 0o777
                tar.addfile(info)
                continue
            if e.kind == "hardlink":
                info.type = tarfile.LNKTYPE
                info.linkname = e.target
                info.mode = e.mode
                tar.addfile(info)
                continue
            st = os.stat(e.src)
            info.size = st.st_size
            info.mode = e.mode if e.mode is not None else (st.st_mode & 0o7777)
            with open(e.src, "rb") as f:
                tar.addfile(info, f)
    return len(seen) + len(names)


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


def dumps(obj: dict) -> bytes:
    return json.dumps(obj, sort_keys=True, separators=(",", ":")).encode()


def write_layer_only(args: argparse.Namespace) -> None:
    out_dir = os.path.dirname(os.path.abspath(args.layer_out))
    os.makedirs(out_dir, exist_ok=True)
    tmp_out = args.layer_out + ".tmp"
    with open(tmp_out, "wb") as fh:
        build_layer(args, fh)
    digest = sha256_file(tmp_out)
    os.replace(tmp_out, args.layer_out)
    print(f"sha256:{digest}")


def main() -> None:
    args = parse_args()
    if args.layer_out:
        write_layer_only(args)
        return
    out_dir = os.path.dirname(os.path.abspath(args.out))
    os.makedirs(out_dir, exist_ok=True)
    with tempfile.NamedTemporaryFile(dir=out_dir, suffix=".layer") as layer:
        n_entries = build_layer(args, layer)
        layer.flush()
        # (path, digest, size), lowest first; the built layer only if it has something
        # or is the only one.
        layers = [(p, sha256_file(p), os.path.getsize(p)) for p in args.layer]
        if n_entries or not layers:
            layers.append((layer.name, sha256_file(layer.name), os.path.getsize(layer.name)))

        path_env = [e for e in args.env if e.startswith("PATH=")]
        env = (path_env[-1:] or [f"PATH={DEFAULT_PATH}"]) + [e for e in args.env if not e.startswith("PATH=")]
        cfg: dict = {"Env": env, "WorkingDir": args.workdir}
        if args.entrypoint:
            cfg["Entrypoint"] = args.entrypoint
        if args.cmd:
            cfg["Cmd"] = args.cmd
        if args.user:
            cfg["User"] = args.user
        if args.label:
            cfg["Labels"] = dict(label.split("=", 1) for label in args.label)
        config = dumps(
            {
                "architecture": "amd64",
                "os": "linux",
                "created": CREATED,
                "config": cfg,
                "rootfs": {"type": "layers", "diff_ids": [f"sha256:{d}" for _, d, _ in layers]},
                "history": [{"created": CREATED, "created_by": "hack/testenv/oci_image.py"} for _ in layers],
            }
        )
        config_digest = hashlib.sha256(config).hexdigest()
        manifest = dumps(
            {
                "schemaVersion": 2,
                "mediaType": MEDIA_MANIFEST,
                "config": {"mediaType": MEDIA_CONFIG, "digest": f"sha256:{config_digest}", "size": len(config)},
                "layers": [{"mediaType": MEDIA_LAYER, "digest": f"sha256:{d}", "size": s} for _, d, s in layers],
            }
        )
        manifest_digest = hashlib.sha256(manifest).hexdigest()
        refs = args.ref + [f"{repo}@sha256:{manifest_digest}" for repo in args.digest_ref]
        index = dumps(
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
                    for ref in refs
                ],
            }
        )

        tmp_out = args.out + ".tmp"
        with tarfile.open(tmp_out, mode="w", format=tarfile.PAX_FORMAT) as tar:
            add_bytes(tar, "oci-layout", b'{"imageLayoutVersion":"1.0.0"}')
            add_bytes(tar, "index.json", index)
            add_bytes(tar, f"blobs/sha256/{manifest_digest}", manifest)
            add_bytes(tar, f"blobs/sha256/{config_digest}", config)
            written: set[str] = set()
            for path, digest, size in layers:
                if digest in written:
                    continue
                written.add(digest)
                info = tarfile.TarInfo(f"blobs/sha256/{digest}")
                info.size = size
                info.mode = 0o644
                with open(path, "rb") as f:
                    tar.addfile(info, f)
        os.replace(tmp_out, args.out)
    print(f"sha256:{manifest_digest}")


if __name__ == "__main__":
    main()
