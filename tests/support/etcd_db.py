"""Every key of an etcd database or snapshot file, read from its bbolt pages: nothing is started.

etcd keeps its whole MVCC history in the bbolt bucket ``key``: each bbolt key is a revision
(8-byte big-endian main revision, ``_``, 8-byte sub revision, and a trailing ``t`` when the
entry is a deletion), each value an ``mvccpb.KeyValue`` protobuf (key, create_revision,
mod_revision, version, value, lease). bbolt keeps the bucket sorted, so replaying it in order
(a put sets the key, a deletion removes it) gives the keys as they stood at the file's last
revision: what ``etcdctl get --prefix ""`` would answer from a member started on the file.
Compaction only drops history that a later entry overrides, so the replay holds after it too.

``etcd_keys_json`` reads the same shape from ``etcdctl get --prefix "" -w json`` (keys and
values base64 there), so a snapshot and a live member compare key by key, byte for byte
(``compare_keys``, with the keys allowed to differ named by ``MayDiffer`` rules).
tests/integration/test_etcd_db_reader.py checks this reader against a real etcd.
"""

from __future__ import annotations

import base64
import json
import mmap
import os
import struct
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

BOLT_MAGIC = 0xED0CDAED
_BRANCH, _LEAF = 0x01, 0x02
_BUCKET = 0x01  # a leaf element that is a nested bucket
_REVISION = 17  # bytes of a revision key; 18 with the deletion mark
_FNV_OFFSET, _FNV_PRIME = 0xCBF29CE484222325, 0x100000001B3


@dataclass(frozen=True)
class KeyValue:
    key: bytes
    value: bytes
    create_revision: int
    mod_revision: int
    version: int
    lease: int


@dataclass(frozen=True)
class Keys:
    revision: int  # the last revision the file (or the answer) holds
    kvs: dict[bytes, KeyValue]


def read_keys(path: str | os.PathLike[str]) -> Keys:
    """The live keys of an etcd database or snapshot (its sha256 trailer, if any, is ignored)."""
    with open(path, "rb") as handle, mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ) as data:
        try:
            return _replay(data)
        except (struct.error, IndexError, ValueError) as exc:
            raise ValueError(f"{path}: not a readable etcd database: {exc}") from None


def etcd_keys_json(text: str) -> Keys:
    """``etcdctl get --prefix "" -w json``'s answer in the same shape (the header's revision)."""
    doc = json.loads(text)
    kvs = {}
    for kv in doc.get("kvs") or []:
        key = base64.b64decode(kv["key"])
        kvs[key] = KeyValue(key, base64.b64decode(kv.get("value", "")), int(kv.get("create_revision", 0)),
                            int(kv.get("mod_revision", 0)), int(kv.get("version", 0)), int(kv.get("lease", 0)))
    return Keys(int(doc["header"]["revision"]), kvs)


# --------------------------------------------------------------------------- bbolt


def _fnv64a(data: bytes) -> int:
    h = _FNV_OFFSET
    for byte in data:
        h = ((h ^ byte) * _FNV_PRIME) & 0xFFFFFFFFFFFFFFFF
    return h


def _root(data: mmap.mmap) -> tuple[int, int]:
    """(page size, root bucket page) of the newest meta page whose checksum holds."""
    metas = []
    page_size = struct.unpack_from("<I", data, 16 + 8)[0]
    for pgid in (0, 1):
        base = pgid * page_size + 16
        magic, _version, psize, _flags, root, _seq, _free, _hwm, txid, checksum = struct.unpack_from(
            "<IIII6Q", data, base)
        if magic == BOLT_MAGIC and psize == page_size and _fnv64a(bytes(data[base : base + 56])) == checksum:
            metas.append((txid, root))
    if not metas:
        raise ValueError("no valid bbolt meta page")
    return page_size, max(metas)[1]


def _elements(buf: mmap.mmap | bytes, off: int, data: mmap.mmap, page_size: int) -> Iterator[tuple[int, bytes, bytes]]:
    """(flags, key, value) of every leaf element under the page at ``off`` of ``buf``, in order."""
    _id, flags, count, _overflow = struct.unpack_from("<QHHI", buf, off)
    if flags & _BRANCH:
        for i in range(count):
            _pos, _ksize, child = struct.unpack_from("<IIQ", buf, off + 16 + 16 * i)
            yield from _elements(data, child * page_size, data, page_size)
    elif flags & _LEAF:
        for i in range(count):
            e = off + 16 + 16 * i
            eflags, pos, ksize, vsize = struct.unpack_from("<IIII", buf, e)
            start = e + pos
            yield eflags, bytes(buf[start : start + ksize]), bytes(buf[start + ksize : start + ksize + vsize])
    else:
        raise ValueError(f"page at byte {off} is neither a branch nor a leaf (flags {flags:#x})")


