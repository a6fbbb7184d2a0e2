"""CA rotation with a trust transition: the phase machine (karmada_ca_rotation) and what each
phase does to the stored PKI (karmada_pki), checked by signatures, not by names."""

from __future__ import annotations

import base64
import datetime as dt

import pytest
import yaml
from cryptography import x509

from karmada_operator.members import join as mj
from karmada_operator.pki import ca_rotation as rot
from karmada_operator.pki import pki
from karmada_operator.plan import converged as kc
from support.pki_fixtures import pki_input, signed_by

NOW = dt.datetime(2026, 12, 2, 15, 0, tzinfo=dt.UTC)
ASKED = "2026-12-02T15:00:00Z"


def kd(request=None, status=None):
    spec = {"certificates": {"caRotation": request} if request else {}}
    return {"metadata": {"name": "k", "namespace": "ns", "generation": 3}, "spec": spec,
            "status": {"caRotation": status} if status else {}}


# --------------------------------------------------------------------------- the phase machine


def test_a_request_starts_a_rotation_in_trusting():
    rotation = rot.current(kd({"ca": "karmada", "requestedAt": ASKED}), NOW)
    assert rotation == {"ca": "karmada", "requestedAt": ASKED, "phase": "Trusting",
                        "startedAt": "2026-12-02T15:00:00Z"}
    assert rot.pki_input(rotation) == {"ca": "ca", "phase": "Trusting"}
    assert rot.pki_input(rot.current(kd({"ca": "etcd", "requestedAt": ASKED}), NOW))["ca"] == "etcd/ca"
    assert rot.pki_input(rot.current(kd({"ca": "front-proxy", "requestedAt": ASKED}), NOW))["ca"] == "front-proxy-ca"


def test_no_request_and_no_rotation_under_way_is_nothing():
    assert rot.current(kd()) == {}
    assert rot.under_way(kd()) == ""
    assert rot.pki_input({}) == {}


def test_the_phases_advance_only_with_every_member_ready():
    rotation = rot.current(kd({"ca": "karmada", "requestedAt": ASKED}), NOW)
    pass_status = rot.in_progress(rotation, {"oldSerial": "a1", "newSerial": "b2", "state": "trusting"})
    assert pass_status["phase"] == "Trusting" and pass_status["oldSerial"] == "a1"
    waiting = rot.advance(pass_status, False, "member2 not Ready", NOW)
    assert waiting["phase"] == "Trusting" and "member2 not Ready" in waiting["message"]
    assert rot.condition(waiting)["status"] == "False"
    phases = []
    status = pass_status
    for _ in range(3):
        status = rot.advance(status, True, "", NOW)
        phases.append(status["phase"])
    assert phases == ["Reissuing", "Dropping", "Done"]
    assert status["finishedAt"] == "2026-12-02T15:00:00Z"
    assert "a1 -> b2" in status["message"]
    assert rot.condition(status) == {"type": "CARotated", "status": "True", "reason": "Done",
                                     "message": status["message"]}
    with pytest.raises(rot.CaRotationError):
        rot.advance(status, True, "", NOW)


def test_a_restarted_operator_resumes_the_phase_in_status():
    status = {"ca": "etcd", "phase": "Reissuing", "requestedAt": ASKED, "oldSerial": "a1", "newSerial": "b2",
              "startedAt": ASKED, "message": "x"}
    # the spec may even have dropped the request: a half-rotated trust is finished anyway
    later = {"ca": "karmada", "requestedAt": "2027-01-01T00:00:00Z"}
    for request in ({"ca": "etcd", "requestedAt": ASKED}, None, later):
        rotation = rot.current(kd(request, status), NOW)
        assert rotation["phase"] == "Reissuing" and rotation["ca"] == "etcd" and rotation["oldSerial"] == "a1"
        assert rot.under_way(kd(request, status)) == "CA rotation under way (etcd CA, phase Reissuing)"


