"""What the attempts' start and finish times in PostgreSQL say about a limit: the most
attempts that ran at once, and the most starts in any window."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any

from tests.support.ledger import rows


def attempt_spans(pg_url: str, task: str, key: str | None = None) -> list[dict[str, Any]]:
    """Every attempt of ``task`` (of jobs with ``key``, when given) that started."""
    return rows(
        pg_url,
        "SELECT a.started_at, a.finished_at, j.concurrency_key FROM job_attempt_history a "
        "JOIN jobs j ON j.id = a.job_id WHERE j.task = %s "
        "AND (%s::text IS NULL OR j.concurrency_key = %s) ORDER BY a.started_at",
        (task, key, key),
    )


def most_at_once(spans: Sequence[dict[str, Any]]) -> int:
    """The most attempts open at one instant (a finish at t counts before a start at t)."""
    events = []
    for s in spans:
        events.append((s["started_at"], 1))
        events.append((s["finished_at"] or datetime.max.replace(tzinfo=s["started_at"].tzinfo), -1))
    events.sort(key=lambda e: (e[0], e[1]))
    now = top = 0
    for _, step in events:
        now += step
        top = max(top, now)
    return top


def most_starts_in(starts: Sequence[datetime], window: timedelta) -> int:
    """The most starts in any half-open window [t, t + window)."""
    ordered, top, first = sorted(starts), 0, 0
    for last, t in enumerate(ordered):
        while ordered[first] <= t - window:
            first += 1
        top = max(top, last - first + 1)
    return top
