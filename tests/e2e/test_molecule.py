"""`molecule test -s default` against the test bed's host cluster, as operator-sdk users run it.

The real ansible-operator runs our watches.yaml (config/rbac's ServiceAccount, what `make run`
does) and molecule runs the default scenario as a subprocess: prepare installs the CRDs,
converge applies config/samples and waits for Ready, verify checks the KarmadaDeployment is
Ready for its generation and that karmada-apiserver answers to the generated admin kubeconfig
(through the Service's ClusterIP, which this node routes), and that the EtcdBackup/EtcdRestore
samples say what they wait for; destroy deletes the samples. The second test shows verify failing on a
KarmadaDeployment that is not Ready for its current generation.

This machine cannot reach GitHub: KARMADA_SAMPLE_SPEC points spec.crds at Karmada's CRDs
served locally, and drops the sample's members (member join is tests/e2e/test_karmada_member_clusters.py);
it also asks for one etcd member instead of the sample's three (test_karmada_install.py installs
three), which keeps the scenario short enough for `make test`.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from support import karmada_e2e
from support.karmada_crds_server import serve
from support.karmada_e2e import operator_kubeconfig
from support.operator_runtime import OperatorProcess
from support.testenv import HostCluster
from support.waiting import condition, crds_established, wait_for

pytestmark = pytest.mark.e2e

ROOT = karmada_e2e.ROOT
NS = "karmada-system"
NAME = karmada_e2e.sample()["metadata"]["name"]


class Molecule:
    """Runs molecule commands of the default scenario in the project directory."""

    def __init__(self, host: HostCluster, work: Path, sample_spec: dict):
        venv_bin = str(Path(sys.executable).parent)
        self.env = dict(os.environ)
        self.env.update({
            "PATH": f"{venv_bin}:{host.settings['KO_LINKS']}:{self.env.get('PATH', '')}",
            "K8S_AUTH_KUBECONFIG": str(host.kubeconfig),
            "KARMADA_SAMPLE_SPEC": json.dumps(sample_spec),
            "TEST_OPERATOR_NAMESPACE": NS,
            "ANSIBLE_LOCAL_TEMP": str(work / "ansible-tmp"),
            "ANSIBLE_FORCE_COLOR": "0",
            "NO_COLOR": "1",
        })
        self.env.pop("ANSIBLE_CONFIG", None)  # molecule writes its own
        self.molecule = str(Path(venv_bin) / "molecule")
        self.work = work
        self.runs = 0

    def __call__(self, command: str, timeout: float = 1800) -> subprocess.CompletedProcess:
        start = time.monotonic()
        proc = subprocess.run([self.molecule, command, "-s", "default"], cwd=ROOT, env=self.env,
                              capture_output=True, text=True, timeout=timeout)
        proc.elapsed = time.monotonic() - start  # type: ignore[attr-defined]
        self.runs += 1
        (self.work / f"molecule-{self.runs}-{command}.log").write_text(proc.stdout + proc.stderr)
        print(f"\nmolecule {command}: rc {proc.returncode} in {proc.elapsed:.0f}s")  # type: ignore[attr-defined]
        return proc


@pytest.fixture(scope="module")
def bed(host_cluster: HostCluster, bin_path, tmp_path_factory):
    work = tmp_path_factory.mktemp("molecule")
    crds = serve()
    host_cluster.kubectl("apply", "-k", str(ROOT / "config/crd"))
    crds_established(host_cluster.kubectl, ["karmadadeployments.operator.karmada.io",
                                            "etcdbackups.operator.karmada.io", "etcdrestores.operator.karmada.io"])
    host_cluster.kubectl("create", "namespace", NS, check=False)
    operator = OperatorProcess(bin_path("ansible-operator"), operator_kubeconfig(host_cluster, work), work)
    operator.wait_healthy()
    # The lighter scenario of `make test`: one etcd member (the sample's three are
    # test_karmada_install.py's proof), the sample otherwise as users get it.
    spec = {"crds": {"url": crds.url, "sha256": crds.sha256}, "members": [], "etcd": {"local": {"replicas": 1}}}
    yield {"host": host_cluster, "operator": operator, "work": work, "spec": spec,
           "molecule": Molecule(host_cluster, work, spec)}
    # Whatever a failed run left behind, while the operator still runs to finalize it.
    for kind in ("etcdrestore", "etcdbackup", "karmadadeployment"):
        host_cluster.kubectl("delete", kind, "--all", "-n", NS, "--timeout=300s", check=False, timeout=330)
    operator.stop()
    crds.stop()


def output_tail(proc: subprocess.CompletedProcess, chars: int = 6000) -> str:
    return (proc.stdout + proc.stderr)[-chars:]


def failed_assertion(proc: subprocess.CompletedProcess) -> str:
    """The expression of the first failed ansible.builtin.assert in a playbook's output."""
    for line in proc.stdout.splitlines():
        if "FAILED! => " in line:
            return json.loads(line.split("FAILED! => ", 1)[1]).get("assertion", "")
    return ""


