"""Built-in tasks: test and demo tasks, and the seed's two examples doing real work.
Registered by :func:`register` from the composition root (no import side effect). Their
payload models ignore fields they do not know, so every payload sent before they were typed
is still accepted."""

from __future__ import annotations

import contextlib
import hashlib
import os
import time
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from asyncz.tasks.documents import render_email, render_pdf
from asyncz.tasks.registry import TaskContext, TaskRegistry


class TaskFailedError(RuntimeError):
    """Raised by the ``fail`` and ``flaky`` tasks on purpose."""


class _Lenient(BaseModel):
    model_config = ConfigDict(extra="ignore")


class SleepIn(_Lenient):
    seconds: float = Field(default=1.0, description="how long; a negative value is 0")


class SleepOut(BaseModel):
    slept: float
    interrupted: bool = Field(description="stopped early: cancelled or timed out")


class FailIn(_Lenient):
    message: str = "task failed on purpose"


class FlakyIn(_Lenient):
    failures: int = Field(default=1, description="how many attempts fail first")


class FlakyOut(BaseModel):
    succeeded_on_attempt: int


class FlakyStepsIn(_Lenient):
    steps: int = Field(default=3, ge=1, le=100, description="how many steps (step:0, step:1...)")
    fail_at: int = Field(default=-1, description="the step that fails (-1: none)")
    failures: int = Field(default=1, description="how many attempts it fails first")
    sleep: float = Field(
        default=0, ge=0, le=86_400, description="seconds it sleeps (suspended) after step:0"
    )


class EmailIn(_Lenient):
    user_id: int | str | None = None
    to: str | None = Field(default=None, description="user-<user_id>@example.invalid if unset")
    subject: str | None = None
    body: str | None = None


class EmailOut(BaseModel):
    to: str
    subject: str
    message_path: str
    bytes: int


class PdfIn(BaseModel):
    model_config = ConfigDict(extra="allow")  # without `lines`, every field is a line

    title: str | None = None
    report_id: int | str | None = None
    lines: list[Any] | None = None


class PdfOut(BaseModel):
    document_path: str
    pages: int
    bytes: int
    sha256: str


def echo(payload: dict[str, Any]) -> dict[str, Any]:
    """Returns its payload."""
    return payload


def sleep(payload: SleepIn, ctx: TaskContext) -> SleepOut:
    """Sleeps ``payload.seconds`` (stops early when cancelled or timed out)."""
    started = time.monotonic()
    interrupted = ctx.cancelled.wait(max(payload.seconds, 0.0))
    return SleepOut(slept=round(time.monotonic() - started, 3), interrupted=interrupted)


def fail(payload: FailIn) -> None:
    """Always raises with ``payload.message``."""
    raise TaskFailedError(payload.message)


def flaky(payload: FlakyIn, ctx: TaskContext) -> FlakyOut:
    """Fails the first ``payload.failures`` attempts, then succeeds."""
    if ctx.attempt <= payload.failures:
        raise TaskFailedError(f"flaky failure {ctx.attempt} of {payload.failures}")
    return FlakyOut(succeeded_on_attempt=ctx.attempt)


def flaky_steps(payload: FlakyStepsIn, ctx: TaskContext) -> list[int]:
    """A durable task (docs/durable.md) of ``payload.steps`` steps; step ``fail_at`` fails
    the first ``failures`` attempts, and the steps before it run once all the same; with
    ``sleep``, it sleeps that long after step:0."""

    def step(i: int) -> int:
        if i == payload.fail_at and ctx.attempt <= payload.failures:
            raise TaskFailedError(f"step:{i} failed on attempt {ctx.attempt}")
        return i

    done = [ctx.step("step:0", step, 0)]
    if payload.sleep:  # held by nothing meanwhile: the job shows suspended until it wakes
        ctx.sleep("nap", seconds=payload.sleep)
    return done + [ctx.step(f"step:{i}", step, i) for i in range(1, payload.steps)]


# A warm Lambda sandbox keeps /tmp (512 MB by default) for hours: the demo tasks keep only
# their newest files, so thousands of jobs cannot fill it.
MAX_ARTIFACTS_PER_FOLDER = 100


def _write(folder: str, name: str, data: bytes, keep: int = MAX_ARTIFACTS_PER_FOLDER) -> Path:
    path = Path(folder)
    path.mkdir(parents=True, exist_ok=True)
    target = path / name
    tmp = target.with_suffix(target.suffix + ".tmp")
    tmp.write_bytes(data)
    os.replace(tmp, target)  # a retried attempt overwrites, never leaves half a file
    _prune(path, keep)
    return target


def _prune(folder: Path, keep: int) -> None:
    """Delete all but the ``keep`` newest files of ``folder`` (another worker may race us)."""
    entries = []
    for entry in os.scandir(folder):
        with contextlib.suppress(FileNotFoundError):
            if entry.is_file():
                entries.append((entry.stat().st_mtime_ns, entry.path))
    for _, old in sorted(entries, reverse=True)[keep:]:
        with contextlib.suppress(FileNotFoundError):
            os.remove(old)


def email_send(payload: EmailIn, ctx: TaskContext) -> EmailOut:
    """Renders the email for ``payload`` and delivers it to the outbox folder."""
    user = payload.user_id
    to = payload.to or f"user-{user}@example.invalid"
    subject = payload.subject or "Your AsyncZ notification"
    body = payload.body or f"Hello user {user},\n\nThis message was sent by AsyncZ.\n"
    message = render_email(to=to, subject=subject, body=body, message_id=ctx.job_id)
    path = _write(os.path.join(ctx.artifact_dir, "outbox"), f"{ctx.job_id}.eml", message)
    return EmailOut(to=to, subject=subject, message_path=str(path), bytes=len(message))


def pdf_generate(payload: PdfIn, ctx: TaskContext) -> PdfOut:
    """Generates a PDF report from ``payload`` (title + lines or every field)."""
    report_id = payload.report_id if payload.report_id is not None else ctx.job_id
    title = payload.title or f"Report {report_id}"
    if payload.lines is not None:
        lines = [str(x) for x in payload.lines]
    else:
        fields = payload.model_dump(exclude_unset=True)
        lines = [f"{k}: {v}" for k, v in sorted(fields.items()) if k != "task"]
    document, pages = render_pdf(title, lines)
    path = _write(os.path.join(ctx.artifact_dir, "documents"), f"{ctx.job_id}.pdf", document)
    return PdfOut(
        document_path=str(path),
        pages=pages,
        bytes=len(document),
        sha256=hashlib.sha256(document).hexdigest(),
    )


def register(registry: TaskRegistry) -> None:
    """Register the built-in tasks (idempotent)."""
    registry.register("echo", echo, timeout_seconds=30)
    registry.register("sleep", sleep)
    registry.register("fail", fail)
    registry.register("flaky", flaky)
    registry.register("flaky_steps", flaky_steps, durable=True)
    registry.register("email_send", email_send, timeout_seconds=60)
    registry.register("pdf_generate", pdf_generate, timeout_seconds=120)
