"""docs/flow-control.md, run as written against ``asyncz dev``: its task module is written to
a folder of its own, the runner imports it (``--tasks``), and each example runs with the
client pointed at the runner (``ASYNCZ_API_URL``, ``ASYNCZ_API_KEY``)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.databases import empty_backends
from tests.support.devrun import DevRun, dev_env

pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.timeout(300)]

DOC = Path(__file__).resolve().parents[2] / "docs" / "flow-control.md"
API_KEY = "flow-doc-key"
BLOCK = re.compile(r"```python\n(.*?)```", re.DOTALL)


def blocks() -> tuple[str, list[str]]:
    """The page's task module and the examples after it, in order (the snippets before it,
    of unique jobs, are fragments)."""
    found = BLOCK.findall(DOC.read_text())
    tasks = [i for i, b in enumerate(found) if b.startswith("# flow_tasks.py")]
    assert len(tasks) == 1, "the page shows its task module once"
    return found[tasks[0]], found[tasks[0] + 1 :]


TASKS, EXAMPLES = blocks()


@pytest.fixture(scope="module")
def dev(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DevRun]:
    folder = tmp_path_factory.mktemp("flow")
    (folder / "flow_tasks.py").write_text(TASKS)
    database_url, redis_url = empty_backends("dev", 8)
    env = dev_env(database_url, redis_url, API_KEY)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(folder), env.get("PYTHONPATH")]))
    run = DevRun(folder / "data", env, API_KEY, args=["--tasks", "flow_tasks", "--workers", "2"])
    try:
        run.wait_healthy()
        yield run
    finally:
        run.stop()


def test_the_page_has_the_llm_example_and_the_pause() -> None:
    assert len(EXAMPLES) == 2
    assert 'concurrency=5, rate="60/m", key_concurrency=2' in TASKS


@pytest.mark.parametrize("n", range(len(EXAMPLES)))
def test_each_example_runs_as_written(dev: DevRun, n: int, tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("ASYNCZ_")}
    env |= {"ASYNCZ_API_URL": dev.url, "ASYNCZ_API_KEY": API_KEY}
    done = subprocess.run(
        [sys.executable, "-c", EXAMPLES[n]], env=env, cwd=tmp_path, capture_output=True,
        text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, f"example {n + 1} failed:\n{done.stderr}\n{dev.log()[-3000:]}"
