"""What a pass does: the install plan from the spec, upgrades, the fast-path decision, requeue periods."""
