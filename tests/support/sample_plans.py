"""The KarmadaDeployments the template tests render: the sample; every optional component on,
with pod settings that take the templates' optional branches; and that with external etcd."""

from __future__ import annotations

import copy
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[2]


def sample() -> dict:
    cr = yaml.safe_load((ROOT / "config/samples/operator_v1alpha1_karmadadeployment.yaml").read_text())
    cr["metadata"].update({"namespace": "tenant-a", "uid": "00000000-0000-0000-0000-000000000001"})
    return cr


def crs() -> dict[str, dict]:
    local = sample()
    every = copy.deepcopy(local)
    for key in ("search", "metricsAdapter", "descheduler"):
        every["spec"]["components"][key] = {"enabled": True}
    every["spec"]["globals"].update({"nodeSelector": {"zone": "a"},
                                     "tolerations": [{"key": "cp", "operator": "Exists"}],
                                     "priorityClassName": "system-cluster-critical",
                                     "imagePullSecrets": [{"name": "regcred"}]})
    external = copy.deepcopy(every)
    external["spec"]["etcd"] = {"external": {"endpoints": ["https://e1:2379"], "tlsSecretRef": {"name": "ext-etcd"}}}
    # etcd on an emptyDir: the volume takes fsGroup, so etcd runs as 65532 (etcd/run_as.py)
    emptydir = copy.deepcopy(local)
    emptydir["spec"]["etcd"]["local"]["storage"] = {"type": "EmptyDir"}
    return {"sample": local, "every-component": every, "external-etcd": external, "emptydir-etcd": emptydir}