def test_done_stays_done_and_a_later_request_starts_a_second_rotation():
    done = {"ca": "karmada", "phase": "Done", "requestedAt": ASKED, "finishedAt": ASKED}
    assert rot.current(kd({"ca": "karmada", "requestedAt": ASKED}, done), NOW) == {}
    assert rot.current(kd({"ca": "karmada", "requestedAt": "2026-12-01T00:00:00Z"}, done), NOW) == {}
    second = rot.current(kd({"ca": "front-proxy", "requestedAt": "2026-12-02T17:00:00+01:00"}, done), NOW)
    assert second["phase"] == "Trusting" and second["ca"] == "front-proxy"
    # the status write is a merge patch: the first rotation's finishedAt is dropped with a null
    assert second["finishedAt"] is None
    assert rot.in_progress(second, {"oldSerial": "b2", "newSerial": "c3"})["finishedAt"] is None
    # the same instant in another zone is not later
    assert rot.current(kd({"ca": "karmada", "requestedAt": "2026-12-02T16:00:00+01:00"},
                          {**done, "requestedAt": "2026-12-02T15:00:00Z"}), NOW) == {}


@pytest.mark.parametrize("request_, field, words", [
    ({"ca": "root", "requestedAt": ASKED}, "caRotation.ca", "'root' is not one of karmada, etcd, front-proxy"),
    ({"ca": "karmada"}, "caRotation.requestedAt", "is required"),
    ({"ca": "karmada", "requestedAt": "yesterday"}, "caRotation.requestedAt", "not an RFC 3339 time"),
    ("karmada", "caRotation", "must be a mapping"),
])
def test_bad_requests_name_the_field(request_, field, words):
    with pytest.raises(rot.CaRotationError) as err:
        rot.current(kd(request_), NOW)
    assert err.value.field == f"spec.certificates.{field}" and words in str(err.value)
    assert "invalid" in rot.under_way(kd(request_))


def test_a_bring_your_own_karmada_ca_is_not_rotated():
    cr = kd({"ca": "karmada", "requestedAt": ASKED})
    cr["spec"]["certificates"]["caSecretRef"] = {"name": "my-ca"}
    with pytest.raises(rot.CaRotationError, match="caSecretRef"):
        rot.current(cr, NOW)
    cr["spec"]["certificates"]["caRotation"]["ca"] = "etcd"
    assert rot.current(cr, NOW)["phase"] == "Trusting"


def test_the_etcd_ca_of_an_external_etcd_is_not_rotated():
    cr = kd({"ca": "etcd", "requestedAt": ASKED})
    cr["spec"]["etcd"] = {"external": {"endpoints": ["https://etcd:2379"], "tlsSecretRef": {"name": "t"}}}
    with pytest.raises(rot.CaRotationError, match="spec.etcd.external"):
        rot.current(cr, NOW)
    cr["spec"]["certificates"]["caRotation"]["ca"] = "front-proxy"
    assert rot.current(cr, NOW)["phase"] == "Trusting"


def test_the_restart_marker_changes_per_phase_then_stays():
    base = {"ca": "karmada", "requestedAt": ASKED}
    markers = [rot.restart_marker({**base, "phase": p}) for p in ("Trusting", "Reissuing", "Dropping")]
    assert len(set(markers)) == 3
    # after Done (no rotation this pass) the last recorded one keeps the Dropping marker: no restart
    assert rot.restart_marker({}, {**base, "phase": "Done"}) == markers[2]
    assert rot.restart_marker({}, {}) == ""  # never rotated: existing installs keep their hash
    # etcd takes it only for its own CA
    assert rot.restart_marker({**base, "phase": "Trusting"}, None, "etcd") == ""
    assert rot.restart_marker({"ca": "etcd", "requestedAt": ASKED, "phase": "Trusting"}, None, "etcd")


def test_the_fast_path_does_not_short_circuit_while_a_rotation_is_under_way():
    cr = kd({"ca": "karmada", "requestedAt": ASKED})
    cr["metadata"]["generation"] = 3
    cr["status"] = {"observedGeneration": 3,
                    "conditions": [{"type": "Ready", "status": "True", "reason": "Running"}]}
    cr["status"]["converged"] = kc.record(cr, [], "b", NOW, [], dt.timedelta(days=30), "https://x", "")
    decision = kc.decide(cr, [], "b", NOW + dt.timedelta(seconds=5), 3600)
    assert not decision.converged and not decision.control_plane
    assert decision.reason == "CA rotation under way (karmada CA, phase Trusting)"
    for phase in ("Trusting", "Reissuing", "Dropping"):
        cr["status"]["caRotation"] = {"ca": "karmada", "phase": phase, "requestedAt": ASKED}
        decision = kc.decide(cr, [], "b", NOW + dt.timedelta(seconds=5), 3600)
        assert not decision.converged and decision.reason == f"CA rotation under way (karmada CA, phase {phase})"
    cr["status"]["caRotation"] = {"ca": "karmada", "phase": "Done", "requestedAt": ASKED}
    assert kc.decide(cr, [], "b", NOW + dt.timedelta(seconds=5), 3600).converged


