"""Certificate-only changes restart karmada-apiserver after the components; spec changes first."""

from __future__ import annotations

from karmada_operator.pki.cert_rollout import PKI_HASH, SPEC_HASH, apiserver_pki_hash


def live(pki_hash: str, spec_hash: str | None) -> dict:
    meta = {"annotations": {SPEC_HASH: spec_hash}} if spec_hash is not None else {}
    return {"metadata": meta, "spec": {"template": {"metadata": {"annotations": {PKI_HASH: pki_hash}}}}}


def test_first_install_applies_the_hash_at_once():
    assert apiserver_pki_hash(None, "new", "s1") == {"now": "new", "later": ""}


def test_certificate_only_change_keeps_the_running_hash_until_the_components_rolled():
    assert apiserver_pki_hash(live("old", "s1"), "new", "s1") == {"now": "old", "later": "new"}


def test_spec_change_rolls_the_apiserver_first_with_its_new_certificates():
    # an upgrade (new image, new flags): the documented order, apiserver first
    assert apiserver_pki_hash(live("old", "s1"), "new", "s2") == {"now": "new", "later": ""}


def test_nothing_to_restart():
    assert apiserver_pki_hash(live("same", "s1"), "same", "s1") == {"now": "same", "later": ""}


def test_a_deployment_from_before_the_spec_hash_rolls_now():
    assert apiserver_pki_hash(live("old", None), "new", "s1") == {"now": "new", "later": ""}
