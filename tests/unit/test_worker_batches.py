"""The worker's per-batch machinery: reusable task threads, one completion
statement per claim batch, and slots that free when a task returns."""

from __future__ import annotations

import asyncio
import contextvars
import threading
from typing import Any

import pytest

from asyncz.jobs import Lease, NewJob
from asyncz.tasks.registry import TaskContext
from asyncz.worker.batching import CompletionBatcher
from asyncz.worker.execution import TaskThreads, UnstorableResultError, check_storable
from asyncz.worker.loop import WorkerLoop
from tests.support.memory import service

pytestmark = pytest.mark.unit

VAR: contextvars.ContextVar[str] = contextvars.ContextVar("VAR", default="fresh")


# --- results -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "value",
    [{"text": "a\x00b"}, {"k\x00": 1}, [[{"deep": ["x", "\x00"]}]], {"x": float("nan")}, {1, 2}],
)
def test_a_result_postgres_cannot_store_is_refused(value: Any) -> None:
    with pytest.raises(UnstorableResultError, match="not storable as JSON"):
        check_storable(value, 1_000_000)


def test_storable_results_pass_including_the_text_of_an_escaped_nul() -> None:
    for value in (None, 1, "é", {"a": [1, 2.5, True]}, {"literal": "\\u0000 is fine"}, {1: "k"}):
        check_storable(value, 1_000_000)
    check_storable("é" * 10, len('"' + "\\u00e9" * 10 + '"'))  # the size of its JSON text
    with pytest.raises(UnstorableResultError, match="the limit is 60"):
        check_storable("é" * 10, 60)


# --- task threads -----------------------------------------------------------------------------


def test_sync_tasks_reuse_a_few_threads_each_in_a_fresh_context() -> None:
    threads = TaskThreads(max_idle=4)
    seen: set[int] = set()

    def task() -> str:
        seen.add(threading.get_ident())
        before = VAR.get()
        VAR.set("set by a task")  # must not leak into the next task on this thread
        return before

    async def go() -> list[str]:
        out = []
        for _ in range(50):
            out.extend(await asyncio.gather(*(threads.run(task, "t") for _ in range(3))))
        return out

    out = asyncio.run(go())
    assert out == ["fresh"] * 150
    assert 1 <= len(seen) <= 4, len(seen)  # 150 tasks, not 150 threads
    assert threads.hung() == 0


def test_a_task_error_comes_back_without_its_traceback() -> None:
    threads = TaskThreads()

    def boom() -> None:
        raise KeyError("nope")

    async def go() -> BaseException:
        try:
            await threads.run(boom, "t")
        except KeyError as exc:
            return exc
        raise AssertionError("no error")

    exc = asyncio.run(go())
    frames, tb = [], exc.__traceback__
    while tb is not None:
        frames.append(tb.tb_frame.f_code.co_name)
        tb = tb.tb_next
    assert exc.args == ("nope",)
    assert "boom" not in frames, frames  # the task's frames (and their memory) were dropped


def test_an_abandoned_task_counts_as_hung_until_it_returns_says_so_and_others_still_run() -> None:
    threads = TaskThreads(max_idle=1)
    release = threading.Event()

    async def go() -> tuple[int, bool, str, int]:
        returned = asyncio.Event()  # set on the loop when the abandoned call returns
        stuck = asyncio.create_task(threads.run(release.wait, "stuck", returned.set))
        await asyncio.sleep(0.05)
        stuck.cancel()  # the worker's timeout: the thread cannot be killed
        with pytest.raises(asyncio.CancelledError):
            await stuck
        hung, told_early = threads.hung(), returned.is_set()
        other = await threads.run(lambda: "served by another thread", "other")
        release.set()
        async with asyncio.timeout(5):
            await returned.wait()
        return hung, told_early, other, threads.hung()

    assert asyncio.run(go()) == (1, False, "served by another thread", 0)


# --- one completion statement per claim batch ---------------------------------------------------


class _Recorder:
    """A service whose complete_many records each statement's size."""

    def __init__(self) -> None:
        self.sizes: list[int] = []

    async def complete_many(self, done: list[tuple[Lease, Any]]) -> set[str]:
        self.sizes.append(len(done))
        return {lease.job_id for lease, _ in done}


