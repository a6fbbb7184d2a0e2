"""The rollout gate's pure parts: when a Deployment counts as rolled out, which version runs."""

import pytest

from karmada_operator.controlplane import rollout as kr


def dep(generation=2, observed=2, replicas=2, updated=2, ready=2, available=2, conditions=()):
    return {"metadata": {"generation": generation},
            "status": {"observedGeneration": observed, "replicas": replicas, "updatedReplicas": updated,
                       "readyReplicas": ready, "availableReplicas": available, "conditions": list(conditions)}}


@pytest.mark.parametrize("obj, ready, why", [
    (dep(), True, "2/2 replicas ready"),
    (None, False, "not found"),
    (dep(observed=1), False, "the new spec is not observed yet"),
    (dep(updated=1, replicas=3), False, "1/2 replicas updated"),
    (dep(ready=1), False, "1/2 replicas ready"),
    (dep(available=1), False, "1/2 replicas available"),
    # every new pod ready, one old pod still terminating: not done (the old version still serves)
    (dep(replicas=3), False, "1 old replica(s) still terminating"),
])
def test_a_deployment_is_rolled_out_when_every_replica_runs_the_new_template(obj, ready, why):
    assert kr.deployment_ready(obj, 2) == (ready, why)


def test_a_copy_from_before_the_apply_does_not_pass_the_gate():
    """A cache a moment behind the apply shows the previous template, rolled out: not done."""
    assert kr.deployment_ready(dep(generation=2, observed=2), 2, applied_generation=3) == (
        False, "the applied spec is not visible yet")
    assert kr.deployment_ready(dep(generation=3, observed=3), 2, applied_generation=3)[0]


class StaleReader:
    """A Kube stand-in whose reads lag one apply behind, like the runtime's proxy cache."""

    def __init__(self, generations):
        self.generations, self.reads, self.applied = generations, 0, []

    def apply(self, obj):
        self.applied.append(obj["metadata"]["name"])
        return {"metadata": {"generation": 3}}, True

    def get(self, api_version, kind, name, namespace):
        generation = self.generations[min(self.reads, len(self.generations) - 1)]
        self.reads += 1
        return dep(generation=generation, observed=generation)

    def list(self, *args, **kwargs):
        return []


def test_the_rollout_waits_until_the_read_copy_shows_its_apply():
    kube = StaleReader([2, 2, 3])  # two stale reads, then the applied generation, rolled out
    step = kr.Step("karmada-scheduler", [{"apiVersion": "apps/v1", "kind": "Deployment",
                                          "metadata": {"name": "karmada-scheduler", "namespace": "ns"}}],
                   "karmada-scheduler", "karmada-scheduler", "app=x", 2)
    done = kr.rollout(kube, [step], "ns", timeout=60, poll=0, sleep=lambda _: None)
    assert kube.reads == 3 and [r.name for r in done] == ["karmada-scheduler"]


def test_a_stuck_rollout_is_named_by_its_progress_condition():
    stuck = dep(ready=0, conditions=[{"type": "Progressing", "status": "False", "reason": "ProgressDeadlineExceeded",
                                      "message": 'ReplicaSet "x" has timed out progressing.'}])
    assert kr._progress_failed(stuck) == 'ReplicaSet "x" has timed out progressing.'
    assert kr._progress_failed(dep()) == ""




KD = {"apiVersion": "operator.karmada.io/v1alpha1", "kind": "KarmadaDeployment",
      "metadata": {"name": "karmada", "namespace": "karmada-system", "uid": "kd-uid"}}


def test_what_a_rollout_applies_in_the_owners_namespace_is_owned_by_it():
    """Server-side apply is a PATCH, and the runtime's proxy adds owner references to creates
    only: without this a Deployment outlives its KarmadaDeployment (seen with Retain)."""
    deployment = {"apiVersion": "apps/v1", "kind": "Deployment",
                  "metadata": {"name": "karmada-scheduler", "namespace": "karmada-system"}}
    assert kr.owned(deployment, KD)["metadata"]["ownerReferences"] == [
        {"apiVersion": "operator.karmada.io/v1alpha1", "kind": "KarmadaDeployment", "name": "karmada",
         "uid": "kd-uid"}]
    assert "ownerReferences" not in deployment["metadata"]  # the input is left as it was
    elsewhere = {**deployment, "metadata": {"name": "x", "namespace": "other"}}
    cluster_scoped = {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "metadata": {"name": "x"}}
    own = {**deployment, "metadata": {**deployment["metadata"], "ownerReferences": [{"uid": "mine"}]}}
    for obj in (elsewhere, cluster_scoped, own):
        assert kr.owned(obj, KD) is obj
    assert kr.owned(deployment, None) is deployment


