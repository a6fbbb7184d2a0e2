"""Every manifest a full pass applies, rendered for fixed inputs, equals the recorded one.

The guard of the day-2 redesign (issue "the house"): what a pass decides (the pass plan, the
hashes that restart pods) moved from Jinja to Python, and the objects it applies must stay the
same, byte for byte. For three plans (the sample, every optional component on with pod settings
that take the templates' optional branches, external etcd), with a fixed PKI, and for a pass with
no CA rotation and one in each CA's Reissuing phase, the test renders what the role renders
(karmada-apiserver, etcd's Services and StatefulSet, every component, the objects of the
components switched off) with the hashes derived as the role derives them, and compares the
canonical JSON with tests/unit/data/rendered_manifests.json, recorded from the commit before the
redesign (55ec635) and recorded again once since, on purpose: Pod Security "restricted" (security
contexts, a /tmp emptyDir, serving ports moved from 443 to 8443 behind Services still on 443).

A deliberate change to a template or a flag updates the record:
``KO_UPDATE_RENDERED=1 python -m pytest tests/unit/test_rendered_manifests.py``; the diff of the
record is then part of the review.
"""

from __future__ import annotations

import difflib
import json
import os
from pathlib import Path

import pytest

from karmada_operator.etcd import run_as
from karmada_operator.plan import plan as kp
from karmada_operator.plan.pass_plan import pki_hashes
from karmada_operator.runtime import templates as role_templates
from support.sample_plans import crs

ROOT = Path(__file__).resolve().parents[2]
RECORD = ROOT / "tests" / "unit" / "data" / "rendered_manifests.json"

# status.caRotation as a pass sees it: none, and each CA in its Reissuing phase.
ROTATIONS = {
    "no-rotation": {},
    "karmada-ca-reissuing": {"ca": "karmada", "phase": "Reissuing", "requestedAt": "2026-01-01T00:00:00Z"},
    "etcd-ca-reissuing": {"ca": "etcd", "phase": "Reissuing", "requestedAt": "2026-01-01T00:00:00Z"},
}


def fixed_pki(plan: dict) -> dict[str, dict[str, str]]:
    """Secret groups holding every key any pod mounts, each with a value naming it."""
    groups: dict[str, dict[str, str]] = {}
    mounts = [c["mounts"] for c in plan["components"]] + [plan["apiserver"]["restartMounts"],
                                                          plan["pki"]["etcd_restart_mounts"]]
    for mount in mounts:
        for group, keys in mount.items():
            for key in keys:
                groups.setdefault(group, {})[key] = f"{group}/{key} bytes"
    return groups


class BedStorage:
    """The storage API as the test bed has it: a default class of the in-tree host-path
    provisioner (host directories), no CSIDriver."""

    CLASS = {"metadata": {"name": "standard", "annotations": {run_as.DEFAULT_CLASS: "true"}},
             "provisioner": "kubernetes.io/host-path"}

    def get(self, api_version: str, kind: str, name: str) -> dict | None:
        return self.CLASS if (kind, name) == ("StorageClass", "standard") else None

    def list(self, api_version: str, kind: str) -> list:
        return [self.CLASS]


def etcd_run_as(plan: dict) -> dict:
    """What the etcd step's prepare phase hands the template (tasks/etcd_scale.py)."""
    return run_as.decide(BedStorage(), plan["etcd"]).as_fact()


def render(cr: dict, rotation: dict) -> dict[str, list]:
    plan = kp.build_plan(cr)
    groups = fixed_pki(plan)
    hashes = pki_hashes(plan, groups, rotation, {})
    out: dict[str, list] = {}
    # karmada-apiserver with the hash its pods get (a first install: nothing running to keep)
    out["apiserver.yaml.j2"] = role_templates.render_objects(
        "karmada_deployment", ["apiserver.yaml.j2"],
        {"karmada_deployment_plan": plan, "karmada_deployment_apiserver_pki_hash": hashes["apiserver"],
         "karmada_deployment_pki": {"hashes": hashes}}, {})
    if plan["etcd"]["mode"] == "local":
        out["etcd"] = role_templates.render_objects(
            "karmada_deployment", ["etcd-services.yaml.j2", "etcd-statefulset.yaml.j2"],
            {"karmada_deployment_plan": plan, "karmada_deployment_cr": cr,
             "karmada_deployment_etcd_replicas": plan["etcd"]["replicas"],
             "karmada_deployment_etcd_claims": [], "karmada_deployment_pki": {"hashes": hashes},
             "karmada_deployment_etcd_run_as": etcd_run_as(plan)}, {})
    for step in ("aggregated", "components"):
        now = [c for c in plan["components"] if c["step"] == step]
        for rolled in role_templates.component_steps(now, plan, {"hashes": hashes}):
            out[f"component {rolled['name']}"] = rolled["objects"]
        out[f"components-absent {step}"] = role_templates.render_objects(
            "karmada_deployment", ["components-absent.yaml.j2"],
            {"karmada_deployment_plan": plan, "karmada_deployment_components_now": now}, {})
    return json.loads(json.dumps(out, sort_keys=True))


def rendered_all() -> dict:
    return {f"{which} / {rotation}": render(cr, ROTATIONS[rotation])
            for which, cr in crs().items() for rotation in ROTATIONS}