def _lease(n: int) -> Lease:
    return Lease(
        job_id=f"j{n}",
        token="t",
        task="echo",
        payload={},
        queue="default",
        priority=0,
        attempt=1,
        attempt_base=0,
        max_retries=3,
        timeout_seconds=60,
    )


def test_completions_wait_for_their_claim_mates_and_share_one_statement() -> None:
    rec = _Recorder()
    batcher = CompletionBatcher(rec, max_wait=60.0)  # type: ignore[arg-type]

    async def go() -> list[bool]:
        early = [
            asyncio.create_task(batcher.complete(_lease(n), n, mates_running=True))
            for n in range(4)
        ]
        for _ in range(5):  # loop turns pass: nothing is written while mates still run
            await asyncio.sleep(0)
        assert rec.sizes == []
        last = await batcher.complete(_lease(9), 9, mates_running=False)
        return [last, *await asyncio.gather(*early)]

    assert asyncio.run(go()) == [True] * 5
    assert rec.sizes == [5]


def test_a_completion_does_not_wait_forever_for_a_mate_that_never_finishes() -> None:
    rec = _Recorder()
    batcher = CompletionBatcher(rec, max_wait=0.01)  # type: ignore[arg-type]
    assert asyncio.run(batcher.complete(_lease(1), 1, mates_running=True)) is True
    assert rec.sizes == [1]


def test_a_worker_completes_a_claimed_batch_of_short_jobs_in_one_statement() -> None:
    svc = service(worker_poll_seconds=0.2)  # a stop is seen within one poll
    sizes: list[int] = []
    complete_many = svc.store.complete_many

    async def recording(done: Any) -> set[str]:
        sizes.append(len(done))
        return await complete_many(done)

    svc.store.complete_many = recording  # type: ignore[method-assign]
    started = threading.Barrier(10, timeout=10)

    def short(payload: dict[str, Any], ctx: TaskContext) -> int:
        started.wait()  # all ten run at once: one claim batch of ten
        return 1

    svc.registry.register("short", short)

    async def go() -> list[str]:
        ids = [(await svc.submit(NewJob(task="short", payload={}))).job_id for _ in range(10)]
        stop = asyncio.Event()
        worker = WorkerLoop(svc, remaining_seconds=lambda: 3600, stop=stop, concurrency=10)
        # the mates' wait is bounded (5 ms); a loaded test machine may need longer to let
        # ten threads return, and what is tested is the grouping, not the bound
        worker._completions.max_wait = 60.0
        working = asyncio.create_task(worker.run())
        while [(await svc.get(i)).status.value for i in ids] != ["completed"] * 10:
            await asyncio.sleep(0.01)
        stop.set()
        await working
        return [(await svc.get(i)).status.value for i in ids]

    assert asyncio.run(go()) == ["completed"] * 10
    assert sizes == [10], sizes


# --- the event loop ---------------------------------------------------------------------------


def test_sandboxes_workers_and_the_dev_front_run_on_uvloop_where_it_is_installed(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import sys

    import uvloop

    from asyncz.eventloop import new_event_loop

    loop = new_event_loop()
    try:
        assert isinstance(loop, uvloop.Loop)
        assert loop.run_until_complete(asyncio.sleep(0, "ran")) == "ran"
    finally:
        loop.close()
    monkeypatch.setitem(sys.modules, "uvloop", None)  # not installed (e.g. on Windows)
    fallback = new_event_loop()
    try:
        assert not isinstance(fallback, uvloop.Loop)
        assert isinstance(fallback, asyncio.AbstractEventLoop)
    finally:
        fallback.close()


def test_an_api_sandbox_runs_on_asyncios_loop_and_a_worker_sandbox_on_uvloop(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The first call of a sandbox picks its loop: asyncio's for the api (one request's few
    awaits: uvloop's per-run signal set-up costs more there), uvloop's for the others."""
    import uvloop

    from asyncz import eventloop

    kinds = []
    for plain in (True, False):
        monkeypatch.setattr(eventloop, "_loop", None)
        loop = eventloop.sandbox_loop(plain=plain)
        try:
            assert eventloop.sandbox_loop() is loop  # later calls (a handler's run) reuse it
            assert eventloop.run(asyncio.sleep(0, "ran")) == "ran"
            kinds.append(isinstance(loop, uvloop.Loop))
        finally:
            loop.close()
    assert kinds == [False, True]