class FakeKarmada:
    """karmada-apiserver as serving_check sees it: Leases by namespace/name, admission errors."""

    def __init__(self, leases=None, admit_error=None):
        self.leases, self.admit_error, self.dry_runs = leases or {}, admit_error, []

    def get(self, api_version, kind, name, namespace=None):
        assert (api_version, kind) == ("coordination.k8s.io/v1", "Lease")
        holder = self.leases.get(f"{namespace}/{name}")
        return {"spec": {"holderIdentity": holder}} if holder else None

    def create(self, obj, dry_run=False):
        assert dry_run, "the admission check must not store anything"
        self.dry_runs.append(obj)
        if self.admit_error:
            raise self.admit_error
        return obj


def step(**kw):
    return kr.Step(name="karmada-scheduler", objects=[], deployment="k-scheduler", container="karmada-scheduler",
                   selector="app=x", replicas=1, **kw)


def test_a_rolled_component_must_serve_through_karmada_apiserver():
    from karmada_operator.kube.client import KubeError
    pods = ["k-scheduler-abc-1"]
    lease = step(lease="karmada-system/karmada-scheduler")
    held = FakeKarmada({"karmada-system/karmada-scheduler": "k-scheduler-abc-1_0b1c"})
    assert kr.serving_check(held, lease, pods) == ""
    old = FakeKarmada({"karmada-system/karmada-scheduler": "k-scheduler-old-9_77aa"})
    assert "held by k-scheduler-old-9_77aa, not by a ready pod" in kr.serving_check(old, lease, pods)
    assert "held by nobody" in kr.serving_check(FakeKarmada(), lease, pods)
    probe = step(admission={"apiVersion": "policy.karmada.io/v1alpha1", "kind": "PropagationPolicy",
                            "metadata": {"name": "p", "namespace": "default"}})
    karmada = FakeKarmada()
    assert kr.serving_check(karmada, probe, pods) == "" and len(karmada.dry_runs) == 1
    down = FakeKarmada(admit_error=KubeError(500, "InternalError", 'failed calling webhook "x": connection refused'))
    assert "does not admit a PropagationPolicy: failed calling webhook" in kr.serving_check(down, probe, pods)


class Cluster:
    """Deployments that turn ready on the second read after their apply; records what happened."""

    def __init__(self, existing=()):
        self.deployments = {name: 1 for name in existing}  # name -> generation
        self.reads: dict[str, int] = {}
        self.log: list[tuple[str, str]] = []

    def apply(self, obj):
        name = obj["metadata"]["name"]
        self.deployments[name] = self.deployments.get(name, 0) + 1
        self.reads[name] = 0
        self.log.append(("apply", name))
        return {"metadata": {"generation": self.deployments[name]}}, True

    def get(self, api_version, kind, name, namespace):
        if name not in self.deployments:
            return None
        self.reads[name] = self.reads.get(name, 0) + 1
        generation = self.deployments[name]
        ready = 1 if self.reads[name] >= 2 else 0
        self.log.append(("ready" if ready else "wait", name))
        return dep(generation=generation, observed=generation, replicas=1, updated=1, ready=ready, available=ready)

    def list(self, *args, **kwargs):
        return []


def steps_of(*names):
    return [kr.Step(n, [{"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": n, "namespace": "ns"}}],
                    n, n, f"app={n}", 1) for n in names]


def test_a_first_install_starts_every_component_before_gating_the_first():
    cluster = Cluster()
    done = kr.rollout(cluster, steps_of("a", "b", "c"), "ns", timeout=60, poll=0, sleep=lambda _: None)
    assert [r.name for r in done] == ["a", "b", "c"] and all(r.changed for r in done)
    assert cluster.log[:3] == [("apply", "a"), ("apply", "b"), ("apply", "c")]
    # each gated in the registry's order, on its own Deployment
    assert [name for what, name in cluster.log if what == "ready"] == ["a", "b", "c"]


def test_an_upgrade_applies_the_next_component_only_after_the_one_before_passed_its_gate():
    cluster = Cluster(existing=("a", "b"))
    kr.rollout(cluster, steps_of("a", "b"), "ns", timeout=60, poll=0, sleep=lambda _: None)
    assert cluster.log.index(("ready", "a")) < cluster.log.index(("apply", "b"))


def test_a_component_added_to_a_running_plane_waits_its_turn():
    """Only a plane with none of the Deployments yet starts them together."""
    cluster = Cluster(existing=("a",))
    kr.rollout(cluster, steps_of("a", "b"), "ns", timeout=60, poll=0, sleep=lambda _: None)
    assert cluster.log.index(("ready", "a")) < cluster.log.index(("apply", "b"))
