"""Against ``asyncz dev`` with an 8-second local Lambda (``ASYNCZ_DEV_WORKER_TIMEOUT_SECONDS``)
and a 1-second safety margin: a durable job of five 2-second steps (``timeout_seconds`` 4)
completes, each step ran once (counted by its side effect), across several invocations that
continued one another (the fleet's tick is ten minutes away: each continuation asked for its
worker at once). The 10 s of steps cannot fit one invocation's 7-s budget; at most two steps
fit one (7 s, then 5 s left: a second fits its 4-s bound, a third does not)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.databases import empty_backends
from tests.support.devrun import API_KEY, DevRun, dev_env

pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.timeout(300)]

TASKS = """
import time
from asyncz.tasks import task


@task("long_job", durable=True, timeout_seconds=4)
def long_job(payload, ctx):
    def part(i):
        time.sleep(2)
        with open(payload["ledger"], "a") as ledger:  # the step's side effect, counted
            ledger.write(f"part:{i}\\n")
        return i

    return [ctx.step(f"part:{i}", part, i) for i in range(5)]
"""


@pytest.fixture(scope="module")
def dev(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DevRun]:
    folder = tmp_path_factory.mktemp("long-dev")
    (folder / "long_tasks.py").write_text(TASKS)
    env = dev_env(*empty_backends("dev", 1), API_KEY)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(folder), env.get("PYTHONPATH")]))
    env |= {
        # steps that outlast any one invocation (10 s of them, a 7-s budget), as five 8-s
        # steps did 20-s invocations, at a fraction of the wait
        "ASYNCZ_DEV_WORKER_TIMEOUT_SECONDS": "8",
        "ASYNCZ_WORKER_SAFETY_MARGIN_SECONDS": "1",
        "ASYNCZ_FLEET_INTERVAL_SECONDS": "600",  # the tick runs once at start, then never
    }
    run = DevRun(folder / "data", env, API_KEY, args=["--tasks", "long_tasks"])
    try:
        run.wait_healthy()
        yield run
    finally:
        run.stop()


def test_five_2s_steps_complete_across_8s_invocations_each_step_once(
    dev: DevRun, tmp_path: Path
) -> None:
    ledger = tmp_path / "ledger.txt"
    job_id = dev.submit({"task": "long_job", "payload": {"ledger": str(ledger)}})
    job = dev.wait_job(job_id, lambda j: j["status"] in {"completed", "dead", "cancelled"},
                       timeout=240)  # fmt: skip
    assert job["status"] == "completed", job
    assert job["result"] == [0, 1, 2, 3, 4]
    assert sorted(ledger.read_text().split()) == [f"part:{i}" for i in range(5)]

    status, attempts = dev.call("GET", f"/jobs/{job_id}/attempts")
    assert status == 200, attempts
    outcomes = [a["outcome"] for a in attempts["items"]]
    assert outcomes[-1] == "completed" and set(outcomes[:-1]) == {"suspended"}, outcomes
    assert len({a["worker_id"] for a in attempts["items"]}) >= 2  # invocations, not one
    status, steps = dev.call("GET", f"/jobs/{job_id}/steps")
    assert status == 200, steps
    assert [s["attempts"] for s in steps["items"]] == [1] * 5
    assert len({s["job_attempt"] for s in steps["items"]}) >= 2