# --------------------------------------------------------------------------- what each phase stores


def run(existing, ca=None, phase=None, now=NOW, **overrides):
    data = pki_input(**overrides)
    if ca:
        data["caRotation"] = {"ca": ca, "phase": phase}
    return pki.reconcile_pki(data, existing=existing, now=now)


def bundle(files, stem="ca"):
    return pki.load_bundle(files[f"{stem}.crt"])


def key_of(files, name):
    return pki.load_key(files[name], validate=False)



def leaves(files, stems):
    return {s: pki.load_cert(files[f"{s}.crt"]) for s in stems}


def kubeconfig_ca(files, name="admin.conf"):
    conf = yaml.safe_load(files[name])
    return base64.b64decode(conf["clusters"][0]["cluster"]["certificate-authority-data"]).decode()


def kubeconfig_cert(files, name="admin.conf"):
    conf = yaml.safe_load(files[name])
    return pki.load_cert(base64.b64decode(conf["users"][0]["user"]["client-certificate-data"]))


@pytest.fixture(scope="module")
def start():
    return run({}).files


@pytest.fixture(scope="module")
def karmada_phases(start):
    """The stored files after each phase of a rotation of the Karmada CA."""
    trusting = run(start, "ca", "Trusting")
    reissuing = run(trusting.files, "ca", "Reissuing")
    dropping = run(reissuing.files, "ca", "Dropping")
    return {"start": start, "Trusting": trusting, "Reissuing": reissuing, "Dropping": dropping}


def test_trusting_publishes_old_and_new_and_signs_nothing_new(karmada_phases):
    start, result = karmada_phases["start"], karmada_phases["Trusting"]
    files = result.files
    old = pki.load_cert(start["ca.crt"])
    old_ca, new_ca = bundle(files)
    assert old_ca == old and new_ca != old and pki.is_ca(new_ca)
    assert pki.key_matches(new_ca, key_of(files, "ca-next.key"))
    assert files["ca.key"] == start["ca.key"] and files["ca-signer.crt"] == start["ca-signer.crt"]
    # no leaf is re-issued; every kubeconfig trusts both (content changes: the components roll)
    assert {c["name"] for c in result.changes} == {"ca"} | {f"{k.name}.conf" for k in pki.kubeconfig_profiles(
        pki.parse_spec(pki_input()))}
    assert kubeconfig_ca(files) == files["ca.crt"]
    for name in pki.leaves_of(pki.parse_spec(pki_input()), "ca"):
        assert files[f"{name}.crt"] == start[f"{name}.crt"]
    # the other CAs are untouched
    assert files["etcd/ca.crt"] == start["etcd/ca.crt"] and files["front-proxy-ca.crt"] == start["front-proxy-ca.crt"]
    assert result.rotation == {"oldSerial": format(old.serial_number, "x"),
                               "newSerial": format(new_ca.serial_number, "x"), "state": "trusting"}
    assert {c["name"] for c in result.certificates if c["name"].startswith("ca")} == {"ca", "ca-next"}


