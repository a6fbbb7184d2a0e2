"""The status writer's merge patch makes status exactly what it computed, nested keys included."""

from karmada_operator.runtime import status_writer as sw


def apply_merge_patch(target, patch):
    """RFC 7386, as the API server applies a merge patch."""
    if not isinstance(patch, dict):
        return patch
    out = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            out.pop(key, None)
        else:
            out[key] = apply_merge_patch(out.get(key), value)
    return out


def test_a_key_a_nested_object_lost_is_removed_not_kept():
    current = {"phase": "Running", "upgrade": {"phase": "Stopped", "stoppedAt": "karmada-controller-manager",
                                               "message": "ImagePullBackOff", "components": [{"name": "a"}]}}
    new = {"phase": "Running", "upgrade": {"phase": "Succeeded", "components": [{"name": "b"}]}}
    patch = sw.replacing_patch(current, new)
    assert patch["upgrade"]["stoppedAt"] is None and patch["upgrade"]["message"] is None
    assert apply_merge_patch(current, patch) == new


def test_lists_and_values_are_replaced_whole_and_new_keys_added():
    current = {"conditions": [{"type": "Ready"}], "members": {"m1": {"state": "Joined"}}}
    new = {"conditions": [], "members": {"m2": {"state": "Joining"}}, "observedGeneration": 3}
    assert apply_merge_patch(current, sw.replacing_patch(current, new)) == new
    assert sw.replacing_patch(current, current) == current
