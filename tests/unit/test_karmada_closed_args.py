"""The closed extraArgs list: well formed, and documented flag by flag."""

import re
from pathlib import Path

from karmada_operator.components import closed_args, closed_args_used

CLOSED_ARGS = closed_args()

ROOT = Path(__file__).resolve().parents[2]
SPEC_KEYS = {"apiServer", "etcd", "aggregatedAPIServer", "kubeControllerManager", "controllerManager", "scheduler",
             "webhook", "descheduler", "search", "metricsAdapter"}


def test_keys_are_spec_keys_and_flags_are_extra_args_keys():
    assert set(CLOSED_ARGS) == SPEC_KEYS
    for key, flags in CLOSED_ARGS.items():
        assert flags, key
        for flag, why in flags.items():
            assert re.fullmatch(r"[a-z0-9][a-z0-9-]*", flag), (key, flag)  # as the CRD's extraArgs keys
            assert why and "\n" not in why, (key, flag)


def test_closed_args_used_lists_only_closed_flags():
    assert closed_args_used("webhook", {"v": "4", "cert-dir": "/x", "kubeconfig": "/y"}) == ["cert-dir", "kubeconfig"]
    assert closed_args_used("webhook", None) == []
    assert closed_args_used("schedulerEstimator", {"kubeconfig": "/y"}) == []


def test_docs_list_every_closed_flag_and_no_other():
    text = (ROOT / "docs/karmadadeployment.md").read_text()
    section = text.split("## extraArgs the operator refuses", 1)[1].split("\n## ", 1)[0]
    rows = re.findall(r"^\| `spec\.(?:components\.)?([A-Za-z]+)(?:\.local)?` \| `([a-z0-9-]+)` \|", section, re.M)
    assert sorted(rows) == sorted((key, flag) for key, flags in CLOSED_ARGS.items() for flag in flags)