@pytest.mark.timeout(1800)
def test_molecule_default_scenario_passes(bed):
    host, operator = bed["host"], bed["operator"]
    proc = bed["molecule"]("test")
    assert proc.returncode == 0, f"{output_tail(proc)}\n--- operator log ---\n{operator.log_tail()}"
    out = re.sub(r"\x1b\[[0-9;]*m", "", proc.stdout + proc.stderr)
    # Every step of the sequence ran, verify's checks among them.
    for step in ("prepare", "converge", "verify", "destroy"):
        assert f"[default > {step}] Executed: Successful" in out, step
    for task in ("Check that it is Ready for its current generation", "Check that it is Karmada that answered",
                 "Check that each says what it waits for"):
        assert task in out, task
    # destroy removed the samples; what they made goes with them (the finalizer deletes volumes
    # and Secrets, the garbage collector the owned workloads and Services, a little later).
    assert host.get("karmadadeployments,etcdbackups,etcdrestores", "-n", NS)["items"] == []

    def made() -> list[str]:
        items = host.get("deployments,statefulsets,services,secrets,pvc", "-n", NS,
                         "-l", f"app.kubernetes.io/instance={NAME}")["items"]
        return [f"{o['kind']}/{o['metadata']['name']}" for o in items]

    wait_for(lambda: not made(), 180, "the objects the KarmadaDeployment made to go", lambda: str(made()))


def test_verify_fails_unless_ready_for_the_current_generation(bed):
    host, operator, molecule = bed["host"], bed["operator"], bed["molecule"]
    cr = karmada_e2e.sample()
    cr["spec"].update(bed["spec"])
    cr["spec"]["paused"] = True  # the operator reports Ready "Unknown" (Paused) and installs nothing

    def kd() -> dict:
        return host.get("karmadadeployment", NAME, "-n", NS)

    host.kubectl("apply", "-f", "-", input=yaml.safe_dump(cr))
    try:
        wait_for(lambda: condition(kd(), "Ready").get("reason") == "Paused", 120, "Ready Unknown (Paused)",
                 operator.log_tail)
        paused = molecule("verify", timeout=300)
        assert paused.returncode != 0, output_tail(paused)
        assert f"{NS}/{NAME} is not Ready for generation 1" in paused.stdout, output_tail(paused)
        # It failed on the Ready status, the operator's "Unknown" (Paused).
        assert failed_assertion(paused) == "ready.status | default('') == 'True'", output_tail(paused)

        # Ready "True", but written for the previous generation: still not verified.
        host.kubectl("patch", "karmadadeployment", NAME, "-n", NS, "--type=merge",
                     "-p", '{"spec":{"certificates":{"renewBeforeDays":31}}}')
        wait_for(lambda: condition(kd(), "Ready").get("observedGeneration") == 2, 120, "Paused at generation 2",
                 operator.log_tail)
        stale = {"status": {
            "phase": "Running", "observedGeneration": 2, "adminKubeconfigSecret": f"{NAME}-admin-kubeconfig",
            "conditions": [{"type": "Ready", "status": "True", "reason": "Running", "message": "stale",
                            "observedGeneration": 1, "lastTransitionTime": "2026-01-01T00:00:00Z"}]}}
        host.kubectl("patch", "karmadadeployment", NAME, "-n", NS, "--subresource=status", "--type=merge",
                     "-p", json.dumps(stale))
        wrong_generation = molecule("verify", timeout=300)
        assert condition(kd(), "Ready").get("message") == "stale", "the operator rewrote the patched status"
        assert wrong_generation.returncode != 0, output_tail(wrong_generation)
        assert f"{NS}/{NAME} is not Ready for generation 2" in wrong_generation.stdout, output_tail(wrong_generation)
        expected = "ready.observedGeneration | default(-1) == kd.metadata.generation"
        assert failed_assertion(wrong_generation) == expected, output_tail(wrong_generation)
    finally:
        host.kubectl("delete", "karmadadeployment", NAME, "-n", NS, "--timeout=300s", check=False, timeout=330)