def test_reissuing_signs_every_leaf_of_that_ca_with_the_new_one(karmada_phases):
    before, result = karmada_phases["Trusting"].files, karmada_phases["Reissuing"]
    files = result.files
    old_ca, new_ca = bundle(before)
    assert bundle(files) == [old_ca, new_ca]  # both still trusted
    assert pki.key_matches(new_ca, key_of(files, "ca.key"))
    assert pki.key_matches(old_ca, key_of(files, "ca-previous.key"))
    assert "ca-next.key" not in files and "ca-next.key" in result.removed
    assert pki.load_cert(files["ca-signer.crt"]) == new_ca
    spec = pki.parse_spec(pki_input())
    karmada_leaves = pki.leaves_of(spec, "ca")
    assert {"apiserver", "admin", "karmada-webhook", "karmada-aggregated-apiserver"} <= set(karmada_leaves)
    for name, cert in leaves(files, karmada_leaves).items():
        assert signed_by(cert, new_ca) and not signed_by(cert, old_ca), name
    for kc_name in (f"{k.name}.conf" for k in pki.kubeconfig_profiles(spec)):
        assert signed_by(kubeconfig_cert(files, kc_name), new_ca), kc_name
        assert kubeconfig_ca(files, kc_name) == files["ca.crt"]
    # leaves of the other CAs stay
    for name in pki.leaves_of(spec, "etcd/ca") + pki.leaves_of(spec, "front-proxy-ca"):
        assert files[f"{name}.crt"] == before[f"{name}.crt"], name
    assert {c["name"] for c in result.certificates if c["name"].startswith("ca")} == {"ca", "ca-previous"}


def test_dropping_leaves_the_new_ca_alone_and_deletes_the_old_key(karmada_phases):
    before, result = karmada_phases["Reissuing"].files, karmada_phases["Dropping"]
    files = result.files
    old_ca, new_ca = bundle(before)
    assert bundle(files) == [new_ca]
    assert "ca-previous.key" not in files and "ca-previous.key" in result.removed
    assert not any(k.endswith(("-next.key", "-previous.key")) for k in files)
    # the old CA is in no bundle: ca.crt, the signer file, every kubeconfig
    for name in files:
        if name.endswith(".conf"):
            assert old_ca not in pki.load_bundle(kubeconfig_ca(files, name)), name
    assert old_ca not in pki.load_bundle(files["ca-signer.crt"])
    # no leaf re-issued now; every leaf chains to the new CA
    assert not [c for c in result.changes if not c["name"].endswith(".conf") and c["name"] != "ca"]
    for name, cert in leaves(files, pki.leaves_of(pki.parse_spec(pki_input()), "ca")).items():
        assert signed_by(cert, new_ca), name
    assert [c["name"] for c in result.certificates if c["name"].startswith("ca")] == ["ca"]
    assert result.certificates[0]["serial"] == format(new_ca.serial_number, "x")
    # after Done, a pass without rotation changes nothing
    after = run(files)
    assert not after.changed and after.files == files


def test_each_phase_asked_again_changes_nothing(karmada_phases):
    """A retried pass (the operator restarted in the middle) does the phase again: no-op."""
    for phase, earlier in (("Trusting", "Trusting"), ("Reissuing", "Reissuing"), ("Dropping", "Dropping")):
        files = karmada_phases[earlier].files
        again = run(files, "ca", phase)
        assert not again.changed, (phase, again.changes)
        assert again.files == files
    # a stale copy asking for an earlier phase never goes backwards
    for phase in ("Trusting",):
        late = run(karmada_phases["Reissuing"].files, "ca", phase)
        assert not late.changed and late.rotation["state"] == "reissuing"
    late = run(karmada_phases["Dropping"].files, "ca", "Reissuing")
    assert not late.changed


def test_a_reissuing_pass_that_stopped_half_way_finishes_the_rest(karmada_phases):
    files = dict(karmada_phases["Reissuing"].files)
    old_ca = bundle(files)[0]
    # as if the pass had stored only some leaves: put back an old-CA apiserver certificate
    files["apiserver.crt"] = karmada_phases["Trusting"].files["apiserver.crt"]
    files["apiserver.key"] = karmada_phases["Trusting"].files["apiserver.key"]
    assert signed_by(pki.load_cert(files["apiserver.crt"]), old_ca)
    resumed = run(files, "ca", "Reissuing")
    assert {c["name"]: c["reasons"] for c in resumed.changes} == {"apiserver": ["wrong-issuer"]}
    assert signed_by(pki.load_cert(resumed.files["apiserver.crt"]), bundle(files)[1])


