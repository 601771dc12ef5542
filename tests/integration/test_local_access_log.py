"""``asyncz dev``'s access log (on by default) is buffered off the front's event loop: Ctrl-C
right after a burst of requests still writes one line for every request."""

from __future__ import annotations

import json
import os
import signal
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from tests.support.databases import empty_backends
from tests.support.devrun import DevRun, dev_env

pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.timeout(180)]

API_KEY = "access-log-test-key"


def test_ctrl_c_loses_no_access_line(tmp_path: Path) -> None:
    database_url, redis_url = empty_backends("accesslog", 1)
    env = dev_env(database_url, redis_url, API_KEY)
    env["ASYNCZ_DEV_API_SANDBOXES"] = "2"
    run = DevRun(tmp_path / "data", env, API_KEY, quiet=False, args=["--log-format", "json"])
    try:
        run.wait_healthy()
        with ThreadPoolExecutor(8) as pool:
            ids = list(pool.map(lambda i: run.submit({"task": "echo", "payload": {"n": i}}),
                                range(200)))  # fmt: skip
        os.killpg(run.pgid, signal.SIGINT)  # at once: most lines are still in the buffer
        assert run.proc.wait(60) == 0, run.log()[-3000:]
    finally:
        run.stop()
    lines = [json.loads(x) for x in run.log().splitlines() if x.startswith('{"timestamp"')]
    access = [x for x in lines if x["component"] == "gateway" and x["message"] == "POST /jobs 202"]
    assert len(access) == len(ids) == 200
    assert lines[-1]["message"] == "stopped"  # written before the runner's last line
