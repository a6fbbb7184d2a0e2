"""OLM's manifests at the pinned version (hack/versions.env), from the Go module proxy: the CRDs
hack/olm/olm.py applies know every field of the objects we create."""

from __future__ import annotations

import importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
_spec = importlib.util.spec_from_file_location("olm", ROOT / "hack" / "olm" / "olm.py")
olm = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(olm)


def test_the_pinned_crds_know_the_fields_we_set():
    """The CatalogSource we apply uses grpcPodConfig, which v0.33.0's quickstart CRD lacks."""
    crds, _ = olm.quickstart()
    catsrc = next(c for c in crds if c["spec"]["names"]["kind"] == "CatalogSource")
    spec = catsrc["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]
    assert set(olm.catalog_source("x", "ns", "img@sha256:0")["spec"]) <= set(spec)
    assert "olmconfigs.operators.coreos.com" in {c["metadata"]["name"] for c in crds}
