"""A client that keeps writing to Karmada during a day-2 operation, and what its writes prove.

Two things a user of Karmada cares about while etcd changes under it: no write that
karmada-apiserver acknowledged is lost, and writes do not fail for long. ``Writer`` creates
ConfigMaps through karmada-apiserver as fast as one client with one connection does, keeps the
names whose create was acknowledged and the time of every attempt, so a test can assert both.
"""

from __future__ import annotations

import threading
import time


def longest_failure_run(attempts: list[tuple[float, bool]]) -> float:
    """Seconds of the longest run of consecutive failed attempts: from the first failure of a run
    to the next success (or to the last attempt, when the run never ended). ``attempts`` are
    (monotonic time, succeeded) pairs in order."""
    longest, started = 0.0, None
    for when, ok in attempts:
        if not ok and started is None:
            started = when
        elif ok and started is not None:
            longest, started = max(longest, when - started), None
    if started is not None:
        longest = max(longest, attempts[-1][0] - started)
    return longest


class Writer:
    """Creates ConfigMaps in Karmada's ``default`` namespace in a thread; ``prefix`` keeps the
    writers of different tests apart."""

    def __init__(self, kubeconfig, prefix: str = "w", label: str = "etcd-scale", rate: float = 0.0):
        from kubernetes import client, config

        self.prefix, self.label = prefix, label
        # creates per second to aim at (0: one after the other, 0.1 s apart)
        self.period = 1.0 / rate if rate else 0.0
        self.api = client.CoreV1Api(config.new_client_from_config(str(kubeconfig)))
        self.acked: list[str] = []
        # name -> (time.monotonic() when acknowledged, the ConfigMap's data as created)
        self.acked_at: dict[str, tuple[float, dict[str, str]]] = {}
        self.failures: list[str] = []
        self.attempts: list[tuple[float, bool]] = []
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        from kubernetes import client

        i = 0
        next_at = time.monotonic()
        while not self.stop.is_set():
            name = f"{self.prefix}-{i:06d}"
            body = client.V1ConfigMap(metadata=client.V1ObjectMeta(name=name, labels={"e2e": self.label,
                                                                                      "writer": self.prefix}),
                                      data={"i": str(i)})
            started = time.monotonic()
            try:
                self.api.create_namespaced_config_map("default", body, _request_timeout=10)
                self.acked_at[name] = (time.monotonic(), {"i": str(i)})
                self.acked.append(name)
                self.attempts.append((started, True))
            except Exception as exc:  # noqa: BLE001 - an unacknowledged write is allowed, counted
                self.failures.append(f"{time.strftime('%H:%M:%S')} {name}: {str(exc)[:160]}")
                self.attempts.append((started, False))
            i += 1
            if self.period:
                next_at += self.period
                self.stop.wait(max(0.0, next_at - time.monotonic()))
            else:
                self.stop.wait(0.1)

    def finish(self) -> None:
        self.stop.set()
        self.thread.join(timeout=30)

    def longest_outage(self) -> float:
        """Seconds of the longest run of failed creates (0 when none failed)."""
        return longest_failure_run(self.attempts)

    def existing(self) -> set[str]:
        names, token = set(), None
        while True:
            page = self.api.list_namespaced_config_map(
                "default", label_selector=f"e2e={self.label},writer={self.prefix}", limit=500, _continue=token,
                _request_timeout=30)
            names |= {c.metadata.name for c in page.items}
            token = page.metadata._continue
            if not token:
                return names

    def summary(self) -> str:
        return (f"{len(self.acked)} creates acknowledged, {len(self.failures)} failed (not acknowledged), "
                f"longest run of failures {self.longest_outage():.1f}s")
