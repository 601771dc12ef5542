"""docs/first-task.md, steps 1-4, run as written from an empty folder outside the repo:
install into a fresh venv, write mytasks.py, `asyncz dev`, curl a `shout` job to HI.

Two substitutions only: the checkout path (the repo) and the port (a free one).
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
from pathlib import Path

import pytest

from tests.support.databases import fresh_database, sibling_url
from tests.support.devrun import free_port
from tests.support.first_task import ROOT, blocks, parts

pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.timeout(400)]


def test_every_part_of_the_doc_is_known() -> None:
    # local: here; deploy: tests/infra/test_first_task_synth.py; install-infra, aws and
    # localstack: the same commands the infra and LocalStack tiers run (see the doc).
    assert parts() == {"local", "install-infra", "deploy", "aws", "localstack"}


def test_first_task_runs_locally_as_documented(tmp_path: Path) -> None:
    db_url = fresh_database(sibling_url("first"))
    port = str(free_port())
    script = blocks("local")
    assert "ASYNCZ_SRC=~/src/asyncz-serverless" in script and "8000" in script
    script = script.replace("ASYNCZ_SRC=~/src/asyncz-serverless", f"ASYNCZ_SRC={ROOT}")
    script = script.replace("8000", port)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ASYNCZ_", "VIRTUAL_ENV"))}
    env.update(
        # The test's servers instead of embedded ones (the doc's other path).
        ASYNCZ_DATABASE_URL=db_url,
        ASYNCZ_REDIS_URL=os.environ.get("ASYNCZ_TEST_REDIS_URL", "redis://127.0.0.1:6379/0"),
        ASYNCZ_DEV_PORT=port,  # where the doc says 8000
        PIP_DISABLE_PIP_VERSION_CHECK="1",
    )
    proc = subprocess.Popen(
        ["bash", "-c", "set -euo pipefail\n" + script],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    try:
        out, _ = proc.communicate(timeout=300)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, _ = proc.communicate()
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)  # asyncz dev's sandboxes, if any remain
    dev_log = tmp_path / "myproject" / "dev.log"
    detail = out + (dev_log.read_text(errors="replace")[-3000:] if dev_log.exists() else "")
    assert proc.returncode == 0, detail
    last = out.strip().splitlines()[-1]
    assert '"status":"completed"' in last and '"result":{"text":"HI"}' in last, detail
