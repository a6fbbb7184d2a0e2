"""support.etcd_db.compare_keys: what the restore e2e test counts as a key the restore kept.

Every key of the snapshot must be in the live etcd with the same bytes; a rule may allow a key
to change or go (``fields`` None) or only some fields of its JSON object to change. The reader
itself is checked against a real etcd in tests/integration/test_etcd_db_reader.py.
"""

from __future__ import annotations

import json

from support.etcd_db import Keys, KeyValue, MayDiffer, compare_keys


def kv(key: str, value: bytes | dict, mod: int = 5) -> KeyValue:
    raw = json.dumps(value).encode() if isinstance(value, dict) else value
    return KeyValue(key.encode(), raw, 2, mod, 1, 0)


def keys(*kvs: KeyValue, revision: int = 10) -> Keys:
    return Keys(revision, {k.key: k for k in kvs})


CLUSTER = {"metadata": {"name": "m3", "generation": 2, "managedFields": [{"time": "t1"}]},
           "spec": {"taints": [{"key": "dedicated"}]}, "status": {"conditions": [{"type": "Ready"}]}}
RULES = [MayDiffer(b"/registry/leases/", None, "renewed by their holders"),
         MayDiffer(b"/registry/cluster.karmada.io/clusters/", ("status", "metadata.managedFields",
                                                                "metadata.generation"), "status is live")]


def test_equal_bytes_pass_and_new_keys_do_not_matter():
    snap = keys(kv("/registry/secrets/ns/a", b"k8s\x00secret"), kv("/registry/leases/ns/l", b"x"))
    live = keys(kv("/registry/secrets/ns/a", b"k8s\x00secret", mod=5), kv("/registry/new", b"y"),
                kv("/registry/leases/ns/l", b"x"))
    assert compare_keys(snap, live, RULES) == ([], {})


def test_unlisted_keys_gone_or_changed_are_problems():
    snap = keys(kv("/registry/secrets/ns/a", b"one"), kv("/registry/secrets/ns/b", b"two"))
    live = keys(kv("/registry/secrets/ns/a", b"One", mod=9))
    problems, allowed = compare_keys(snap, live, RULES)
    assert problems == ["/registry/secrets/ns/a: other bytes (mod_revision 5 in the snapshot, 9 now)",
                        "/registry/secrets/ns/b: gone"]
    assert allowed == {}


def test_a_rule_without_fields_allows_anything_and_says_it_was_needed():
    snap = keys(kv("/registry/leases/ns/a", b"1"), kv("/registry/leases/ns/b", b"2"))
    live = keys(kv("/registry/leases/ns/a", b"1b", mod=11))
    assert compare_keys(snap, live, RULES) == ([], {b"/registry/leases/": [b"/registry/leases/ns/a",
                                                                            b"/registry/leases/ns/b"]})


def test_a_rule_with_fields_allows_only_those_and_the_key_must_stay():
    key = "/registry/cluster.karmada.io/clusters/m3"
    status_only = {**CLUSTER, "metadata": {**CLUSTER["metadata"], "generation": 4, "managedFields": [{"time": "t2"}]},
                   "status": {"conditions": [{"type": "Ready", "status": "Unknown"}]}}
    assert compare_keys(keys(kv(key, CLUSTER)), keys(kv(key, status_only, mod=12)), RULES)[0] == []
    tainted = {**status_only, "spec": {"taints": [{"key": "dedicated"}, {"key": "cluster.karmada.io/unreachable"}]}}
    problems, _ = compare_keys(keys(kv(key, CLUSTER)), keys(kv(key, tainted, mod=12)), RULES)
    assert problems == [f"{key}: spec.taints differ (only status, metadata.managedFields, metadata.generation may); "
                        'spec.taints: [{"key":"dedicated"}] in the snapshot, '
                        '[{"key":"dedicated"},{"key":"cluster.karmada.io/unreachable"}] now']
    assert compare_keys(keys(kv(key, CLUSTER)), keys(), RULES)[0] == [
        f"{key}: gone (only status, metadata.managedFields, metadata.generation may differ)"]
    problems, _ = compare_keys(keys(kv(key, b"k8s\x00proto")), keys(kv(key, b"k8s\x00other")), RULES)
    assert problems == [f"{key}: not JSON, so its fields cannot be compared (only status, metadata.managedFields, "
                        "metadata.generation may differ)"]


def test_a_key_deleted_and_made_again_is_not_a_restored_key():
    """The same name and allowed fields, but another create revision: the restored plane made the
    object anew (a re-join, a controller recreating it), which is not what the restore kept."""
    key = "/registry/cluster.karmada.io/clusters/m3"
    again = KeyValue(key.encode(), json.dumps(CLUSTER).encode(), 1_000_000_050, 1_000_000_050, 1, 0)
    problems, _ = compare_keys(keys(kv(key, CLUSTER)), keys(again), RULES)
    assert problems == [f"{key}: made again (create_revision 2 in the snapshot, 1000000050 now)"]


def test_a_rule_with_no_fields_allows_other_bytes_but_not_a_gone_or_new_object():
    rules = [MayDiffer(b"/registry/deployments/", (), "protobuf, status aggregated")]
    snap = keys(kv("/registry/deployments/ns/a", b"k8s\x00one"), kv("/registry/deployments/ns/b", b"k8s\x00two"),
                kv("/registry/deployments/ns/c", b"k8s\x00three"))
    live = keys(kv("/registry/deployments/ns/a", b"k8s\x00one with status", mod=12),
                KeyValue(b"/registry/deployments/ns/c", b"k8s\x00three", 99, 99, 1, 0))
    problems, allowed = compare_keys(snap, live, rules)
    assert problems == ["/registry/deployments/ns/b: gone (only its value may differ)",
                        "/registry/deployments/ns/c: made again (create_revision 2 in the snapshot, 99 now)"]
    assert allowed == {b"/registry/deployments/": [b"/registry/deployments/ns/a"]}


def test_a_list_ruled_unordered_may_change_order_but_not_items():
    """A binding's scheduled clusters: the same clusters in another order pass; another replica
    count or another cluster is a problem, which names the values on both sides."""
    rules = [MayDiffer(b"/registry/work.karmada.io/", ("status",), "scheduled anew", unordered=("spec.clusters",))]
    binding = {"spec": {"clusters": [{"name": "member3", "replicas": 1}, {"name": "member1", "replicas": 1}]}}
    key = "/registry/work.karmada.io/resourcebindings/bookinfo/details-deployment"
    reordered = {"spec": {"clusters": [{"name": "member1", "replicas": 1}, {"name": "member3", "replicas": 1}]}}
    problems, allowed = compare_keys(keys(kv(key, binding)), keys(kv(key, reordered, mod=9)), rules)
    assert problems == [] and allowed == {b"/registry/work.karmada.io/": [key.encode()]}
    for other in ([{"name": "member1", "replicas": 1}, {"name": "member3", "replicas": 2}],
                  [{"name": "member1", "replicas": 1}]):
        problems, _ = compare_keys(keys(kv(key, binding)), keys(kv(key, {"spec": {"clusters": other}}, mod=9)), rules)
        assert len(problems) == 1 and "spec.clusters differ" in problems[0] and "in the snapshot" in problems[0], \
            problems
    # without the rule's unordered, the order alone is a problem
    strict = [MayDiffer(b"/registry/work.karmada.io/", ("status",), "no order rule")]
    assert compare_keys(keys(kv(key, binding)), keys(kv(key, reordered, mod=9)), strict)[0]
