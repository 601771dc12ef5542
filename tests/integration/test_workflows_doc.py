"""docs/workflows.md, run as written against ``asyncz dev``: its task module is written to a
folder of its own, the runner imports it (``--tasks``), and each example runs with the
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

DOC = Path(__file__).resolve().parents[2] / "docs" / "workflows.md"
API_KEY = "workflow-doc-key"
BLOCK = re.compile(r"```python\n(.*?)```", re.DOTALL)


def blocks() -> tuple[str, list[str]]:
    """The page's task module and its examples, in order."""
    found = BLOCK.findall(DOC.read_text())
    tasks = [b for b in found if b.startswith("# workflow_tasks.py")]
    assert len(tasks) == 1, "the page shows its task module once"
    return tasks[0], [b for b in found if b is not tasks[0]]


TASKS, EXAMPLES = blocks()


@pytest.fixture(scope="module")
def dev(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DevRun]:
    folder = tmp_path_factory.mktemp("workflows")
    (folder / "workflow_tasks.py").write_text(TASKS)
    database_url, redis_url = empty_backends("dev", 8)
    env = dev_env(database_url, redis_url, API_KEY)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(folder), env.get("PYTHONPATH")]))
    run = DevRun(
        folder / "data", env, API_KEY, args=["--tasks", "workflow_tasks", "--workers", "2"]
    )
    try:
        run.wait_healthy()
        yield run
    finally:
        run.stop()


def test_the_page_has_the_three_shapes_and_the_failure_rules() -> None:
    assert len(EXAMPLES) == 4


@pytest.mark.parametrize("n", range(len(EXAMPLES)))
def test_each_example_runs_as_written(dev: DevRun, n: int, tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("ASYNCZ_")}
    env |= {"ASYNCZ_API_URL": dev.url, "ASYNCZ_API_KEY": API_KEY}
    done = subprocess.run(
        [sys.executable, "-c", EXAMPLES[n]], env=env, cwd=tmp_path, capture_output=True,
        text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, f"example {n + 1} failed:\n{done.stderr}\n{dev.log()[-3000:]}"


def test_a_diamond_on_asyncz_dev_runs_d_after_b_and_c_with_both_results(dev: DevRun) -> None:
    from asyncz.client import Client

    with Client(dev.url, API_KEY) as client:
        jobs = client.submit_graph([
            {"task": "transcribe", "payload": {"audio": "a.mp3"}, "ref": "a"},
            {"task": "ask_model", "payload": {"model": "b", "score": 1}, "ref": "b",
             "depends_on": ["a"]},
            {"task": "ask_model", "payload": {"model": "c", "score": 2}, "ref": "c",
             "depends_on": ["a"]},
            {"task": "pick_best", "ref": "d", "depends_on": ["b", "c"]},
        ])  # fmt: skip
        ids = {job.ref: job.id for job in jobs}
        assert client.result(ids["d"], timeout=60) == "c"  # it compared both results
        d = client.get(ids["d"])
        assert {p["job_id"] for p in d.depends_on or []} == {ids["b"], ids["c"]}
        parents_done = max(client.get(ids[r]).finished_at for r in "bc")  # type: ignore[type-var]
        assert d.started_at is not None and d.started_at >= parents_done
