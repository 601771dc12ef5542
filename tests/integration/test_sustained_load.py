"""Sustained load with faults (the soak benchmark's short mode, same code): ``asyncz dev`` on
private servers at a steady submit rate for 72 s, retention deleting as fast as
submits insert, while a worker sandbox is SIGKILLed, Redis restarted empty and PostgreSQL
frozen in turn. Every accepted job must end, and the tables must stop growing once
retention and autovacuum run (tests/perf/bench_soak.py; its long run is in BENCHMARKS.md)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from tests.perf.bench_soak import FAULTS, SHORT, run_soak
from tests.perf.soak_report import SIZES, size_held

pytestmark = pytest.mark.integration


def test_under_sustained_load_and_faults_every_accepted_job_ends_and_tables_stop_growing() -> None:
    cfg = replace(SHORT)
    result = run_soak(cfg, say=print)
    seconds = cfg.minutes * 60

    # the load was real and every fault happened
    assert result["accepted"] >= 0.5 * cfg.rate * seconds, result["accepted"]
    kinds = [kind for _, kind, _ in result["faults"]]
    assert sorted(set(kinds)) == sorted(FAULTS), result["faults"]
    assert not any(what == "no worker sandbox was alive" for _, _, what in result["faults"])

    # every accepted job was seen ended (completed: echo never fails)
    assert result["missing"] == [], (len(result["missing"]), result["states"])

    # retention deletes: the rows left are about retention's period of submits, not the run's
    rows = result["rows"]
    recovery_s = float(cfg.env["ASYNCZ_RECOVERY_INTERVAL_SECONDS"])  # retention runs in it
    window_rows = cfg.rate * (cfg.retain_s + 3 * recovery_s + cfg.window_s)
    assert rows[-1]["jobs live"] <= window_rows, rows[-1]["jobs live"]
    assert rows[-1]["jobs live"] < 0.5 * result["accepted"]

    # and the tables and their indexes stop growing: the last window within 1.5x the second
    # (or within 64 kB of it: a kill's lost attempts may add a page to a one-page table)
    for table, part in SIZES:
        second, last = rows[1][f"{table} {part}"], rows[-1][f"{table} {part}"]
        assert size_held(second, last), (table, part, second, last)
