"""What a running task may know of its attempt and do through it (:class:`TaskContext`): its
job, its parents' results, its progress, and a durable task's steps, sleeps, waits and
spawned jobs (docs/durable.md)."""

from __future__ import annotations

import math
import threading
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from asyncz.durable.callbacks import callback_call, opener
from asyncz.durable.events import event_wait
from asyncz.durable.journal import Journal
from asyncz.durable.running import StepCall
from asyncz.durable.sleeping import decode_wake, wake_time
from asyncz.durable.spawning import Spawner, gather_call, spawn_call
from asyncz.errors import StepUsageError

PROGRESS_MESSAGE_MAX = 1000


@dataclass(frozen=True, slots=True)
class ParentResult:
    """One parent of the running job, as it ended: ``completed`` with its ``result``, or
    (under ``on_parent_failure="run"``) ``dead``/``cancelled`` with its ``error``."""

    job_id: str
    status: str
    result: Any
    error: str | None
    ref: str | None  # its ref, when both were submitted in one batch

    @staticmethod
    def by_key(rows: Iterable[Mapping[str, Any]]) -> dict[str, ParentResult]:
        """Each parent keyed by its job id, and by its ref too when it has one."""
        out: dict[str, ParentResult] = {}
        for r in rows:
            parent = ParentResult(r["job_id"], r["status"], r["result"], r["last_error"], r["ref"])
            out[parent.job_id] = parent
            if parent.ref is not None:
                out[parent.ref] = parent
        return out


