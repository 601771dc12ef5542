"""Flow-control limits of a task (pure): how many of its jobs may run at once, fleet-wide
(``concurrency``), how many per ``concurrency_key`` (``key_concurrency``), and how many may
start per period (``rate``, and ``key_rate`` per key).

A rate ``"60/m"`` counts *starts* (claims) in a sliding window: in any period of that length
at most 60 attempts of the task start, across the whole fleet. There is no extra burst: 60
may start at once, then the next waits until the first leaves the window.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from typing import Any

PERIODS = {"s": 1, "m": 60, "h": 3600, "d": 86400}
_RATE = re.compile(r"^\s*(\d{1,6})\s*/\s*(\d{0,6})\s*([smhd])\s*$")
MAX_LIMIT = 100_000
LIMIT_FIELDS = ("concurrency", "key_concurrency", "rate", "key_rate")


class LimitSpecError(ValueError):
    """A limit that cannot mean anything (``rate="abc"``, ``concurrency=0``)."""


@dataclass(frozen=True, slots=True)
class Rate:
    """At most ``count`` starts in any window of ``period_seconds``."""

    count: int
    period_seconds: int

    @staticmethod
    def parse(text: str) -> Rate:
        """``"60/m"``, ``"10/s"``, ``"1000/h"``, ``"5/10s"`` (a number before the unit
        multiplies it)."""
        m = _RATE.match(text) if isinstance(text, str) else None
        if m is None:
            raise LimitSpecError(
                f"rate {text!r} is not COUNT/PERIOD, e.g. '60/m' (periods: s, m, h, d)"
            )
        count, times, unit = int(m.group(1)), int(m.group(2) or 1), m.group(3)
        if not 1 <= count <= MAX_LIMIT or times < 1:
            raise LimitSpecError(f"rate {text!r}: the count is 1 to {MAX_LIMIT}, the period > 0")
        return Rate(count, times * PERIODS[unit])

    def __str__(self) -> str:
        return f"{self.count}/{self.period_seconds}s"


@dataclass(frozen=True, slots=True)
class TaskLimits:
    concurrency: int | None = None
    key_concurrency: int | None = None
    rate: Rate | None = None
    key_rate: Rate | None = None

    @property
    def any(self) -> bool:
        return any(getattr(self, f) is not None for f in LIMIT_FIELDS)

    def describe(self) -> dict[str, Any]:
        """As shown by the API (``None`` fields left out)."""
        return {f: str(v) if isinstance(v, Rate) else v for f in LIMIT_FIELDS
                if (v := getattr(self, f)) is not None}  # fmt: skip

    @staticmethod
    def build(
        concurrency: int | None = None,
        key_concurrency: int | None = None,
        rate: str | Rate | None = None,
        key_rate: str | Rate | None = None,
    ) -> TaskLimits:
        for name, value in (("concurrency", concurrency), ("key_concurrency", key_concurrency)):
            if value is not None and (
                isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_LIMIT
            ):
                raise LimitSpecError(f"{name} is a whole number from 1 to {MAX_LIMIT}")
        return TaskLimits(concurrency, key_concurrency, _rate(rate), _rate(key_rate))

    def overridden(self, changes: Mapping[str, Any]) -> TaskLimits:
        """These limits with a deployment's overrides (``null`` removes a limit)."""
        unknown = set(changes) - set(LIMIT_FIELDS)
        if unknown:
            raise LimitSpecError(f"unknown limit {sorted(unknown)[0]!r}; known: {LIMIT_FIELDS}")
        merged = {f: getattr(self, f) for f in LIMIT_FIELDS} | dict(changes)
        checked = TaskLimits.build(**merged)
        return replace(self, **{f: getattr(checked, f) for f in LIMIT_FIELDS})


RATE_GUARD_MS = 200  # a rate's window is this much longer than its period (limits.lua says why)


@dataclass(frozen=True, slots=True)
class Counted:
    """Something a limit counts, rebuilt from Postgres after Redis lost it: a running
    attempt's slot (``ms``: what its lease has left) or a start (``ms``: how long ago; it
    counts for ``window_ms``), in its task's scope (``key`` None) or in one key's."""

    kind: str  # "slots" or "starts"
    task: str
    key: str | None
    member: str
    ms: int
    window_ms: int = 0


def counted(
    running: Iterable[Mapping[str, Any]],
    starts: Iterable[Mapping[str, Any]],
    limited: Mapping[str, TaskLimits],
) -> list[Counted]:
    """What the limits of ``limited`` count of these running attempts (``id``, ``task``,
    ``concurrency_key``, ``left_ms``) and recent starts (``job_id``, ``attempt``, ``task``,
    ``concurrency_key``, ``age_ms``)."""
    out = []
    for r in running:
        lim, key, member = limited.get(r["task"]), r["concurrency_key"], f"r:{r['id']}"
        if lim is None or r["left_ms"] <= 0:
            continue
        if lim.concurrency:
            out.append(Counted("slots", r["task"], None, member, int(r["left_ms"])))
        if lim.key_concurrency and key is not None:
            out.append(Counted("slots", r["task"], key, member, int(r["left_ms"])))
    for a in starts:
        lim, key = limited.get(a["task"]), a["concurrency_key"]
        member = f"r:{a['job_id']}:{a['attempt']}"
        if lim is None:
            continue
        for rate, scope in ((lim.rate, None), (lim.key_rate if key is not None else None, key)):
            window = rate.period_seconds * 1000 + RATE_GUARD_MS if rate else 0
            if rate and a["age_ms"] < window:
                out.append(Counted("starts", a["task"], scope, member, int(a["age_ms"]), window))
    return out


def rate_windows(limited: Mapping[str, TaskLimits]) -> dict[str, float]:
    """Per rated task, the seconds its longest rate window spans."""
    return {
        task: max(r.period_seconds for r in (lim.rate, lim.key_rate) if r) + RATE_GUARD_MS / 1000
        for task, lim in limited.items()
        if lim.rate or lim.key_rate
    }


def _rate(value: str | Rate | None) -> Rate | None:
    if value is None or isinstance(value, Rate):
        return value
    return Rate.parse(value)


def parse_overrides(text: str) -> dict[str, dict[str, Any]]:
    """``ASYNCZ_TASK_LIMITS``: a JSON object ``{task: {limit: value}}``, checked here so a
    bad one fails at cold start."""
    if not text.strip():
        return {}
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise LimitSpecError(f"ASYNCZ_TASK_LIMITS is not JSON: {exc}") from None
    if not isinstance(data, dict) or not all(isinstance(v, dict) for v in data.values()):
        raise LimitSpecError('ASYNCZ_TASK_LIMITS is {"task": {"concurrency": 5, ...}}')
    for changes in data.values():
        TaskLimits().overridden(changes)
    return data
