"""Task limits as declared and overridden: what a rate means, what is refused at once."""

from __future__ import annotations

import pytest

from asyncz.service.limits import effective_limits
from asyncz.settings import Settings
from asyncz.tasks.limits import LimitSpecError, Rate, TaskLimits, parse_overrides
from asyncz.tasks.registry import TaskRegistry, task


@pytest.mark.parametrize(
    ("text", "count", "seconds"),
    [("60/m", 60, 60), ("10/s", 10, 1), (" 1000 / h ", 1000, 3600), ("5/10s", 5, 10),
     ("1/d", 1, 86400)],
)  # fmt: skip
def test_a_rate_is_a_count_per_period(text: str, count: int, seconds: int) -> None:
    assert Rate.parse(text) == Rate(count, seconds)


@pytest.mark.parametrize("text", ["abc", "60", "60/x", "0/s", "-1/s", "10/0s", "", "1.5/s"])
def test_a_rate_that_means_nothing_is_refused(text: str) -> None:
    with pytest.raises(LimitSpecError):
        Rate.parse(text)


def test_the_decorator_keeps_the_limits_and_refuses_bad_ones() -> None:
    reg = TaskRegistry()

    @task("call_llm", concurrency=5, key_concurrency=2, rate="60/m", registry=reg)
    def call_llm(payload: dict[str, object]) -> None: ...

    assert reg.get("call_llm").limits == TaskLimits(5, 2, Rate(60, 60), None)
    assert reg.limited() == {"call_llm": reg.get("call_llm").limits}
    assert reg.get("call_llm").limits.describe() == {
        "concurrency": 5, "key_concurrency": 2, "rate": "60/60s"}  # fmt: skip
    for bad in ({"concurrency": 0}, {"key_concurrency": True}, {"rate": "abc"}):
        with pytest.raises(LimitSpecError):
            task("bad", registry=reg, **bad)  # type: ignore[arg-type]
    assert "bad" not in reg


def test_a_deployment_overrides_limits_and_a_bad_override_fails_at_start() -> None:
    reg = TaskRegistry()
    task("call_llm", concurrency=5, rate="60/m", registry=reg)(lambda p: None)
    task("plain", registry=reg)(lambda p: None)
    s = Settings(task_limits='{"call_llm": {"concurrency": 3, "rate": null}, '
                 '"plain": {"key_concurrency": 1}, "elsewhere": {"concurrency": 1}}')  # fmt: skip
    assert effective_limits(reg, s) == {
        "call_llm": TaskLimits(3, None, None, None),
        "plain": TaskLimits(None, 1, None, None),
    }
    for bad in ("[1]", "{", '{"t": {"speed": 1}}', '{"t": {"rate": "fast"}}'):
        with pytest.raises(LimitSpecError):
            parse_overrides(bad)
        with pytest.raises(ValueError, match=r"ASYNCZ_TASK_LIMITS|rate|limit"):
            Settings(task_limits=bad)