def test_every_rendered_manifest_equals_the_record():
    got = rendered_all()
    if os.environ.get("KO_UPDATE_RENDERED"):
        RECORD.parent.mkdir(parents=True, exist_ok=True)
        RECORD.write_text(json.dumps(got, indent=1, sort_keys=True) + "\n")
    want = json.loads(RECORD.read_text())
    if got != want:
        diff = difflib.unified_diff(json.dumps(want, indent=1, sort_keys=True).splitlines(),
                                    json.dumps(got, indent=1, sort_keys=True).splitlines(),
                                    "recorded", "rendered now", lineterm="", n=2)
        pytest.fail("the rendered manifests differ from the record:\n" + "\n".join(list(diff)[:200]))


def test_the_record_covers_every_template_and_the_hashes_differ_by_rotation():
    want = json.loads(RECORD.read_text())
    assert len(want) == 12
    every = want["every-component / no-rotation"]
    assert {"apiserver.yaml.j2", "etcd", "components-absent aggregated", "components-absent components",
            "component karmada-search", "component karmada-descheduler"} <= set(every)

    def pod_hash(case: str, key: str) -> str:
        for obj in want[case][key]:
            if obj["kind"] in ("Deployment", "StatefulSet"):
                return obj["spec"]["template"]["metadata"]["annotations"]["operator.karmada.io/pki-hash"]
        raise AssertionError(f"no workload in {key}")

    plain, karmada, etcd = (f"every-component / {r}" for r in ROTATIONS)
    # each phase of a rotation restarts karmada-apiserver; only the etcd CA's restarts etcd
    assert len({pod_hash(plain, "apiserver.yaml.j2"), pod_hash(karmada, "apiserver.yaml.j2"),
                pod_hash(etcd, "apiserver.yaml.j2")}) == 3
    assert pod_hash(plain, "etcd") == pod_hash(karmada, "etcd") != pod_hash(etcd, "etcd")


def test_the_rollout_task_renders_what_the_record_holds_and_reverses_a_rollback():
    from karmada_operator.tasks import karmada_rollout

    want = json.loads(RECORD.read_text())["every-component / no-rotation"]
    cr = crs()["every-component"]
    plan = kp.build_plan(cr)
    hashes = pki_hashes(plan, fixed_pki(plan), {}, {})
    for step in ("aggregated", "components"):
        steps, absent = karmada_rollout.component_steps({"plan": plan, "step": step, "hashes": hashes,
                                                         "reverse": False})
        assert {f"component {s['name']}": s["objects"] for s in steps} == {
            k: v for k, v in want.items() if k.startswith("component ") and
            any(c["component"] == k.split(" ", 1)[1] and c["step"] == step for c in plan["components"])}
        assert absent == want[f"components-absent {step}"]
        back, _ = karmada_rollout.component_steps({"plan": plan, "step": step, "hashes": hashes, "reverse": True})
        assert [s["name"] for s in back] == [s["name"] for s in reversed(steps)]


def test_every_pod_template_holds_pod_security_restricted_and_binds_no_low_port():
    """Every workload rendered for every sample: the pod and container security settings of
    kube/pod_security.py (etcd: as user 65532 on a volume that takes fsGroup, the emptyDir
    sample's; root on the bed's host directories, with everything else: docs/security.md), a
    writable /tmp, and no container port or probe below 1024 (a process with no capability
    cannot bind one)."""
    from karmada_operator.kube import pod_security  # noqa: PLC0415 - the settings under test

    seen = []
    for which, cr in crs().items():
        for key, objects in render(cr, {}).items():
            for obj in objects:
                if obj["kind"] not in ("Deployment", "StatefulSet") or "spec" not in obj:
                    continue  # (components-absent names the workloads to delete, no spec)
                pod = obj["spec"]["template"]["spec"]
                etcd = obj["kind"] == "StatefulSet"
                seen.append(f"{which}/{obj['metadata']['name']}")
                if etcd:
                    non_root = cr["spec"]["etcd"]["local"].get("storage", {}).get("type") == "EmptyDir"
                    assert pod["securityContext"] == pod_security.etcd_pod(non_root=non_root), key
                    if non_root:  # restricted, the user included
                        assert {k: pod["securityContext"][k] for k in ("runAsNonRoot", "runAsUser", "fsGroup")} == \
                            {"runAsNonRoot": True, "runAsUser": 65532, "fsGroup": 65532}, key
                        seen.append("non-root etcd")
                else:
                    assert pod["securityContext"] == pod_security.pod(), key
                for container in pod["containers"]:
                    assert container["securityContext"] == pod_security.container(), key
                    assert {"name": "tmp", "mountPath": "/tmp"} in container["volumeMounts"], key
                    ports = [p["containerPort"] for p in container.get("ports") or []]
                    ports += [container[p]["httpGet"]["port"] for p in ("readinessProbe", "livenessProbe")
                              if p in container]
                    assert all(int(p) >= 1024 for p in ports), (key, ports)
                    args = " ".join(container.get("args") or []) + " ".join(container.get("command") or [])
                    assert "--secure-port=443" not in args, key
    assert len(seen) >= 20 and "non-root etcd" in seen, seen
