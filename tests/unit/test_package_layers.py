"""The package's layers, read from what Python imports: the Jobs' programs carry no controller
code, and no module of ours reaches Ansible's import machinery for another of ours."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "plugins" / "module_utils"


def imported_by(*modules: str) -> set[str]:
    """Our modules a fresh Python has loaded after importing ``modules``."""
    code = ("import importlib, json, sys\n"
            f"for m in {list(modules)!r}: importlib.import_module(m)\n"
            "print(json.dumps(sorted(m for m in sys.modules if m.startswith('karmada_operator'))))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         env={"PYTHONPATH": str(PACKAGE), "PATH": "/usr/bin:/bin"})
    return set(json.loads(out.stdout))


def test_the_jobs_programs_import_no_controller_code():
    loaded = imported_by("karmada_operator.backup.job", "karmada_operator.backup.restore_job")
    assert loaded <= {
        "karmada_operator", "karmada_operator.backup", "karmada_operator.backup.job",
        "karmada_operator.backup.restore_job", "karmada_operator.backup.runner", "karmada_operator.backup.store",
        "karmada_operator.etcd", "karmada_operator.etcd.gateway", "karmada_operator.etcd.snapshots",
    }, sorted(loaded)


def test_no_plugin_edits_the_import_path_or_falls_back_to_another_import():
    offenders = [f"{path.relative_to(ROOT)}: {needle}"
                 for path in sorted((ROOT / "plugins").rglob("*.py"))
                 for needle in ("sys.path", "except ImportError", "meta_path", "ansible.module_utils.karmada")
                 if needle in path.read_text()]
    assert offenders == []


# The layers, lowest first (docs/architecture.md, "The package"): a module imports only its own
# layer and those before it.
LAYERS = ["task", "components", "kube", "etcd", "pki", "controlplane", "plan", "members", "runtime", "backup", "tasks"]


def import_graph() -> dict[str, set[str]]:
    """Our module -> our modules it imports, read from the source (ast)."""
    import ast

    def resolve(module: str, name: str) -> str:
        full = f"{module}.{name}"
        return full if (PACKAGE / (full.replace(".", "/") + ".py")).exists() else module

    graph: dict[str, set[str]] = {}
    for path in (PACKAGE / "karmada_operator").rglob("*.py"):
        name = ".".join(path.relative_to(PACKAGE).with_suffix("").parts).removesuffix(".__init__")
        deps: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("karmada_operator"):
                deps |= {resolve(node.module, alias.name) for alias in node.names}
            elif isinstance(node, ast.Import):
                deps |= {a.name for a in node.names if a.name.startswith("karmada_operator")}
        graph[name] = deps
    return graph


def layer(module: str) -> int:
    parts = module.split(".")
    return LAYERS.index(parts[1]) if len(parts) > 1 and parts[1] in LAYERS else -1


def test_every_module_imports_only_its_layer_and_those_below():
    graph = import_graph()
    assert len(graph) > 50
    assert all(layer(m) >= 0 for m in graph if m != "karmada_operator"), sorted(m for m in graph if layer(m) < 0)
    upward = sorted(f"{m} -> {d}" for m, deps in graph.items() for d in deps if layer(d) > layer(m))
    assert upward == []


def test_the_import_graph_has_no_cycle():
    graph = import_graph()
    state: dict[str, int] = {}
    cycles: list[list[str]] = []

    def visit(module: str, stack: list[str]) -> None:
        state[module] = 1
        stack.append(module)
        for dep in sorted(graph.get(module, ())):
            if state.get(dep) == 1:
                cycles.append(stack[stack.index(dep):] + [dep])
            elif dep in graph and dep not in state:
                visit(dep, stack)
        stack.pop()
        state[module] = 2

    for module in sorted(graph):
        if module not in state:
            visit(module, [])
    assert cycles == []