def test_an_etcd_ca_rotation_reissues_the_etcd_leaves_only(start):
    trusting = run(start, "etcd/ca", "Trusting")
    assert len(bundle(trusting.files, "etcd/ca")) == 2 and "etcd/ca-next.key" in trusting.files
    assert pki.secret_groups(trusting.files)["etcd"]["ca-next.key"]
    assert trusting.files["ca.crt"] == start["ca.crt"]
    assert not [c for c in trusting.changes if c["name"].endswith(".conf")]  # kubeconfigs hold no etcd CA
    reissuing = run(trusting.files, "etcd/ca", "Reissuing")
    old_ca, new_ca = bundle(reissuing.files, "etcd/ca")
    spec = pki.parse_spec(pki_input())
    etcd_leaves = pki.leaves_of(spec, "etcd/ca")
    assert set(etcd_leaves) == {"apiserver-etcd-client", "etcd/server", "etcd/peer", "etcd/healthcheck-client"}
    assert {c["name"] for c in reissuing.changes} == {"etcd/ca", *etcd_leaves}
    for name, cert in leaves(reissuing.files, etcd_leaves).items():
        assert signed_by(cert, new_ca), name
    dropping = run(reissuing.files, "etcd/ca", "Dropping")
    assert bundle(dropping.files, "etcd/ca") == [new_ca]
    assert "etcd/ca-previous.key" in dropping.removed


def test_a_front_proxy_rotation_reissues_the_front_proxy_client():
    files = run({}).files
    for phase in ("Trusting", "Reissuing", "Dropping"):
        files = run(files, "front-proxy-ca", phase).files
    (new_ca,) = bundle(files, "front-proxy-ca")
    assert signed_by(pki.load_cert(files["front-proxy-client.crt"]), new_ca)


def test_a_second_rotation_replaces_the_ca_again(karmada_phases):
    files = karmada_phases["Dropping"].files
    first_new = bundle(files)[0]
    for phase in ("Trusting", "Reissuing", "Dropping"):
        result = run(files, "ca", phase)
        files = result.files
    (second,) = bundle(files)
    assert second != first_new and result.rotation["oldSerial"] == format(first_new.serial_number, "x")
    assert signed_by(pki.load_cert(files["apiserver.crt"]), second)


def test_the_pki_module_input_is_checked():
    with pytest.raises(pki.PkiInputError, match="caRotation.phase"):
        run({}, "ca", "Done")
    with pytest.raises(pki.PkiInputError, match="caRotation.ca"):
        run({}, "karmada", "Trusting")


def test_the_kube_controller_manager_signs_with_the_single_signer_file():
    from karmada_operator import components as comps

    kcm = comps.by_binary()["kube-controller-manager"]
    assert kcm.args["cluster-signing-cert-file"] == "{pki}/ca-signer.crt"
    assert "ca-signer.crt" in kcm.pki_files


# --------------------------------------------------------------------------- a Pull agent follows


def test_the_pull_agents_kubeconfig_follows_the_bundle_then_the_new_ca(karmada_phases):
    spec = mj.MemberSpec(name="m3", sync_mode="Pull")

    def agent_conf(files, existing):
        j = mj.Joiner(spec, clients=None, agent=None, ca=(files["ca.crt"], files["ca.key"]))
        return j._agent_kubeconfig(existing, "https://karmada:5443")

    def parts(b64):
        conf = yaml.safe_load(base64.b64decode(b64))
        trusted = pki.load_bundle(base64.b64decode(conf["clusters"][0]["cluster"]["certificate-authority-data"]))
        cert = pki.load_cert(base64.b64decode(conf["users"][0]["user"]["client-certificate-data"]))
        return trusted, cert

    first = agent_conf(karmada_phases["start"], None)
    old_ca = pki.load_cert(karmada_phases["start"]["ca.crt"])
    assert agent_conf(karmada_phases["start"], first) == first  # unchanged: no agent restart
    trusting = agent_conf(karmada_phases["Trusting"].files, first)
    trusted, cert = parts(trusting)
    new_ca = bundle(karmada_phases["Trusting"].files)[1]
    assert trusted == [old_ca, new_ca] and cert == parts(first)[1]  # same certificate, new trust
    reissuing = agent_conf(karmada_phases["Reissuing"].files, trusting)
    trusted, cert = parts(reissuing)
    assert trusted == [old_ca, new_ca] and signed_by(cert, new_ca)  # re-issued by the new CA
    dropping = agent_conf(karmada_phases["Dropping"].files, reissuing)
    trusted, cert2 = parts(dropping)
    assert trusted == [new_ca] and cert2 == cert
    assert isinstance(cert2, x509.Certificate)
