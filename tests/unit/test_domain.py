"""Pure domain tests: no servers at all."""

from __future__ import annotations

import statistics
from datetime import UTC, datetime

import pytest

from asyncz.errors import InvalidCursorError
from asyncz.fleet.plan import workers_to_start
from asyncz.jobs import TERMINAL, TRANSITIONS, JobStatus, Lease, can_transition, out_of_retries
from asyncz.pagination import decode_cursor, encode_cursor
from asyncz.port_types import epoch_ms
from asyncz.retry import backoff_ceiling, backoff_delay

pytestmark = pytest.mark.unit


def test_lifecycle_transitions_match_the_design() -> None:
    assert can_transition(JobStatus.QUEUED, JobStatus.PROCESSING)
    assert can_transition(JobStatus.QUEUED, JobStatus.CANCELLED)
    assert can_transition(JobStatus.PROCESSING, JobStatus.QUEUED)  # retry or stale lease
    assert can_transition(JobStatus.PROCESSING, JobStatus.DEAD)
    assert can_transition(JobStatus.DEAD, JobStatus.QUEUED)  # replay
    assert not can_transition(JobStatus.QUEUED, JobStatus.COMPLETED)
    assert not can_transition(JobStatus.DEAD, JobStatus.PROCESSING)
    for terminal in (JobStatus.COMPLETED, JobStatus.CANCELLED):
        assert TRANSITIONS[terminal] == frozenset()
    assert {JobStatus.COMPLETED, JobStatus.DEAD, JobStatus.CANCELLED} == TERMINAL
    assert all(s.terminal == (s in TERMINAL) for s in JobStatus)


def test_retry_budget_counts_the_first_run_plus_max_retries() -> None:
    assert not out_of_retries(attempts=1, max_retries=2)
    assert not out_of_retries(attempts=2, max_retries=2)
    assert out_of_retries(attempts=3, max_retries=2)
    assert out_of_retries(attempts=1, max_retries=0)


def test_replay_gives_a_fresh_budget_through_attempt_base() -> None:
    lease = Lease(
        "j",
        "t",
        "echo",
        {},
        "default",
        0,
        attempt=5,
        attempt_base=3,
        max_retries=2,
        timeout_seconds=1,
    )
    assert lease.tries_used == 2 and not out_of_retries(lease.tries_used, lease.max_retries)


def test_backoff_ceiling_doubles_from_base_up_to_cap() -> None:
    assert [backoff_ceiling(n, 1.0, 30.0) for n in range(1, 8)] == [1, 2, 4, 8, 16, 30, 30]
    assert backoff_ceiling(10_000, 1.0, 30.0) == 30.0  # no overflow
    with pytest.raises(ValueError):
        backoff_ceiling(0, 1.0, 30.0)


def test_full_jitter_stays_within_zero_and_the_ceiling() -> None:
    assert backoff_delay(3, 1.0, 30.0, rand=lambda: 0.0) == 0.0
    assert backoff_delay(3, 1.0, 30.0, rand=lambda: 1.0) == 4.0
    assert backoff_delay(3, 1.0, 30.0, rand=lambda: 0.5) == 2.0
    samples = [backoff_delay(4, 1.0, 30.0) for _ in range(2000)]
    assert min(samples) >= 0.0 and max(samples) <= 8.0
    # the jitter is spread over the whole range, and mean delays grow with the attempt
    assert 3.0 < statistics.mean(samples) < 5.0
    means = [statistics.mean(backoff_delay(n, 1.0, 30.0) for _ in range(2000)) for n in (1, 2, 3)]
    assert means[0] < means[1] < means[2]


@pytest.mark.parametrize(
    ("backlog", "live", "lo", "hi", "per", "expected"),
    [
        (0, 0, 0, 10, 100, 0),  # nothing to do: scale to zero
        (1, 0, 0, 10, 100, 1),  # one job wakes one worker
        (250, 0, 0, 10, 100, 3),
        (250, 2, 0, 10, 100, 1),
        (250, 5, 0, 10, 100, 0),  # never negative
        (10_000, 0, 0, 10, 100, 10),  # capped at max
        (0, 0, 2, 10, 100, 2),  # floor at min
        (0, 3, 2, 10, 100, 0),
    ],
)
def test_fleet_starts_the_shortfall(
    backlog: int, live: int, lo: int, hi: int, per: int, expected: int
) -> None:
    assert (
        workers_to_start(backlog, live, min_workers=lo, max_workers=hi, jobs_per_worker=per)
        == expected
    )


def test_cursor_round_trip_and_forgeries_are_rejected() -> None:
    when = datetime(2026, 12, 2, 12, 0, tzinfo=UTC)
    job_id = "0b3c1d9e-7a55-4d7e-9a0e-2b1c3d4e5f60"
    assert decode_cursor(encode_cursor(when, job_id)) == (when, job_id)
    assert decode_cursor(None) is None
    for forged in [
        "not base64 !!",
        "eyJ0Ijoibm9wZSJ9",
        "e30",
        "W10",
        encode_cursor(datetime(2026, 1, 1), job_id),  # naive time
        encode_cursor(when, "'; DROP TABLE jobs; --"),
    ]:
        with pytest.raises(InvalidCursorError):
            decode_cursor(forged)


def test_a_due_time_in_redis_is_never_before_the_rows_run_at() -> None:
    # Redis promotes an id once its clock reaches the score; PostgreSQL claims the row only
    # when run_at has come: a score rounded down would hand the id out up to 1 ms early.
    run_at = datetime(2026, 12, 6, 12, 0, 0, 123_456, tzinfo=UTC)
    assert epoch_ms(run_at) == 1_796_558_400_124
    assert epoch_ms(run_at) / 1000 >= run_at.timestamp()
