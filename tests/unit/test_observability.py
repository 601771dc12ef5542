"""The metrics sink the handlers use (EMF when metrics are on, nothing at all when off), and
the tracer (built only when tracing is on)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
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


def _observability_in_a_fresh_process(env: dict[str, str]) -> list[str]:
    probe = (
        "import sys, asyncz.observability as o;"
        "print(type(o.tracer).__name__, 'aws_xray_sdk' in sys.modules)"
    )
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("POWERTOOLS_", "LAMBDA_"))}
    out = subprocess.run(
        [sys.executable, "-c", probe],
        env={**clean, **env},
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    return out.stdout.split()


@pytest.mark.parametrize(
    "env",
    [
        {"POWERTOOLS_TRACE_DISABLED": "true", "LAMBDA_TASK_ROOT": "/var/task"},
        {},  # outside Lambda: Powertools disables tracing itself
    ],
    ids=["disabled", "outside-lambda"],
)
def test_no_tracer_and_no_xray_sdk_when_tracing_is_off(env: dict[str, str]) -> None:
    assert _observability_in_a_fresh_process(env) == ["NoneType", "False"]


def test_tracer_in_lambda_with_tracing_on() -> None:
    env = {"POWERTOOLS_TRACE_DISABLED": "false", "LAMBDA_TASK_ROOT": "/var/task"}
    assert _observability_in_a_fresh_process(env) == ["Tracer", "True"]
