"""Planning a submit with dependencies: refs of a batch resolved to ids, and each job's
status planned from its parents' (pure functions; the store locks the parents and calls
:func:`plan_jobs` in the same transaction). A part of :mod:`asyncz.service.dependencies`."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import replace

from asyncz.errors import DependencyLimitError, InvalidInputError, UnknownDependencyError
from asyncz.jobs import (
    LIVE,
    MAX_DEPTH,
    MAX_PARENTS,
    PARENT_FAILED,
    Dependency,
    JobStatus,
    NewJob,
    ParentRule,
)
from asyncz.port_types import Edge, PlannedJob, Row

_ENDED = (JobStatus.DEAD.value, JobStatus.CANCELLED.value)


def resolve_refs(items: Sequence[tuple[str, NewJob]]) -> list[tuple[str, NewJob]]:
    """Each item's ``depends_on`` as job ids: a ref names an earlier item of the batch (its
    new id), anything else must be a job id. Duplicates of one parent are merged; more
    parents than :data:`MAX_PARENTS`, and an idempotency key given twice, are refused."""
    earlier: dict[str, str] = {}
    later = {new.ref for _, new in items if new.ref is not None}
    keys: dict[str, int] = {}
    out = []
    for index, (job_id, new) in enumerate(items):
        if (key := new.idempotency_key) is not None:
            if key in keys:  # a graph is stored whole: one key cannot name two of its jobs
                raise _about(
                    InvalidInputError(
                        f"idempotency_key {key!r} is given twice in the batch: jobs[{keys[key]}] "
                        f"and jobs[{index}]"
                    ),
                    index, len(items),
                )  # fmt: skip
            keys[key] = index
        deps: dict[str, Dependency] = {}
        for dep in new.depends_on:
            ref = dep.job_id if dep.job_id in earlier else None
            if ref is not None:
                parent = earlier[ref]
            elif dep.job_id in later:
                raise _about(
                    UnknownDependencyError(
                        f"depends_on names ref {dep.job_id!r} of this or a later item: a ref "
                        "names an earlier item of the batch"
                    ),
                    index, len(items),
                )  # fmt: skip
            elif _is_uuid(dep.job_id):
                parent = str(uuid.UUID(dep.job_id))
            else:
                raise _about(
                    UnknownDependencyError(
                        f"unknown dependency {dep.job_id!r}: not a job id, nor the ref of an "
                        "earlier item of the batch",
                        job_id=dep.job_id,
                    ),
                    index, len(items),
                )  # fmt: skip
            deps.setdefault(parent, Dependency(parent, dep.on_parent_failure, ref))
        if len(deps) > MAX_PARENTS:
            raise _about(
                DependencyLimitError(
                    f"a job depends on at most {MAX_PARENTS} jobs, not {len(deps)}"
                ),
                index, len(items),
            )  # fmt: skip
        if new.ref is not None:
            if new.ref in earlier:
                raise _about(
                    InvalidInputError(f"ref {new.ref!r} is given twice in the batch"),
                    index, len(items),
                )  # fmt: skip
            earlier[new.ref] = job_id
        out.append((job_id, replace(new, depends_on=tuple(deps.values()))))
    return out


def plan_jobs(items: Sequence[tuple[str, NewJob]], found: dict[str, Row]) -> list[PlannedJob]:
    """Each job's status from its parents (``found``: the existing ones, as locked; the
    others are earlier items): waiting on the live ones, queued when none is, or ended at
    once (dead, or cancelled) by the first parent that failed under ``fail``. Pure."""
    inside = {job_id for job_id, _ in items}
    named = {dep.job_id for _, new in items for dep in new.depends_on}
    for index, (_, new) in enumerate(items):
        for dep in new.depends_on:
            if dep.job_id not in inside and dep.job_id not in found:
                raise _about(
                    UnknownDependencyError(
                        f"unknown dependency {dep.job_id}: no such job (or it was purged)",
                        job_id=dep.job_id,
                    ),
                    index, len(items),
                )  # fmt: skip
    known: dict[str, tuple[str, int]] = {i: (r["status"], r["depth"]) for i, r in found.items()}
    planned = []
    for index, (job_id, new) in enumerate(items):
        parents = [(dep, *known[dep.job_id]) for dep in new.depends_on]
        depth = 1 + max((d for _, _, d in parents), default=-1)
        if depth > MAX_DEPTH:
            raise _about(
                DependencyLimitError(f"the graph is deeper than {MAX_DEPTH} levels here"),
                index, len(items),
            )  # fmt: skip
        failed = next(
            ((dep, s) for dep, s, _ in parents
             if dep.on_parent_failure is ParentRule.FAIL and s in _ENDED),
            None,
        )  # fmt: skip
        open_parents = sum(1 for _, s, _ in parents if s in LIVE)
        if failed is not None:
            status = JobStatus(failed[1])
        else:
            status = JobStatus.WAITING if open_parents else JobStatus.QUEUED
        edges = tuple(
            Edge(
                dep.job_id,
                dep.on_parent_failure.value,
                dep.ref,
                settled=s not in LIVE,
                parent_ended=None if s in LIVE else s,
            )
            for dep, s, _ in parents
        )
        planned.append(
            PlannedJob(
                job_id=job_id,
                new=new,
                status=status,
                open_parents=open_parents if status is JobStatus.WAITING else 0,
                depth=depth,
                has_dependents=job_id in named,
                last_error=f"{PARENT_FAILED}{failed[0].job_id}" if failed else None,
                edges=edges,
            )
        )
        known[job_id] = (status.value, depth)
    return planned


def _about(exc: Exception, index: int, size: int) -> Exception:
    """In a batch, the error names the item (``index``) it is about."""
    if size > 1 and hasattr(exc, "index"):
        exc.args = (f"jobs[{index}]: {exc}",)
        exc.index = index
    return exc


def _is_uuid(value: str) -> bool:
    try:
        uuid.UUID(value)
    except ValueError:
        return False
    return True
