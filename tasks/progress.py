"""Engine progress → the Run row, throttled so a fast stream of callbacks costs a few writes a second."""
from __future__ import annotations

import threading
import time

from webapp.tables.models import Run

MIN_INTERVAL_S = 0.5


class RunProgress:
    """`on_progress(done, total, unit)` for the engine: writes progress_done/total/unit of one run.

    The first and the final call (done == total) are always written; calls in between at most every
    `MIN_INTERVAL_S`. The engine may report from worker threads, hence the lock.
    """

    def __init__(self, run_id: int, min_interval_s: float = MIN_INTERVAL_S) -> None:
        self.run_id = run_id
        self.min_interval_s = min_interval_s
        self._last = 0.0
        self._lock = threading.Lock()
        self.writes = 0

    def __call__(self, done: int, total: int, unit: str) -> None:
        now = time.monotonic()
        with self._lock:
            final = total > 0 and done >= total
            if not final and self.writes and now - self._last < self.min_interval_s:
                return
            self._last = now
            self.writes += 1
        Run.objects.filter(pk=self.run_id).update(progress_done=done, progress_total=total, progress_unit=unit)
