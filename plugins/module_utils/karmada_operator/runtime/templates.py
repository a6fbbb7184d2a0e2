"""Render a role's Jinja templates into Kubernetes objects with Jinja2 itself, not Ansible's templar.

Plain Python, no Ansible API (the filter plugin and tests import it as ``role_templates``).

Every full pass renders the system objects of karmada-apiserver and each component's manifests.
Through Ansible's ``template`` lookup that took 1.2-1.3 s each on the test bed (Ansible wraps
every variable access of a template in its lazy, unsafe-aware machinery); the same templates
rendered here take milliseconds. The templates stay the YAML files in ``roles/*/templates``;
they are rendered as Ansible would (``trim_blocks``, ``None`` printed as an empty string, the
``to_json`` and ``combine`` filters), with the variables they use passed explicitly: a variable
a template needs and the caller did not pass is an error naming it, not an empty string.
``tests/unit/test_role_templates.py`` renders every template both ways and compares the objects.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

import jinja2
import yaml

_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
ROLES = Path(__file__).resolve().parents[4] / "roles"


def _to_json(value: Any, **kwargs: Any) -> str:
    return json.dumps(value, **kwargs)


def _combine(*dicts: Mapping[str, Any], recursive: bool = False) -> dict[str, Any]:
    """Ansible's ``combine``: later dicts win; ``recursive`` merges nested dicts."""
    out: dict[str, Any] = {}
    for d in dicts:
        for key, value in (d or {}).items():
            if recursive and isinstance(out.get(key), Mapping) and isinstance(value, Mapping):
                out[key] = _combine(out[key], value, recursive=True)
            else:
                out[key] = value
    return out


def _finalize(value: Any) -> Any:
    return "" if value is None else value  # as Ansible's templar prints None


@functools.lru_cache(maxsize=8)
def environment(role: str) -> jinja2.Environment:
    """The Jinja2 environment for one role's templates directory."""
    env = jinja2.Environment(  # noqa: S701 - renders YAML, not HTML
        loader=jinja2.FileSystemLoader(str(ROLES / role / "templates")),
        trim_blocks=True,
        undefined=jinja2.StrictUndefined,
        finalize=_finalize,
        keep_trailing_newline=True,
    )
    env.filters.update(to_json=_to_json, combine=_combine)
    return env


def render_objects(role: str, names: Iterable[str], context: Mapping[str, Any],
                   filters: Mapping[str, Callable[..., Any]] | None = None) -> list[dict[str, Any]]:
    """The objects (YAML documents, empty ones dropped) of the templates ``names`` of ``role``,
    in order, rendered with ``context``. Raises KeyError naming a variable a template uses that
    ``context`` lacks."""
    env = environment(role)
    env.filters.update(filters or {})  # the caller's own filters (the same functions on every call)
    out: list[dict[str, Any]] = []
    for name in names:
        template = env.get_template(name)
        try:
            text = template.render(**context)
        except jinja2.UndefinedError as exc:
            raise KeyError(f"{role}/templates/{name}: {exc.message}") from exc
        out.extend(doc for doc in yaml.load_all(text, Loader=_LOADER) if doc)
    return out


def component_steps(components: Iterable[Mapping[str, Any]], plan: Mapping[str, Any],
                    pki: Mapping[str, Any]) -> list[dict[str, Any]]:
    """karmada_rollout's steps for the enabled ``components`` (plan entries) of one step: each
    component's objects (``component.yaml.j2``) and how to tell it is rolled out."""
    steps = []
    for comp in components:
        if not comp.get("enabled"):
            continue
        objects = render_objects("karmada_deployment", ["component.yaml.j2"],
                                 {"karmada_deployment_plan": plan, "comp": comp, "karmada_deployment_pki": pki}, {})
        steps.append({
            "name": comp["component"],
            "objects": objects,
            "deployment": comp["name"],
            "container": comp["component"],
            "selector": f"app.kubernetes.io/name={comp['component']},app.kubernetes.io/instance={plan['name']}",
            "replicas": comp["pod"]["replicas"],
            "lease": comp["gate"]["lease"],
            "admission": comp["gate"]["admission"],
        })
    return steps
