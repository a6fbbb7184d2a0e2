#!/usr/bin/env python3
"""Offline schema check for `make lint`: each sample in config/samples validates against its
CRD's OpenAPI schema (structure, types, enums, patterns, ranges), and a few broken variants
do not. CEL rules and strict unknown-field checks need a real API server: they are tested
in tests/integration/test_crd_schemas.py.
"""

from __future__ import annotations

import copy
import sys
from pathlib import Path

import jsonschema
import yaml

ROOT = Path(__file__).resolve().parent.parent
K8S_KEYS = ("x-kubernetes-", "x-kubernetes-validations")


def to_jsonschema(node):
    """Drop Kubernetes extensions and make int-or-string / unknown fields plain JSON Schema."""
    if isinstance(node, dict):
        out = {k: to_jsonschema(v) for k, v in node.items() if not k.startswith(K8S_KEYS)}
        if node.get("x-kubernetes-int-or-string"):
            out.pop("pattern", None)
        if node.get("type") == "object" and "properties" in node and not node.get(
                "x-kubernetes-preserve-unknown-fields"):
            out["additionalProperties"] = False
        out.pop("default", None)
        return out
    if isinstance(node, list):
        return [to_jsonschema(v) for v in node]
    return node


def schemas() -> dict[str, dict]:
    out = {}
    for path in sorted((ROOT / "config/crd/bases").glob("*.yaml")):
        crd = yaml.safe_load(path.read_text())
        schema = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
        schema = to_jsonschema(schema)
        schema["properties"]["metadata"] = {"type": "object"}
        out[crd["spec"]["names"]["kind"]] = schema
    return out


BROKEN = {
    "KarmadaDeployment": [("etcd", {"local": {"replicas": 4}}), ("deletionPolicy", "Orphan"),
                          ("karmadaVersion", "1.18"), ("components", {"etcdProxy": {}}),
                          ("images", {"karmadaRegistry": "docker.io/karmada:v1.18.2"}),
                          ("components", {"scheduler": {"image": {"digest": "sha256:abc"}}}),
                          ("globals", {"labels": {"team": "not a label value"}})],
    "EtcdBackup": [("retention", {"maxBackups": 0}), ("schedule", "nightly")],
    "EtcdRestore": [("bumpRevision", -1)],
}


def main() -> int:
    errors = []
    by_kind = schemas()
    for path in sorted((ROOT / "config/samples").glob("operator_*.yaml")):
        sample = yaml.safe_load(path.read_text())
        schema = by_kind[sample["kind"]]
        try:
            jsonschema.validate(sample, schema)
        except jsonschema.ValidationError as exc:
            errors.append(f"{path.name}: sample does not validate: {exc.message} at {list(exc.absolute_path)}")
        for field, value in BROKEN[sample["kind"]]:
            bad = copy.deepcopy(sample)
            bad["spec"][field] = value
            if jsonschema.Draft7Validator(schema).is_valid(bad):
                errors.append(f"{path.name}: broken variant spec.{field}={value!r} was accepted")
    for err in errors:
        print(err, file=sys.stderr)
    print(f"checked {len(by_kind)} CRDs and their samples: {'FAILED' if errors else 'ok'}")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
