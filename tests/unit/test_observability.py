"""The metrics sink the handlers use: EMF when metrics are on, nothing at all when off."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

from asyncz.observability import PowertoolsMetricsSink, metrics


@pytest.fixture(autouse=True)
def empty_metric_set() -> Iterator[None]:
    metrics.clear_metrics()
    yield
    metrics.clear_metrics()


def _emf_lines(out: str) -> list[dict[str, object]]:
    return [json.loads(line) for line in out.splitlines() if line.startswith('{"_aws"')]


def test_enabled_sink_publishes_emf_at_the_flush(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("POWERTOOLS_METRICS_DISABLED", "false")
    monkeypatch.delenv("POWERTOOLS_DEV", raising=False)
    sink = PowertoolsMetricsSink()
    sink.add_metric("JobsSubmitted", "Count", 1)
    sink.add_metric("JobsSubmitted", "Count", 1)
    metrics.flush_metrics()
    (emf,) = _emf_lines(capsys.readouterr().out)
    assert emf["JobsSubmitted"] == [1.0, 1.0]
    assert emf["_aws"]["CloudWatchMetrics"][0]["Metrics"] == [  # type: ignore[index]
        {"Name": "JobsSubmitted", "Unit": "Count"}
    ]


@pytest.mark.parametrize("env", [{"POWERTOOLS_METRICS_DISABLED": "true"}, {"POWERTOOLS_DEV": "1"}])
def test_disabled_sink_records_and_prints_nothing(
    env: dict[str, str],
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.delenv("POWERTOOLS_METRICS_DISABLED", raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    sink = PowertoolsMetricsSink()
    for _ in range(250):  # Powertools alone prints a set that reaches 100 values
        sink.add_metric("JobsSubmitted", "Count", 1)
    assert _emf_lines(capsys.readouterr().out) == []
    assert metrics.provider.metric_set == {}
