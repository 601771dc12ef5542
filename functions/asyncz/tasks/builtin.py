"""Built-in tasks: test and demo tasks, and the seed's two examples doing real work.
Registered by :func:`register` from the composition root (no import side effect)."""

from __future__ import annotations

import contextlib
import hashlib
import os
import time
from pathlib import Path
from typing import Any

from asyncz.tasks.documents import render_email, render_pdf
from asyncz.tasks.registry import TaskContext, TaskRegistry


class TaskFailedError(RuntimeError):
    """Raised by the ``fail`` and ``flaky`` tasks on purpose."""


def echo(payload: dict[str, Any]) -> dict[str, Any]:
    """Returns its payload."""
    return payload


def sleep(payload: dict[str, Any], ctx: TaskContext) -> dict[str, Any]:
    """Sleeps ``payload.seconds`` (stops early when cancelled or timed out)."""
    seconds = float(payload.get("seconds", 1))
    started = time.monotonic()
    interrupted = ctx.cancelled.wait(max(seconds, 0.0))
    return {"slept": round(time.monotonic() - started, 3), "interrupted": interrupted}


def fail(payload: dict[str, Any]) -> None:
    """Always raises with ``payload.message``."""
    raise TaskFailedError(str(payload.get("message", "task failed on purpose")))


def flaky(payload: dict[str, Any], ctx: TaskContext) -> dict[str, Any]:
    """Fails the first ``payload.failures`` attempts, then succeeds."""
    failures = int(payload.get("failures", 1))
    if ctx.attempt <= failures:
        raise TaskFailedError(f"flaky failure {ctx.attempt} of {failures}")
    return {"succeeded_on_attempt": ctx.attempt}


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


def email_send(payload: dict[str, Any], ctx: TaskContext) -> dict[str, Any]:
    """Renders the email for ``payload`` and delivers it to the outbox folder."""
    user = payload.get("user_id")
    to = str(payload.get("to") or f"user-{user}@example.invalid")
    subject = str(payload.get("subject") or "Your AsyncZ notification")
    body = str(payload.get("body") or f"Hello user {user},\n\nThis message was sent by AsyncZ.\n")
    message = render_email(to=to, subject=subject, body=body, message_id=ctx.job_id)
    path = _write(os.path.join(ctx.artifact_dir, "outbox"), f"{ctx.job_id}.eml", message)
    return {"to": to, "subject": subject, "message_path": str(path), "bytes": len(message)}


def pdf_generate(payload: dict[str, Any], ctx: TaskContext) -> dict[str, Any]:
    """Generates a PDF report from ``payload`` (title + lines or every field)."""
    title = str(payload.get("title") or f"Report {payload.get('report_id', ctx.job_id)}")
    raw_lines = payload.get("lines")
    if isinstance(raw_lines, list):
        lines = [str(x) for x in raw_lines]
    else:
        lines = [f"{k}: {v}" for k, v in sorted(payload.items()) if k != "task"]
    document, pages = render_pdf(title, lines)
    path = _write(os.path.join(ctx.artifact_dir, "documents"), f"{ctx.job_id}.pdf", document)
    return {
        "document_path": str(path),
        "pages": pages,
        "bytes": len(document),
        "sha256": hashlib.sha256(document).hexdigest(),
    }


def register(registry: TaskRegistry) -> None:
    """Register the built-in tasks (idempotent)."""
    registry.register("echo", echo, timeout_seconds=30)
    registry.register("sleep", sleep)
    registry.register("fail", fail)
    registry.register("flaky", flaky)
    registry.register("email_send", email_send, timeout_seconds=60)
    registry.register("pdf_generate", pdf_generate, timeout_seconds=120)