@dataclass(slots=True)
class TaskContext:
    """What a running task may know about its attempt; ``cancelled`` is set when the job is
    cancelled, its lease is lost or its timeout passes, so cooperative tasks can stop early.
    ``parents``: the jobs it depended on, by job id (and by ref), each with its status and
    result."""

    job_id: str
    attempt: int
    queue: str
    worker_id: str
    artifact_dir: str
    cancelled: threading.Event = field(default_factory=threading.Event)
    parents: dict[str, ParentResult] = field(default_factory=dict)
    journal: Journal | None = None  # a durable task's steps (docs/durable.md)
    public_url: str | None = None  # the deployment's, for callbacks' URLs
    spawner: Spawner | None = None  # what submits the jobs a durable task spawns
    _progress: tuple[float, str | None] | None = None
    _progress_lock: threading.Lock = field(default_factory=threading.Lock)

    def progress(self, fraction: float, message: str | None = None) -> None:
        """Report how far the task has come (0 to 1) and what it is doing. Cheap to call
        often: the worker writes the latest report at most about once a second, and it is
        shown in ``GET /jobs/{id}`` while the job runs and after."""
        value = float(fraction)
        if not math.isfinite(value) or not 0.0 <= value <= 1.0:
            raise ValueError(f"progress is a fraction from 0 to 1, not {fraction!r}")
        text = None if message is None else str(message).replace("\x00", "")
        with self._progress_lock:
            self._progress = (value, text[:PROGRESS_MESSAGE_MAX] if text is not None else None)

    def step(self, name: str, fn: Callable[..., Any], /, *args: Any, retries: int = 0,
             backoff: float = 1.0, **kwargs: Any) -> Any:  # fmt: skip
        """Run ``fn(*args, **kwargs)`` once per job as step ``name`` (a durable task's): its
        result is stored before the task goes on, and a later attempt gets it back without
        calling ``fn``. ``retries``: more runs when it raises, ``backoff`` seconds apart
        (doubling, jittered, each wait at most 10 s) before the attempt fails. In an
        ``async`` task, ``await`` it. docs/durable.md."""
        call = StepCall(name, "step", fn, args, kwargs, retries, backoff)
        return self._steps().call(call)

    def now(self, name: str | None = None) -> Any:
        """The time (UTC) as a recorded step: a replay gets the same value (``await`` it in
        an async task). Unnamed: ``now:1``, ``now:2``… in the order asked."""
        journal = self._steps()
        name = name or journal.auto_name("now")
        now = journal.clock.now
        return journal.call(StepCall(name, "now", lambda: now().isoformat(),
                                     decode=datetime.fromisoformat, inline=True))  # fmt: skip

    def sleep(self, name: str, *, seconds: float | None = None,
              until: datetime | None = None) -> Any:  # fmt: skip
        """Sleep without holding anything (``await`` it in an async task): the job is
        suspended until ``seconds`` from now or ``until`` (1 s to 1 year), then replayed;
        the sleep, recorded as step ``name``, returns once its time has come."""
        journal = self._steps()
        now = journal.clock.now()
        return journal.sleep(StepCall(name, "sleep", lambda: wake_time(name, now, seconds, until),
                                      decode=decode_wake, inline=True))  # fmt: skip

    def wait_for_event(self, name: str, *, key: str, timeout: float,
                       senders: Sequence[str] | None = None,
                       step: str | None = None) -> Any:  # fmt: skip
        """Wait, holding nothing, for the event ``name`` sent with ``key`` (``POST /events``)
        and return its payload, or ``None`` once ``timeout`` seconds pass first (``await`` it
        in an async task). An event sent since the job's submit counts, one event per wait;
        ``senders``: the API key names it accepts. Recorded as step ``step`` (unnamed:
        ``event:<name>:1``, ``:2``… in the order asked). docs/durable.md, "Events"."""
        journal = self._steps()
        call = event_wait(name, key, timeout, senders, step or journal.auto_name(f"event:{name}"))
        return journal.wait(call)

    def callback(self, name: str, *, timeout: float) -> Any:
        """A single-use token (and URL) the world answers through ``POST /callbacks/{token}``,
        usable at once; ``.wait()`` suspends until the answer (``await`` both in an async
        task). docs/durable.md, "Callbacks"."""
        return self._steps().wait(callback_call(name, timeout), then=opener(self.public_url))

    def uuid(self, name: str | None = None) -> Any:
        """A random UUID as a recorded step (``await`` it in an async task); unnamed:
        ``uuid:1``, ``uuid:2``…"""
        journal = self._steps()
        name = name or journal.auto_name("uuid")
        return journal.call(
            StepCall(name, "uuid", lambda: str(uuid.uuid4()), decode=uuid.UUID, inline=True)
        )

    def spawn(self, task: str, payload: dict[str, Any], /, *, name: str | None = None,
              **options: Any) -> Any:  # fmt: skip
        """Submit a job of ``task`` once per job (a durable task's step of kind ``spawn``):
        a :class:`~asyncz.durable.spawning.Spawned` naming it (``await`` it in an async
        task). ``options``: as a submit's (queue, priority, unique_key, ...); unnamed, the
        step is ``spawn:1``, ``spawn:2``... docs/durable.md, "Spawned jobs"."""
        journal = self._steps()
        return journal.call(spawn_call(journal, self.spawner, task, payload, name, options))

    def gather(self, spawned: Iterable[Any], /, *, timeout: float,
               return_exceptions: bool = False, name: str | None = None) -> Any:  # fmt: skip
        """Wait, holding nothing, until every one of these spawned jobs has ended (at most
        ``timeout`` seconds: then ``GatherTimeoutError``), and return their results in order
        (``await`` it in an async task). One that ended dead or cancelled raises
        ``SpawnedJobFailedError``, or stands in its place with ``return_exceptions``."""
        journal = self._steps()
        limit = self.spawner.max_gather_bytes if self.spawner is not None else 1 << 22
        return journal.wait(gather_call(spawned, timeout=timeout, max_bytes=limit,
                                        return_exceptions=return_exceptions,
                                        name=name or journal.auto_name("gather")))  # fmt: skip

    def _steps(self) -> Journal:
        if self.journal is None:
            raise StepUsageError("steps are for durable tasks: @task(name, durable=True)")
        return self.journal

    def each_parent(self) -> list[ParentResult]:
        """The parents, each once (``parents`` holds each under its job id and its ref)."""
        return list({p.job_id: p for p in self.parents.values()}.values())

    def take_progress(self) -> tuple[float, str | None] | None:
        """The report not written yet (and forget it), or ``None``."""
        with self._progress_lock:
            report, self._progress = self._progress, None
        return report
