"""karmada_crds: fetching with cache and checksum, safe tar reading, patch rendering.

The good tarball is built from the Karmada module the test environment downloaded (the same
bytes the release's crds.tar.gz holds) and served over loopback HTTP; bad ones are built here.
"""

from __future__ import annotations

import base64
import hashlib
import io
import socket
import tarfile
from pathlib import Path

import pytest

from karmada_operator.controlplane import crds as karmada_crds
from karmada_operator.controlplane.crds import CrdSourceError
from support.karmada_crds_server import build_tarball, crds_source, serve

CA_PEM = b"-----BEGIN CERTIFICATE-----\nMIIBdummy\n-----END CERTIFICATE-----\n"
CA = base64.b64encode(CA_PEM).decode()
CRD = """apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: {name}
  creationTimestamp: null
spec:
  group: work.karmada.io
  names: {{kind: Thing, plural: things}}
  scope: Namespaced
  versions: [{{name: v1alpha1, served: true, storage: true}}]
status: {{}}
"""
PATCH = """apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: {name}
spec:
  conversion:
    strategy: Webhook
    webhook:
      clientConfig:
        url: "https://{{{{name}}}}.{{{{namespace}}}}.svc:443/convert"
        caBundle: "{{{{caBundle}}}}"
      conversionReviewVersions: ["v1"]
"""


