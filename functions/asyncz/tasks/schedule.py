"""Periodic schedules (pure): a cron expression in a time zone, or a fixed interval, and
the slots it fires at. Slots are exact instants (UTC), so every scheduler computes the same
ones and the database can refuse a second job for a slot."""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

MIN_INTERVAL_SECONDS = 60  # the schedulers run once a minute: a shorter interval would skip


def _croniter() -> Any:
    """The croniter class, imported at first use: only a deployment with a cron schedule
    pays for it (and for dateutil) at cold start."""
    from croniter import croniter

    return croniter


@dataclass(frozen=True, slots=True)
class Schedule:
    """When a task runs on its own: ``cron`` (five fields, in ``timezone``) or every
    ``interval_seconds`` (slots at multiples of it since the Unix epoch). ``catch_up``: how
    many due slots one scheduler run enqueues at most (the newest), so slots missed while
    nothing ran lead to one run by default, not a flood."""

    cron: str | None = None
    interval_seconds: int | None = None
    timezone: str = "UTC"
    catch_up: int = 1

    @classmethod
    def parse(
        cls, spec: str | int | float | timedelta, *, timezone: str = "UTC", catch_up: int = 1
    ) -> Schedule:
        """A cron string, or an interval (seconds or a timedelta); ``ValueError`` if invalid."""
        if catch_up < 1:
            raise ValueError("catch_up is at least 1")
        try:
            ZoneInfo(timezone)
        except (ZoneInfoNotFoundError, ValueError):
            raise ValueError(f"unknown time zone {timezone!r}") from None
        if isinstance(spec, str):
            if len(spec.split()) != 5 or not _croniter().is_valid(spec):
                raise ValueError(f"{spec!r} is not a five-field cron expression")
            return cls(cron=spec, timezone=timezone, catch_up=catch_up)
        seconds = spec.total_seconds() if isinstance(spec, timedelta) else float(spec)
        if not math.isfinite(seconds) or seconds < MIN_INTERVAL_SECONDS or seconds % 1:
            raise ValueError(f"an interval is a whole number of seconds >= {MIN_INTERVAL_SECONDS}")
        return cls(interval_seconds=int(seconds), timezone=timezone, catch_up=catch_up)

    def describe(self) -> str:
        return self.cron if self.cron else f"every {self.interval_seconds} s"

    def latest_slot(self, at: datetime) -> datetime:
        """The newest slot at or before ``at``."""
        if self.interval_seconds:
            n = self.interval_seconds
            return datetime.fromtimestamp(math.floor(at.timestamp() / n) * n, UTC)
        # croniter steps back from a whole second: one past ``at`` keeps a slot equal to it
        start = at.astimezone(ZoneInfo(self.timezone)).replace(microsecond=0)
        prev: datetime = _croniter()(self.cron, start + timedelta(seconds=1)).get_prev(datetime)
        return prev.astimezone(UTC)

    def previous_slot(self, slot: datetime) -> datetime:
        if self.interval_seconds:
            return slot - timedelta(seconds=self.interval_seconds)
        local = slot.astimezone(ZoneInfo(self.timezone))
        prev: datetime = _croniter()(self.cron, local).get_prev(datetime)
        return prev.astimezone(UTC)

    def next_slot(self, after: datetime) -> datetime:
        """The first slot strictly after ``after``."""
        if self.interval_seconds:
            return self.latest_slot(after) + timedelta(seconds=self.interval_seconds)
        local = after.astimezone(ZoneInfo(self.timezone))
        following: datetime = _croniter()(self.cron, local).get_next(datetime)
        return following.astimezone(UTC)

    def due_slots(self, last: datetime, now: datetime) -> list[datetime]:
        """Slots after ``last`` and at or before ``now``: the newest ``catch_up``, oldest first."""
        slots: list[datetime] = []
        slot = self.latest_slot(now)
        while slot > last and len(slots) < self.catch_up:
            slots.append(slot)
            slot = self.previous_slot(slot)
        return slots[::-1]
