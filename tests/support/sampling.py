"""Sample something every second in a thread while an end-to-end scenario runs."""

from __future__ import annotations

import threading
import time


class Sampler:
    """Calls ``probe`` every second in a thread; keeps (time, result) pairs."""

    def __init__(self, probe):
        self.probe, self.samples = probe, []
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        while not self.stop.is_set():
            started = time.monotonic()
            try:
                self.samples.append((time.strftime("%H:%M:%S"), self.probe()))
            except Exception as exc:  # noqa: BLE001 - a failed probe is a sample too
                self.samples.append((time.strftime("%H:%M:%S"), exc))
            self.stop.wait(max(0.0, 1.0 - (time.monotonic() - started)))

    def finish(self) -> list:
        self.stop.set()
        self.thread.join(timeout=30)
        return self.samples