def make_tar(entries: list[tuple], compress: bool = True) -> bytes:
    """entries: (name, content bytes) for files, (name, None) for directories, (name, 'sym'|'hard', target)."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz" if compress else "w") as tar:
        for entry in entries:
            name, content = entry[0], entry[1]
            info = tarfile.TarInfo(name)
            if content is None:
                info.type = tarfile.DIRTYPE
                tar.addfile(info)
            elif content in ("sym", "hard"):
                info.type = tarfile.SYMTYPE if content == "sym" else tarfile.LNKTYPE
                info.linkname = entry[2]
                tar.addfile(info)
            else:
                info.size = len(content)
                tar.addfile(info, io.BytesIO(content))
    return buf.getvalue()


def good_entries(prefix: str = "") -> list[tuple]:
    return [
        (f"{prefix}crds", None), (f"{prefix}crds/bases", None), (f"{prefix}crds/bases/work", None),
        (f"{prefix}crds/patches", None),
        (f"{prefix}crds/bases/work/things.yaml", CRD.format(name="things.work.karmada.io").encode()),
        (f"{prefix}crds/bases/work/others.yaml", CRD.format(name="others.work.karmada.io").encode()),
        (f"{prefix}crds/kustomization.yaml", b"resources: []\n"),
        (f"{prefix}crds/patches/webhook_in_things.yaml", PATCH.format(name="things.work.karmada.io").encode()),
    ]


@pytest.fixture(scope="module")
def real_tarball() -> bytes:
    return build_tarball()


@pytest.fixture(scope="module")
def crd_server(real_tarball):
    server = serve(real_tarball)
    yield server
    server.stop()


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


# --------------------------------------------------------------------------- the real tarball


def test_real_tarball_has_karmadas_layout(real_tarball):
    with tarfile.open(fileobj=io.BytesIO(real_tarball)) as tar:
        names = tar.getnames()
        kinds = {m.name: m.isdir() for m in tar.getmembers()}
    assert names[0] == "crds"
    assert not any(n.startswith(("./", "/")) for n in names)
    first_file = next(i for i, n in enumerate(names) if not kinds[n])
    assert all(kinds[n] for n in names[:first_file]) and not any(kinds[n] for n in names[first_file:])
    assert "crds/patches/webhook_in_resourcebindings.yaml" in names
    assert build_tarball() == real_tarball  # reproducible: same source, same sha256


def test_real_crds_rendered_sorted_and_patched(real_tarball):
    crds = karmada_crds.render_crds(real_tarball, CA, "kd-webhook", "tenant-a")
    names = [c["metadata"]["name"] for c in crds]
    bases = sorted(p.name for p in (crds_source() / "bases").rglob("*.yaml"))
    assert len(names) == len(bases) and names == sorted(names)
    assert {"propagationpolicies.policy.karmada.io", "works.work.karmada.io",
            "resourcebindings.work.karmada.io"} <= set(names)
    by_name = {c["metadata"]["name"]: c for c in crds}
    for name in ("resourcebindings.work.karmada.io", "clusterresourcebindings.work.karmada.io"):
        conversion = by_name[name]["spec"]["conversion"]
        assert conversion["strategy"] == "Webhook"
        assert conversion["webhook"]["clientConfig"] == {"url": "https://kd-webhook.tenant-a.svc:443/convert",
                                                         "caBundle": CA}
        assert by_name[name]["spec"]["versions"]  # the merge kept the base
    assert "conversion" not in by_name["works.work.karmada.io"]["spec"]
    for crd in crds:
        assert "status" not in crd and "creationTimestamp" not in crd["metadata"]
    assert karmada_crds.render_crds(real_tarball, CA, "kd-webhook", "tenant-a") == crds


# --------------------------------------------------------------------------- layout checks


def test_dot_slash_prefix_is_accepted():
    crds = karmada_crds.render_crds(make_tar(good_entries("./")), CA, "w", "ns")
    assert [c["metadata"]["name"] for c in crds] == ["others.work.karmada.io", "things.work.karmada.io"]


@pytest.mark.parametrize(("entries", "message"), [
    ([("/crds/bases/x.yaml", b"a: 1")], "absolute"),
    ([("crds/../../etc/passwd", b"x")], "'..'"),
    ([("crds/bases/evil.yaml", "sym", "/etc/passwd")], "link"),
    ([("crds/bases/evil.yaml", "hard", "crds/bases/work/things.yaml")], "link"),
    ([("other/readme.md", b"hi")], "outside the top-level 'crds/'"),
])
def test_unsafe_entries_rejected(entries, message):
    with pytest.raises(CrdSourceError, match=message) as err:
        karmada_crds.read_archive(make_tar(good_entries() + entries))
    assert err.value.reason == "InvalidCrdTarball"


@pytest.mark.parametrize(("drop", "message"), [
    ("crds/patches", "lacks 'crds/patches/'"),
    ("crds/bases", "lacks 'crds/bases/'"),
])
def test_missing_directories_rejected(drop, message):
    entries = [e for e in good_entries() if not e[0].startswith(drop)]
    with pytest.raises(CrdSourceError, match=message):
        karmada_crds.read_archive(make_tar(entries))


def test_not_a_tarball_and_empty_bases_rejected():
    with pytest.raises(CrdSourceError, match="not a \\(gzipped\\) tar archive") as err:
        karmada_crds.read_archive(b"<html>404 Not Found</html>")
    assert err.value.reason == "InvalidCrdTarball"
    with pytest.raises(CrdSourceError, match="no CRD YAML files"):
        karmada_crds.read_archive(make_tar([("crds", None), ("crds/bases", None), ("crds/patches", None)]))


def test_uncompressed_tar_is_read():
    assert len(karmada_crds.render_crds(make_tar(good_entries(), compress=False), CA, "w", "ns")) == 2


def test_bad_yaml_and_wrong_crd_version_rejected():
    bad = good_entries() + [("crds/bases/work/bad.yaml", b"a: [unclosed\n")]
    with pytest.raises(CrdSourceError, match="crds/bases/work/bad.yaml is not valid YAML"):
        karmada_crds.render_crds(make_tar(bad), CA, "w", "ns")
    old = CRD.format(name="old.work.karmada.io").replace("apiextensions.k8s.io/v1", "apiextensions.k8s.io/v1beta1")
    with pytest.raises(CrdSourceError, match="not apiextensions.k8s.io/v1"):
        karmada_crds.render_crds(make_tar(good_entries() + [("crds/bases/work/old.yaml", old.encode())]),
                                 CA, "w", "ns")


# --------------------------------------------------------------------------- patches


def test_patch_rendering_replaces_the_three_placeholders():
    out = karmada_crds.render_patch('url: "https://{{name}}.{{ namespace }}.svc"\nca: "{{caBundle}}"',
                                    {"name": "w", "namespace": "ns", "caBundle": "Q0E="})
    assert out == 'url: "https://w.ns.svc"\nca: "Q0E="'


def test_unknown_placeholder_rejected():
    entries = good_entries() + [("crds/patches/webhook_in_others.yaml",
                                 PATCH.format(name="others.work.karmada.io").replace("{{name}}", "{{service}}")
                                 .encode())]
    with pytest.raises(CrdSourceError, match="unknown placeholder\\(s\\) service"):
        karmada_crds.render_crds(make_tar(entries), CA, "w", "ns")


def test_patch_for_a_missing_crd_rejected():
    entries = good_entries() + [("crds/patches/webhook_in_ghosts.yaml",
                                 PATCH.format(name="ghosts.work.karmada.io").encode())]
    with pytest.raises(CrdSourceError, match="patches CRD ghosts.work.karmada.io, which is not under crds/bases/"):
        karmada_crds.render_crds(make_tar(entries), CA, "w", "ns")


def test_merge_maps_merge_lists_replace():
    base = {"spec": {"a": 1, "list": [1, 2], "keep": {"x": 1}}, "metadata": {"name": "n"}}
    patch = {"spec": {"list": [3], "keep": {"y": 2}, "a": None}}
    assert karmada_crds.merge(base, patch) == {"spec": {"list": [3], "keep": {"x": 1, "y": 2}},
                                               "metadata": {"name": "n"}}
    assert base["spec"]["list"] == [1, 2]  # inputs untouched


@pytest.mark.parametrize(("bundle", "message"), [
    ("", "empty"),
    (CA_PEM.decode(), "not base64"),
    (base64.b64encode(b"hello").decode(), "does not decode to a PEM certificate"),
])
def test_bad_ca_bundle_rejected(bundle, message):
    with pytest.raises(CrdSourceError, match=message) as err:
        karmada_crds.render_crds(make_tar(good_entries()), bundle, "w", "ns")
    assert err.value.reason == "InvalidCaBundle"


# --------------------------------------------------------------------------- source, checksum, cache


def test_default_url_and_mirror():
    assert karmada_crds.crd_url("v1.18.2") == \
        "https://github.com/karmada-io/karmada/releases/download/v1.18.2/crds.tar.gz"
    assert karmada_crds.crd_url("v1.18.2", " http://mirror/crds.tar.gz ") == "http://mirror/crds.tar.gz"
    with pytest.raises(CrdSourceError, match="spec.crds.url"):
        karmada_crds.crd_url("", "")


def test_malformed_sha256_and_scheme_rejected(tmp_path):
    with pytest.raises(CrdSourceError, match="64 hexadecimal digits"):
        karmada_crds.fetch("file:///x", tmp_path, sha256="abc")
    with pytest.raises(CrdSourceError, match="use http://, https:// or file://"):
        karmada_crds.fetch("ftp://host/crds.tar.gz", tmp_path)


def test_http_fetch_is_cached_by_url_and_checksum(crd_server, tmp_path):
    first = karmada_crds.fetch(crd_server.url, tmp_path, crd_server.sha256)
    assert not first.from_cache and first.sha256 == crd_server.sha256
    hits = crd_server.hits
    second = karmada_crds.fetch(crd_server.url, tmp_path, crd_server.sha256.upper())
    assert second.from_cache and second.data == first.data and crd_server.hits == hits
    # without an expected checksum it is a different cache entry (fetched once, then cached)
    third = karmada_crds.fetch(crd_server.url, tmp_path)
    assert not third.from_cache and crd_server.hits == hits + 1
    assert karmada_crds.fetch(crd_server.url, tmp_path).from_cache
    assert Path(first.cache_path).parent.name == karmada_crds.cache_key(crd_server.url, crd_server.sha256)


def test_corrupted_cache_is_fetched_again(crd_server, tmp_path):
    first = karmada_crds.fetch(crd_server.url, tmp_path, crd_server.sha256)
    Path(first.cache_path).write_bytes(b"garbage")
    again = karmada_crds.fetch(crd_server.url, tmp_path, crd_server.sha256)
    assert not again.from_cache and Path(again.cache_path).read_bytes() == crd_server.data


def test_checksum_mismatch_fails_and_is_not_cached(crd_server, tmp_path):
    wrong = "0" * 64
    with pytest.raises(CrdSourceError, match=f"expects {wrong}") as err:
        karmada_crds.fetch(crd_server.url, tmp_path, wrong)
    assert err.value.reason == "CrdChecksumMismatch"
    assert crd_server.sha256 in str(err.value)
    assert not karmada_crds.cache_path(tmp_path, crd_server.url, wrong).exists()


def test_unreachable_url_says_how_to_set_a_mirror(tmp_path):
    url = f"http://127.0.0.1:{closed_port()}/v1.18.2/crds.tar.gz"
    with pytest.raises(CrdSourceError, match="spec.crds.url") as err:
        karmada_crds.fetch(url, tmp_path, timeout=5)
    assert err.value.reason == "CrdSourceUnreachable"


def test_http_404_is_unreachable(crd_server, tmp_path):
    with pytest.raises(CrdSourceError, match="HTTP 404.*spec.crds.url") as err:
        karmada_crds.fetch(f"{crd_server.base_url}/nothing-here", tmp_path)
    assert err.value.reason == "CrdSourceUnreachable"


def test_file_url(real_tarball, tmp_path):
    tarball = tmp_path / "mirror" / "crds.tar.gz"
    tarball.parent.mkdir()
    tarball.write_bytes(real_tarball)
    result = karmada_crds.karmada_crds("v1.18.2", CA, "w", "ns", str(tmp_path / "cache"),
                                       url=tarball.as_uri(), sha256=hashlib.sha256(real_tarball).hexdigest())
    assert result["count"] == len(result["crds"]) == len(result["names"]) and result["url"] == tarball.as_uri()
    with pytest.raises(CrdSourceError, match="cannot read .*spec.crds.url") as err:
        karmada_crds.fetch((tmp_path / "missing.tar.gz").as_uri(), tmp_path / "cache")
    assert err.value.reason == "CrdSourceUnreachable"


def test_bad_tarball_from_a_url_names_the_url(tmp_path):
    bad = tmp_path / "crds.tar.gz"
    bad.write_bytes(make_tar([("crds", None), ("crds/bases", None)]))
    with pytest.raises(CrdSourceError, match=f"^{bad.as_uri()}: .*lacks 'crds/patches/'"):
        karmada_crds.karmada_crds("v1.18.2", CA, "w", "ns", str(tmp_path / "cache"), url=bad.as_uri())


def test_truncated_and_oversized_tarballs_rejected(monkeypatch):
    data = make_tar(good_entries())
    with pytest.raises(CrdSourceError) as err:
        karmada_crds.read_archive(data[: len(data) // 2])
    assert err.value.reason == "InvalidCrdTarball"
    monkeypatch.setattr(karmada_crds, "MAX_UNPACKED_BYTES", 500)
    with pytest.raises(CrdSourceError, match="unpacks to more than 500 bytes"):
        karmada_crds.read_archive(data)
    monkeypatch.setattr(karmada_crds, "MAX_UNPACKED_BYTES", 10**9)
    monkeypatch.setattr(karmada_crds, "MAX_MEMBERS", 3)
    with pytest.raises(CrdSourceError, match="more than 3 entries"):
        karmada_crds.read_archive(data)
