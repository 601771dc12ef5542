"""Issue 18 against ``asyncz dev``: a burst of slow jobs gets every allowed worker within
seconds, not at the fleet controller's next tick (a minute later)."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from tests.integration.test_local_dev import (  # noqa: F401 - fixtures
    DevProcess,
    _free_port,
    call,
    dev_env,
    fresh_backends,
    runs,
    submit_many,
    wait_terminal,
)

pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.timeout(240)]

BURST = 1000
# The acceptance bound of issue 18: all workers live this soon after the first submit.
# (A deadline on a wait, like any wait_until; the fleet tick alone would take a minute.)
ALL_LIVE_WITHIN_S = 10.0


def test_a_burst_gets_every_worker_within_seconds(
    dev_env: dict[str, str],  # noqa: F811
    tmp_path: Path,
    runs: list[DevProcess],  # noqa: F811
) -> None:
    env = {
        **dev_env,
        "ASYNCZ_FLEET_MAX_WORKERS": "4",
        "ASYNCZ_FLEET_JOBS_PER_WORKER": "50",
        "ASYNCZ_FLEET_INTERVAL_SECONDS": "600",  # the tick runs once at start, then never
        "ASYNCZ_WORKER_IDLE_EXIT_SECONDS": "30",
    }
    dev = DevProcess(_free_port(), tmp_path / "data", env, [])
    runs.append(dev)
    dev.wait_healthy()
    assert call(dev.url, "GET", "/stats")[1]["live_workers"] == 0

    ids: list[str] = []
    burst = threading.Thread(
        target=lambda: ids.extend(
            submit_many(
                dev.url,
                [{"task": "sleep", "payload": {"seconds": 0.2}} for _ in range(BURST)],
            )
        )
    )
    first_submit = time.monotonic()
    burst.start()
    seen: list[int] = []
    while time.monotonic() - first_submit < ALL_LIVE_WITHIN_S:
        seen.append(call(dev.url, "GET", "/stats")[1]["live_workers"])
        if seen[-1] == 4:
            break
        time.sleep(0.2)
    assert seen[-1] == 4, f"live workers seen: {seen}\n{dev.log()[-3000:]}"
    burst.join(60)
    assert len(ids) == BURST
    jobs = wait_terminal(dev.url, ids, timeout=120)
    assert {job["status"] for job in jobs.values()} == {"completed"}
    assert call(dev.url, "GET", "/stats")[1]["live_workers"] <= 4  # never past the maximum