def _bucket(data: mmap.mmap, page_size: int, parent_off: int, name: bytes) -> tuple[mmap.mmap | bytes, int]:
    """(buffer, offset) of the top page of bucket ``name`` (an inline bucket is its own buffer)."""
    for eflags, key, value in _elements(data, parent_off, data, page_size):
        if key == name and eflags & _BUCKET:
            root = struct.unpack_from("<Q", value, 0)[0]
            return (value, 16) if root == 0 else (data, root * page_size)  # inline: the page follows the header
    raise ValueError(f"no bbolt bucket {name.decode()!r}: not an etcd database")


def _replay(data: mmap.mmap) -> Keys:
    page_size, root = _root(data)
    buf, off = _bucket(data, page_size, root * page_size, b"key")
    kvs: dict[bytes, KeyValue] = {}
    revision = 0
    for _flags, rev, value in _elements(buf, off, data, page_size):
        if len(rev) not in (_REVISION, _REVISION + 1):
            raise ValueError(f"a key bucket entry named {rev!r} is not a revision")
        revision = max(revision, struct.unpack_from(">Q", rev, 0)[0])
        kv = _key_value(value)
        if not kv.key:  # etcdutl's --bump-revision marker: an empty entry at the new revision
            continue
        if len(rev) == _REVISION + 1 and rev[-1:] == b"t":
            kvs.pop(kv.key, None)
        else:
            kvs[kv.key] = kv
    return Keys(revision, kvs)


# --------------------------------------------------------------------------- mvccpb.KeyValue


def _varint(buf: bytes, i: int) -> tuple[int, int]:
    shift = result = 0
    while True:
        byte = buf[i]
        i += 1
        result |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return result, i
        shift += 7
        if shift > 63:
            raise ValueError("varint longer than 10 bytes")


def _key_value(buf: bytes) -> KeyValue:
    """Fields 1 key, 2 create_revision, 3 mod_revision, 4 version, 5 value, 6 lease (mvccpb/kv.proto)."""
    fields: dict[int, int | bytes] = {}
    i = 0
    while i < len(buf):
        tag, i = _varint(buf, i)
        number, wire = tag >> 3, tag & 7
        if wire == 0:
            fields[number], i = _varint(buf, i)
        elif wire == 2:
            size, i = _varint(buf, i)
            fields[number] = bytes(buf[i : i + size])
            i += size
        elif wire == 1:
            i += 8
        elif wire == 5:
            i += 4
        else:
            raise ValueError(f"protobuf wire type {wire} in a KeyValue")
    if i != len(buf):
        raise ValueError("a KeyValue runs past its entry")
    return KeyValue(bytes(fields.get(1, b"")), bytes(fields.get(5, b"")), int(fields.get(2, 0)),
                    int(fields.get(3, 0)), int(fields.get(4, 0)), int(fields.get(6, 0)))


# --------------------------------------------------------------------------- comparing


@dataclass(frozen=True)
class MayDiffer:
    """Keys under ``prefix`` that may legitimately differ from the snapshot, and ``why``.

    ``fields`` None: the key may hold anything or be gone. Otherwise the key must still be there
    with the snapshot's create revision (the object restored and updated since, not deleted and
    made again by the restored plane), and its value a JSON object (Karmada's CRD objects and
    Clusters are stored as JSON) equal to the snapshot's once the dotted ``fields`` (e.g.
    ``status``, ``metadata.managedFields``) are left out of both. ``fields`` empty: the value
    may differ (it is protobuf, so no field can be singled out; the test compares what matters
    of it through the API), but the key and its create revision must be there.

    ``unordered``: dotted paths of lists compared as sets of items (each item whole), for a list
    whose order carries no meaning and is remade by its writer (a binding's scheduled clusters)."""

    prefix: bytes
    fields: tuple[str, ...] | None
    why: str
    unordered: tuple[str, ...] = ()


