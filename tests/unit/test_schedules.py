"""Periodic schedules: cron slots in a time zone, intervals aligned to the epoch, catch-up,
and a bad schedule refused when its task is declared."""

from __future__ import annotations

import math
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from asyncz.tasks.registry import TaskRegistry, task
from asyncz.tasks.schedule import Schedule

pytestmark = pytest.mark.unit

UTC_10 = datetime(2026, 3, 29, 10, 0, tzinfo=UTC)


def test_cron_slots_follow_the_time_zone_across_a_dst_change() -> None:
    daily = Schedule.parse("30 2 * * *", timezone="Europe/Paris")
    # 2026-03-29: Paris goes from +01:00 to +02:00 at 02:00, so 02:30 local does not exist
    before = daily.latest_slot(datetime(2026, 3, 28, 12, tzinfo=UTC))
    assert before == datetime(2026, 3, 28, 1, 30, tzinfo=UTC)
    after = daily.next_slot(datetime(2026, 3, 29, 12, tzinfo=UTC))
    assert after == datetime(2026, 3, 30, 0, 30, tzinfo=UTC)


def test_due_slots_catch_up_once_unless_told_more() -> None:
    every = Schedule.parse("*/5 * * * *")
    last = UTC_10
    now = UTC_10 + timedelta(hours=1, seconds=3)
    assert every.due_slots(last, now) == [UTC_10 + timedelta(hours=1)]
    three = Schedule.parse("*/5 * * * *", catch_up=3)
    assert three.due_slots(last, now) == [UTC_10 + timedelta(minutes=m) for m in (50, 55, 60)]
    assert every.due_slots(now, now) == []
    assert every.latest_slot(UTC_10) == UTC_10  # a slot equal to now is due


def test_intervals_align_to_the_epoch() -> None:
    hourly = Schedule.parse(timedelta(hours=1))
    assert hourly.latest_slot(UTC_10 + timedelta(minutes=59)) == UTC_10
    assert hourly.next_slot(UTC_10) == UTC_10 + timedelta(hours=1)
    assert hourly.describe() == "every 3600 s"


@pytest.mark.parametrize(
    ("spec", "kw"),
    [
        ("0 * * *", {}),
        ("0 * * * * *", {}),
        ("61 * * * *", {}),
        ("0 * * * *", {"timezone": "Mars/Olympus"}),
        ("0 * * * *", {"catch_up": 0}),
        (30, {}),
        (90.5, {}),
        (math.inf, {}),
    ],
)
def test_a_bad_schedule_fails_at_import(spec: Any, kw: dict[str, Any]) -> None:
    with pytest.raises(ValueError):
        task("bad", schedule=spec, registry=TaskRegistry(), **kw)
