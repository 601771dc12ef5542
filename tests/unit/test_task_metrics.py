"""Per-task CloudWatch metrics: a worker adds up its attempts per task and publishes one
EMF line per task (dimension ``task``), with exact counts and a bounded sample of run times."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from asyncz.jobs import NewJob
from asyncz.observability import publish_task_metrics
from asyncz.worker.loop import WorkerLoop
from asyncz.worker.task_metrics import MAX_VALUES, TaskMetrics
from tests.support.memory import service

pytestmark = pytest.mark.unit

Published = list[tuple[str, int, int, list[float]]]


def test_a_worker_publishes_each_tasks_runs_failures_and_run_times_when_it_stops() -> None:
    svc = service(worker_poll_seconds=0.1, backoff_base_seconds=60.0)
    published: Published = []

    async def go() -> None:
        for task in ["echo"] * 5 + ["fail"] * 2:
            await svc.submit(NewJob(task=task, payload={}, max_retries=1))
        worker = WorkerLoop(svc, remaining_seconds=lambda: 3600, idle_exit_seconds=0.5,
                            publish_task_metrics=lambda *a: published.append(a))  # fmt: skip
        await worker.run()

    asyncio.run(go())
    by_task = {task: (runs, failures, len(ms)) for task, runs, failures, ms in published}
    assert by_task == {"echo": (5, 0, 5), "fail": (2, 2, 2)}  # one line per task, at the end


def test_figures_are_published_once_an_interval_has_passed_with_a_bounded_sample() -> None:
    published: Published = []
    metrics = TaskMetrics(lambda *a: published.append(a), interval_s=3600)
    for n in range(MAX_VALUES * 3):
        metrics.record("echo", "completed" if n % 3 else "dead", float(n))
    assert published == []  # the interval has not passed
    metrics.flush()
    [(task, runs, failures, run_ms)] = published
    assert (task, runs, failures) == ("echo", MAX_VALUES * 3, MAX_VALUES)
    assert len(run_ms) == MAX_VALUES and len(set(run_ms)) == MAX_VALUES
    assert max(run_ms) >= MAX_VALUES  # a sample of every run, not the first hundred
    metrics.flush()
    assert len(published) == 1  # nothing new, nothing published
    quick = TaskMetrics(lambda *a: published.append(a), interval_s=0)
    quick.record("sleep", "completed", 1.0)
    assert published[-1][0] == "sleep"
    TaskMetrics(None).record("echo", "completed", 1.0)  # off: nothing kept


def test_a_tasks_figures_are_one_emf_line_with_the_task_as_dimension(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("POWERTOOLS_METRICS_DISABLED", "false")
    monkeypatch.delenv("POWERTOOLS_DEV", raising=False)
    publish_task_metrics("echo", 3, 1, [1.5, 2.5])
    [line] = [json.loads(x) for x in capsys.readouterr().out.splitlines() if x.startswith("{")]
    emf: dict[str, Any] = line["_aws"]["CloudWatchMetrics"][0]
    assert sorted(emf["Dimensions"][0]) == ["service", "task"]
    assert [m["Name"] for m in emf["Metrics"]] == ["TaskRuns", "TaskFailures", "TaskRunTime"]
    assert (line["task"], line["TaskRuns"], line["TaskFailures"]) == ("echo", [3.0], [1.0])
    assert line["TaskRunTime"] == [1.5, 2.5]
    monkeypatch.setenv("POWERTOOLS_METRICS_DISABLED", "true")
    publish_task_metrics("echo", 3, 1, [1.5])
    assert capsys.readouterr().out == ""
