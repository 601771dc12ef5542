"""Per-task CloudWatch metrics: each worker adds up its attempts per task and publishes them
as EMF (dimension ``task``) once a minute and when it stops, one line per task that ran.

Cardinality is bounded by the task registry (the only names that run), and the queue is
not a dimension (it would multiply the metrics). Run times are a sample of at most
``MAX_VALUES`` per task and line (an EMF line holds at most 100 values per metric): counts
are exact, percentiles come from the sample. Costs: docs/operate.md.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from dataclasses import dataclass, field

MAX_VALUES = 100
INTERVAL_SECONDS = 60.0


@dataclass(slots=True)
class _Figures:
    runs: int = 0
    failures: int = 0
    run_ms: list[float] = field(default_factory=list)

    def add(self, failed: bool, duration_ms: float) -> None:
        self.runs += 1
        self.failures += failed
        if len(self.run_ms) < MAX_VALUES:
            self.run_ms.append(duration_ms)
        else:  # a uniform sample of every run so far (reservoir sampling)
            slot = random.randrange(self.runs)
            if slot < MAX_VALUES:
                self.run_ms[slot] = duration_ms


Publish = Callable[[str, int, int, list[float]], None]


class TaskMetrics:
    """``record`` each attempt's outcome; ``publish(task, runs, failures, run_ms)`` is called
    per task at most once per ``interval_s`` (and at :meth:`flush`)."""

    def __init__(self, publish: Publish | None, interval_s: float = INTERVAL_SECONDS) -> None:
        self.publish = publish
        self.interval_s = interval_s
        self._figures: dict[str, _Figures] = {}
        self._since = time.monotonic()

    def record(self, task: str, status: str, duration_ms: float) -> None:
        if self.publish is None:
            return
        figures = self._figures.get(task)
        if figures is None:
            figures = self._figures[task] = _Figures()
        figures.add(status not in ("completed", "cancelled"), duration_ms)
        if time.monotonic() - self._since >= self.interval_s:
            self.flush()

    def flush(self) -> None:
        figures, self._figures = self._figures, {}
        self._since = time.monotonic()
        if self.publish is not None:
            for task, f in figures.items():
                self.publish(task, f.runs, f.failures, f.run_ms)
