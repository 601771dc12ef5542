"""The unique-job options of a submit (``unique_key``, ``unique_scope``, ``unique_for``,
``debounce``): the body fields they add, and the Job a ``200`` answer names (the job that
holds the key; nothing new was stored)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from asyncz.client.models import Job


def unique_fields(
    unique_key: str | None, unique_scope: str | None, unique_for: int | None, debounce: bool
) -> dict[str, Any]:
    """The body fields of these options (none when no option is given)."""
    fields = {"unique_key": unique_key, "unique_scope": unique_scope, "unique_for": unique_for}
    out: dict[str, Any] = {k: v for k, v in fields.items() if v is not None}
    if debounce:
        out["debounce"] = True
    return out


def answered(job: Job, body: Mapping[str, Any], reply: Mapping[str, Any]) -> Job:
    """The submitted Job with its unique key, marked ``duplicate`` (and ``debounced``) when
    the answer named the job holding that key."""
    if body.get("unique_key") is None:
        return job
    return replace(
        job,
        unique_key=body.get("unique_key"),
        duplicate=bool(reply.get("duplicate")),
        debounced=bool(reply.get("debounced")),
    )
