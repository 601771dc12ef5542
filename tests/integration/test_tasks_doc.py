"""docs/tasks.md, run as written against ``asyncz dev``: its task module is written to a
folder of its own, the runner imports it (``--tasks``), and each example runs with the
client pointed at the runner and the module importable (``PYTHONPATH``)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.devrun import DevRun, dev_importing
from tests.support.doc_examples import module_and_examples, run_example

pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.timeout(300)]

DOC = Path(__file__).resolve().parents[2] / "docs" / "tasks.md"
TASKS, EXAMPLES = module_and_examples(DOC, "shop_tasks.py")


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("tasks-doc")
    (folder / "shop_tasks.py").write_text(TASKS)
    return folder


@pytest.fixture(scope="module")
def dev(folder: Path) -> Iterator[DevRun]:
    with dev_importing(folder, "shop_tasks", "tasks-doc-key") as run:
        yield run


def test_the_page_shows_submit_refusal_schemas_and_evolution() -> None:
    assert len(EXAMPLES) == 4


@pytest.mark.parametrize("n", range(len(EXAMPLES)))
def test_each_example_runs_as_written(dev: DevRun, folder: Path, n: int, tmp_path: Path) -> None:
    run_example(EXAMPLES[n], dev, tmp_path, pythonpath=folder)