def compare_keys(snapshot: Keys, live: Keys, rules: list[MayDiffer]) -> tuple[list[str], dict[bytes, list[bytes]]]:
    """(problems, allowed): every key of ``snapshot`` must be in ``live`` with the same bytes and
    the same create revision, except as the first rule whose prefix it starts with allows.
    ``problems`` names each key that breaks that (gone, made again, other bytes, or other fields
    than its rule allows); ``allowed`` lists, per
    rule prefix, the keys that did differ within their rule (what the rule was needed for)."""
    problems: list[str] = []
    allowed: dict[bytes, list[bytes]] = {}
    for key in sorted(snapshot.kvs):
        was, now = snapshot.kvs[key], live.kvs.get(key)
        rule = next((r for r in rules if key.startswith(r.prefix)), None)
        name = key.decode(errors="backslashreplace")
        if rule is not None and rule.fields is None:
            if now is None or now.value != was.value:
                allowed.setdefault(rule.prefix, []).append(key)
            continue
        if now is None:
            problems.append(f"{name}: gone" if rule is None else
                            f"{name}: gone (only {', '.join(rule.fields) or 'its value'} may differ)")
            continue
        # The same object, restored: not one the restored plane deleted and made again (a
        # re-created object may even hold the same bytes).
        if now.create_revision != was.create_revision:
            problems.append(f"{name}: made again (create_revision {was.create_revision} in the snapshot, "
                            f"{now.create_revision} now)")
            continue
        if now.value == was.value:
            continue
        if rule is None:
            problems.append(f"{name}: other bytes (mod_revision {was.mod_revision} in the snapshot, "
                            f"{now.mod_revision} now)")
            continue
        if not rule.fields:
            allowed.setdefault(rule.prefix, []).append(key)
            continue
        try:
            before, after = json.loads(was.value), json.loads(now.value)
        except ValueError:
            problems.append(f"{name}: not JSON, so its fields cannot be compared (only "
                            f"{', '.join(rule.fields)} may differ)")
            continue
        before = _sorted_lists(_without(before, rule.fields), rule.unordered)
        after = _sorted_lists(_without(after, rule.fields), rule.unordered)
        paths = _json_differences(before, after)
        if paths:
            first = paths[0]
            was_text, now_text = _dumps(_at(before, first))[:200], _dumps(_at(after, first))[:200]
            problems.append(f"{name}: {', '.join(paths[:8])} differ (only {', '.join(rule.fields)} may); "
                            f"{first}: {was_text} in the snapshot, {now_text} now")
            continue
        allowed.setdefault(rule.prefix, []).append(key)
    return problems, allowed


def _without(doc: object, fields: tuple[str, ...]) -> object:
    doc = json.loads(json.dumps(doc))
    for field in fields:
        *parents, last = field.split(".")
        node = doc
        for part in parents:
            node = node.get(part) if isinstance(node, dict) else None
        if isinstance(node, dict):
            node.pop(last, None)
    return doc


def _at(doc: object, path: str) -> object:
    for part in path.split(".") if path and path != "(the whole value)" else []:
        doc = doc.get(part) if isinstance(doc, dict) else None
    return doc


def _dumps(value: object) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"))


def _sorted_lists(doc: object, paths: tuple[str, ...]) -> object:
    """``doc`` with the lists at ``paths`` in a canonical order (items compared whole)."""
    for path in paths:
        *parents, last = path.split(".")
        node = doc
        for part in parents:
            node = node.get(part) if isinstance(node, dict) else None
        if isinstance(node, dict) and isinstance(node.get(last), list):
            node[last] = sorted(node[last], key=_dumps)
    return doc


def _json_differences(a: object, b: object, path: str = "") -> list[str]:
    """Dotted paths where two JSON documents differ (the value itself when not both objects)."""
    if isinstance(a, dict) and isinstance(b, dict):
        out: list[str] = []
        for k in sorted(set(a) | set(b)):
            out += _json_differences(a.get(k), b.get(k), f"{path}.{k}" if path else k)
        return out
    return [] if a == b else [path or "(the whole value)"]


__all__ = ["KeyValue", "Keys", "MayDiffer", "compare_keys", "etcd_keys_json", "read_keys"]


if __name__ == "__main__":  # python tests/support/etcd_db.py FILE: print the keys and the revision
    import sys

    keys = read_keys(Path(sys.argv[1]))
    for k in sorted(keys.kvs):
        print(k.decode(errors="backslashreplace"), len(keys.kvs[k].value))
    print(f"revision {keys.revision}, {len(keys.kvs)} keys")
