"""CA rotation with a trust transition: the phase machine of ``spec.certificates.caRotation``.

Plain Python, no Ansible imports (the ``karmada`` filters and ``karmada_pki`` adapt it). A user
asks for a rotation declaratively, ``spec.certificates.caRotation: {ca, requestedAt}``; a
``requestedAt`` later than the last rotation's starts a new one. The operator then runs one
full reconcile pass per phase and records where it is in ``status.caRotation``, so a restarted
operator resumes in the phase it was in:

``Trusting``
    a new CA is generated and stored beside the old one; every place that trusts that CA gets
    the bundle old+new. Nothing is signed by the new CA yet.
``Reissuing``
    the new CA signs: every leaf of that CA is re-issued; the old CA stays trusted.
``Dropping``
    the bundle is the new CA alone and the old key is deleted.
``Done``
    finished (``finishedAt``).

A pass does the work of the phase in status; only when it ended with every rollout through its
gate and every member cluster Ready does status move to the next phase (:func:`advance`). A pass
that fails leaves the phase as it is: the next pass does it again, with both CAs still trusted.

What each phase does to the stored files is in ``karmada_pki`` (``_rotate_ca``); which leaves
belong to which CA is ``karmada_pki.leaves_of``.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from typing import Any

PHASES = ("Trusting", "Reissuing", "Dropping", "Done")
UNDER_WAY = PHASES[:3]
# spec name -> CA id in karmada_pki.CAS (and its file stem)
CA_IDS = {"karmada": "ca", "etcd": "etcd/ca", "front-proxy": "front-proxy-ca"}
FIELD = "spec.certificates.caRotation"

class CaRotationError(ValueError):
    """Bad input; ``field`` names the spec field to fix."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field


def parse_time(value: Any, field: str) -> dt.datetime:
    if isinstance(value, dt.datetime):
        moment = value
    else:
        try:
            moment = dt.datetime.fromisoformat(str(value).strip().replace("Z", "+00:00"))
        except ValueError:
            raise CaRotationError(field, f"{value!r} is not an RFC 3339 time like 2026-12-02T15:00:00Z") from None
    return moment if moment.tzinfo else moment.replace(tzinfo=dt.UTC)


