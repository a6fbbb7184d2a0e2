"""The rollout gate's pure parts: when a Deployment counts as rolled out, which version runs."""

import karmada_rollout as kr
import pytest


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


def test_a_stuck_rollout_is_named_by_its_progress_condition():
    stuck = dep(ready=0, conditions=[{"type": "Progressing", "status": "False", "reason": "ProgressDeadlineExceeded",
                                      "message": 'ReplicaSet "x" has timed out progressing.'}])
    assert kr._progress_failed(stuck) == 'ReplicaSet "x" has timed out progressing.'
    assert kr._progress_failed(dep()) == ""


