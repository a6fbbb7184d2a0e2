"""Every pod the plan describes requests what its workload used on the test bed (none is
BestEffort) and spreads over nodes and zones (plan/plan.py: _pod, spread; the requests live in
components.py). The kubelet's own verdict is read end to end (tests/e2e/test_karmada_install.py)."""

from __future__ import annotations

import copy
from pathlib import Path

import yaml

from karmada_operator import components
from karmada_operator.plan import plan as kp

ROOT = Path(__file__).resolve().parents[2]


def sample() -> dict:
    cr = yaml.safe_load((ROOT / "config/samples/operator_v1alpha1_karmadadeployment.yaml").read_text())
    cr["metadata"].update({"namespace": "karmada-system", "generation": 1, "uid": "u1"})
    for key in ("search", "metricsAdapter", "descheduler"):
        cr["spec"].setdefault("components", {})[key] = {"enabled": True}
    return cr


def pods(plan: dict) -> dict[str, dict]:
    out = {"etcd": plan["etcd"]["pod"], "karmada-apiserver": plan["apiserver"]["pod"]}
    out.update({c["component"]: c["pod"] for c in plan["components"] if c["enabled"]})
    return out


def test_every_component_of_the_registry_states_its_measured_requests():
    for comp in components.REGISTRY:
        assert set(comp.requests) == {"cpu", "memory"}, comp.key
    assert set(components.APISERVER_REQUESTS) == set(components.AGENT_REQUESTS) == {"cpu", "memory"}


def test_every_pod_requests_cpu_and_memory_and_spreads_over_hostnames_and_zones():
    plan = kp.build_plan(sample())
    described = pods(plan)
    assert len(described) == 2 + 8, sorted(described)
    for workload, pod in described.items():
        assert set(pod["resources"]["requests"]) == {"cpu", "memory"}, workload
        assert pod["selector"] == {"app.kubernetes.io/name": workload, "app.kubernetes.io/instance": "karmada"}
        assert [(c["topologyKey"], c["whenUnsatisfiable"], c["labelSelector"]["matchLabels"])
                for c in pod["topologySpreadConstraints"]] == [
            ("kubernetes.io/hostname", "ScheduleAnyway", pod["selector"]),
            ("topology.kubernetes.io/zone", "ScheduleAnyway", pod["selector"])], workload
    assert described["karmada-apiserver"]["resources"] == {"requests": components.APISERVER_REQUESTS}
    assert described["karmada-scheduler"]["resources"] == {"requests": {"cpu": "5m", "memory": "16Mi"}}


def test_resources_set_in_the_spec_replace_the_default_whole_and_replicas_do_not_change_the_template():
    cr = sample()
    mine = {"limits": {"memory": "1Gi"}}
    cr["spec"]["components"]["scheduler"] = {"resources": mine}
    cr["spec"]["apiServer"] = {**cr["spec"].get("apiServer", {}), "resources": mine}
    plan = kp.build_plan(cr)
    assert pods(plan)["karmada-scheduler"]["resources"] == mine == pods(plan)["karmada-apiserver"]["resources"]
    scaled = copy.deepcopy(cr)
    scaled["spec"]["components"]["scheduler"]["replicas"] = 3
    before, after = pods(plan)["karmada-scheduler"], pods(kp.build_plan(scaled))["karmada-scheduler"]
    assert {k: v for k, v in before.items() if k != "replicas"} == {k: v for k, v in after.items() if k != "replicas"}
