"""etcd itself: the JSON gateway client, health, membership, scaling, member replacement, rollouts, snapshots."""
