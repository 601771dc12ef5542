"""docs/first-task.md, steps 1-4, run as written from an empty folder outside the repo in a
newcomer's environment: install into a fresh venv, write mytasks.py, `asyncz dev`, curl a
`shout` job to HI.

Two substitutions only: the checkout path (the repo) and the port (a free one).
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.support.databases import fresh_database, sibling_url
from tests.support.devrun import free_port
from tests.support.first_task import blocks, parts, run_script
from tests.support.newcomer import newcomer_env, source_copy

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
    src = source_copy(tmp_path / "src")  # a copy: another tier may build the repo meanwhile
    script = script.replace("ASYNCZ_SRC=~/src/asyncz-serverless", f"ASYNCZ_SRC={src}")
    script = script.replace("8000", port)
    env = newcomer_env()
    env.update(
        # The test's servers instead of embedded ones (the doc's other path).
        ASYNCZ_DATABASE_URL=db_url,
        ASYNCZ_REDIS_URL=os.environ.get("ASYNCZ_TEST_REDIS_URL", "redis://127.0.0.1:6379/0"),
        ASYNCZ_DEV_PORT=port,  # where the doc says 8000
        PIP_DISABLE_PIP_VERSION_CHECK="1",
    )
    status, out = run_script(script, tmp_path, env, timeout=300)
    dev_log = tmp_path / "myproject" / "dev.log"
    detail = out + (dev_log.read_text(errors="replace")[-3000:] if dev_log.exists() else "")
    assert status == 0, detail
    last = out.strip().splitlines()[-1]
    assert '"status":"completed"' in last and '"result":{"text":"HI"}' in last, detail
