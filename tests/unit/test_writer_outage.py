"""The e2e writer's longest run of failed writes (what etcd scaling's outage bound is read from)."""

from support.writer import longest_failure_run


def test_no_failures_is_no_outage():
    assert longest_failure_run([]) == 0.0
    assert longest_failure_run([(0.0, True), (1.0, True)]) == 0.0


def test_a_run_lasts_from_its_first_failure_to_the_next_success():
    attempts = [(0.0, True), (1.0, False), (2.0, False), (3.5, False), (4.0, True), (5.0, False), (6.0, True)]
    assert longest_failure_run(attempts) == 3.0


def test_a_run_that_never_ended_lasts_to_the_last_attempt():
    assert longest_failure_run([(0.0, True), (1.0, False), (12.5, False)]) == 11.5


def test_one_lone_failure_counts_until_the_next_success():
    assert longest_failure_run([(0.0, False), (0.2, True)]) == 0.2
