"""Karmada's cluster failover is reachable through the KarmadaDeployment spec: the settings the
failover benchmark applies render into the components' flags, and docs/performance.md shows
exactly those settings."""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

import yaml

from karmada_operator.plan import plan as kp

ROOT = Path(__file__).resolve().parents[2]


def bench():
    spec = importlib.util.spec_from_file_location("bench_failover", ROOT / "benchmarks" / "bench_failover.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def comp(plan, key):
    return next(c for c in plan["components"] if c["key"] == key)


def doc_blocks() -> list:
    """The YAML blocks of the Failover section of docs/performance.md."""
    text = (ROOT / "docs" / "performance.md").read_text()
    section = text.split("\n## Failover", 1)[1].split("\n## ", 1)[0]
    return [yaml.safe_load(b) for b in re.findall(r"```yaml\n(.*?)```", section, re.S)]


def test_the_failover_settings_render_into_the_flags_of_the_components_that_own_them():
    b = bench()
    cr = yaml.safe_load((ROOT / "config/samples/operator_v1alpha1_karmadadeployment.yaml").read_text())
    cr["spec"]["components"] = b.FAILOVER_COMPONENTS
    plan = kp.build_plan(cr)
    cm = comp(plan, "controllerManager")["args"]
    assert "--feature-gates=Failover=true,GracefulEviction=true" in cm
    for flag in ("--enable-no-execute-taint-eviction=true", "--resource-eviction-rate=20", "--kube-api-qps=200",
                 "--cluster-api-qps=200", "--concurrent-resourcebinding-syncs=20", "--concurrent-work-syncs=20"):
        assert flag in cm
    assert "--kube-api-qps=200" in comp(plan, "scheduler")["args"]
    assert "--allow-no-execute-taint-policy=true" in comp(plan, "webhook")["args"]
    # Component gates, not spec.globals: karmada-apiserver (kube-apiserver) does not know Failover.
    assert not any("Failover" in a for a in plan["apiserver"]["args"])


def test_docs_show_the_settings_and_the_taint_policy_the_benchmark_uses():
    b = bench()
    blocks = doc_blocks()
    assert blocks[0]["spec"]["components"] == b.FAILOVER_COMPONENTS
    assert blocks[1] == b.CLUSTER_TAINT_POLICY
