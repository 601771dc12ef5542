"""docs/workflows.md, run as written: its task module in a fresh folder, ``asyncz dev``
started there as the page says, and each example run from that folder in a newcomer's
environment (tests/support/doc_examples.py)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.devrun import DevRun
from tests.support.doc_examples import dev_as_documented, module_and_examples, run_example

pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.timeout(300)]

DOC = Path(__file__).resolve().parents[2] / "docs" / "workflows.md"
TASKS, EXAMPLES = module_and_examples(DOC, "workflow_tasks.py")


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("workflows")


@pytest.fixture(scope="module")
def dev(folder: Path) -> Iterator[DevRun]:
    with dev_as_documented(DOC, "workflow_tasks.py", folder) as run:
        yield run


def test_the_page_has_the_three_shapes_the_failure_rules_and_a_cancelled_family() -> None:
    assert len(EXAMPLES) == 5


@pytest.mark.parametrize("n", range(len(EXAMPLES)))
def test_each_example_runs_as_written(dev: DevRun, folder: Path, n: int) -> None:
    run_example(EXAMPLES[n], dev, folder)


def test_a_diamond_on_asyncz_dev_runs_d_after_b_and_c_with_both_results(dev: DevRun) -> None:
    from asyncz.client import Client

    with Client(dev.url, dev.api_key) as client:
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