def iso(moment: dt.datetime) -> str:
    return moment.astimezone(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def parse_request(certificates: Mapping[str, Any] | None) -> dict[str, str] | None:
    """``spec.certificates.caRotation`` validated: ``{ca, requestedAt}`` (None when not set)."""
    certificates = certificates or {}
    raw = certificates.get("caRotation")
    if not raw:
        return None
    if not isinstance(raw, Mapping):
        raise CaRotationError(FIELD, f"must be a mapping {{ca, requestedAt}}, got {raw!r}")
    ca = raw.get("ca")
    if ca not in CA_IDS:
        raise CaRotationError(f"{FIELD}.ca", f"{ca!r} is not one of {', '.join(CA_IDS)}")
    if raw.get("requestedAt") in (None, ""):
        raise CaRotationError(f"{FIELD}.requestedAt", "is required: the time you ask for the rotation (RFC 3339)")
    requested = parse_time(raw["requestedAt"], f"{FIELD}.requestedAt")
    if ca == "karmada" and certificates.get("caSecretRef"):
        raise CaRotationError(f"{FIELD}.ca", "the Karmada CA is brought by spec.certificates.caSecretRef: the "
                                             "operator cannot make its successor; rotate the etcd or front-proxy "
                                             "CA, or replace the Secret")
    return {"ca": str(ca), "requestedAt": iso(requested)}


def current(cr: Mapping[str, Any], now: dt.datetime | None = None) -> dict[str, Any]:
    """The rotation this pass works on (``{}``: none), from the spec's request and status.

    A rotation under way in status goes on, whatever the spec says now (half-rotated trust must
    be finished); a request newer than the last recorded rotation starts one in ``Trusting``.
    """
    spec = cr.get("spec") or {}
    status = (cr.get("status") or {}).get("caRotation") or {}
    request = parse_request(spec.get("certificates"))
    if request and request["ca"] == "etcd" and (spec.get("etcd") or {}).get("external"):
        raise CaRotationError(f"{FIELD}.ca", "etcd is external (spec.etcd.external): its CA is not the operator's; "
                                             "rotate it where that etcd is run and update its tlsSecretRef")
    if status.get("phase") in UNDER_WAY:
        return {k: status[k] for k in ("ca", "phase", "requestedAt", "oldSerial", "newSerial", "startedAt")
                if status.get(k)}
    if request is None:
        return {}
    last = status.get("requestedAt")
    if last and parse_time(last, "status.caRotation.requestedAt") >= parse_time(request["requestedAt"], FIELD):
        return {}
    started = {**request, "phase": "Trusting", "startedAt": iso(now or dt.datetime.now(dt.UTC))}
    if status.get("finishedAt"):
        started["finishedAt"] = None  # status is written as a merge patch: null drops the last one's
    return started


def under_way(cr: Mapping[str, Any]) -> str:
    """Why a reconcile must not take the fast path ("" when no rotation is due or going on)."""
    try:
        rotation = current(cr)
    except CaRotationError as exc:
        return f"the CA rotation request is invalid ({exc}); a full pass reports it"
    if not rotation:
        return ""
    return f"CA rotation under way ({rotation['ca']} CA, phase {rotation['phase']})"


def ca_id(rotation: Mapping[str, Any]) -> str:
    """The karmada_pki CA id (``ca``, ``etcd/ca``, ``front-proxy-ca``) of a rotation."""
    return CA_IDS[str(rotation["ca"])]


def pki_input(rotation: Mapping[str, Any]) -> dict[str, str]:
    """What ``karmada_pki`` needs: which CA and the phase of this pass (``{}``: no rotation)."""
    if not rotation or rotation.get("phase") not in UNDER_WAY:
        return {}
    return {"ca": ca_id(rotation), "phase": str(rotation["phase"])}


def next_phase(phase: str) -> str:
    if phase not in UNDER_WAY:
        raise CaRotationError("status.caRotation.phase", f"{phase!r} has no next phase")
    return PHASES[PHASES.index(phase) + 1]


def restart_marker(rotation: Mapping[str, Any], status: Mapping[str, Any] | None = None, ca: str = "") -> str:
    """A value for the pod-template hash of what must restart in every phase of a rotation: new
    in each phase, then stable. karmada-apiserver takes it for every CA (``ca`` ""), etcd only
    for a rotation of its own CA (``ca="etcd"``): a restart makes sure the pod runs the files of
    the phase, whenever the kubelet refreshes a Secret volume.

    ``rotation`` is this pass's (:func:`current`), ``status`` the last recorded one (used when no
    rotation runs now). "" when nothing was ever rotated, so existing installs keep their hash.
    """
    source = rotation or status or {}
    if not source.get("ca") or not source.get("requestedAt") or (ca and source.get("ca") != ca):
        return ""
    phase = source.get("phase")
    stage = phase if phase in ("Trusting", "Reissuing") else "Dropped"
    return f"{source['ca']}@{source['requestedAt']}:{stage}"


def in_progress(rotation: Mapping[str, Any], pki_state: Mapping[str, Any]) -> dict[str, Any]:
    """``status.caRotation`` while this pass does its phase (serials from the PKI module)."""
    phase = str(rotation["phase"])
    return {
        **{k: v for k, v in rotation.items()
           if k in ("ca", "requestedAt", "startedAt", "oldSerial", "newSerial", "finishedAt")},
        "phase": phase,
        **{k: pki_state[k] for k in ("oldSerial", "newSerial") if pki_state.get(k)},
        "message": f"{phase}: {DOING[phase]}",
    }


DOING = {
    "Trusting": "the new CA is generated and trusted next to the old one everywhere; nothing is signed by it yet",
    "Reissuing": "every leaf of the CA is re-issued by the new CA; both CAs stay trusted",
    "Dropping": "the old CA leaves every bundle and its key is deleted",
    "Done": "the new CA alone is trusted and signs every leaf",
}


def advance(rotation: Mapping[str, Any], members_ready: bool, members_message: str,
            now: dt.datetime | None = None) -> dict[str, Any]:
    """``status.caRotation`` after a full pass did the phase: the next phase when every member
    is Ready, else the same phase again (the next pass repeats it)."""
    out = dict(rotation)
    phase = str(rotation["phase"])
    if not members_ready:
        out["message"] = f"{phase}: done on the control plane; waiting for every member to be Ready " \
                         f"({members_message}); the next pass repeats it"
        return out
    following = next_phase(phase)
    out["phase"] = following
    if following == "Done":
        out["finishedAt"] = iso(now or dt.datetime.now(dt.UTC))
        out["message"] = (f"Done: the {rotation['ca']} CA was rotated (serial {rotation.get('oldSerial', '?')} -> "
                          f"{rotation.get('newSerial', '?')}); the new CA alone is trusted and signs every leaf")
    else:
        out["message"] = f"{phase} finished with every member Ready; next: {following}"
    return out


def condition(rotation: Mapping[str, Any]) -> dict[str, str]:
    """The ``CARotated`` condition for a ``status.caRotation``."""
    phase = str(rotation.get("phase") or "")
    return {"type": "CARotated", "status": "True" if phase == "Done" else "False",
            "reason": phase or "Unknown", "message": str(rotation.get("message") or DOING.get(phase, ""))[:1000]}
