"""docs/durable.md, run as written: its task module in a fresh folder, ``asyncz dev`` started
there as the page says, and each example run from that folder in a newcomer's environment
(tests/support/doc_examples.py)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.devrun import DevRun
from tests.support.doc_examples import dev_as_documented, module_and_examples, run_example

pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.timeout(300)]

DOC = Path(__file__).resolve().parents[2] / "docs" / "durable.md"
TASKS, EXAMPLES = module_and_examples(DOC, "story_tasks.py")


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("durable-doc")


@pytest.fixture(scope="module")
def dev(folder: Path) -> Iterator[DevRun]:
    with dev_as_documented(DOC, "story_tasks.py", folder) as run:
        yield run


def test_the_page_shows_the_client_and_the_test_helper() -> None:
    # steps, sleep, an event, a callback, spawned jobs and a long job: client and helper
    assert len(EXAMPLES) == 11


@pytest.mark.parametrize("n", range(len(EXAMPLES)))
def test_each_example_runs_as_written(dev: DevRun, folder: Path, n: int) -> None:
    run_example(EXAMPLES[n], dev, folder)
