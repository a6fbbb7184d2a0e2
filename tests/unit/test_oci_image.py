"""hack/testenv/oci_image.py: image config labels and names by digest (the OLM bundle and
catalog images need both: labels say what the image is, OLM pulls tagged images Always)."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
import tarfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def build(tmp_path: Path, *args: str) -> tuple[str, dict[str, bytes]]:
    (tmp_path / "f").write_text("hello\n")
    out = tmp_path / "image.tar"
    digest = subprocess.run([sys.executable, str(ROOT / "hack/testenv/oci_image.py"), "--out", str(out),
                             "--file", f"{tmp_path / 'f'}:/f:644", *args],
                            check=True, capture_output=True, text=True).stdout.strip()
    with tarfile.open(out) as tar:
        return digest, {m.name: tar.extractfile(m).read() for m in tar.getmembers() if m.isfile()}


def test_labels_go_into_the_config_and_digest_refs_name_the_manifest(tmp_path):
    digest, files = build(tmp_path, "--ref", "example.local/x:1", "--digest-ref", "example.local/x",
                          "--label", "a.b/c=d=e", "--label", "k=v")
    index = json.loads(files["index.json"])
    names = [m["annotations"]["io.containerd.image.name"] for m in index["manifests"]]
    assert names == ["example.local/x:1", f"example.local/x@{digest}"]
    assert {m["digest"] for m in index["manifests"]} == {digest}
    manifest = files[f"blobs/sha256/{digest.split(':')[1]}"]
    assert "sha256:" + hashlib.sha256(manifest).hexdigest() == digest
    config = json.loads(files[f"blobs/sha256/{json.loads(manifest)['config']['digest'].split(':')[1]}"])
    assert config["config"]["Labels"] == {"a.b/c": "d=e", "k": "v"}


def test_the_digest_does_not_depend_on_the_names(tmp_path):
    plain, _ = build(tmp_path, "--ref", "example.local/x:1")
    named, _ = build(tmp_path, "--ref", "example.local/y:2", "--digest-ref", "example.local/y")
    assert plain == named
