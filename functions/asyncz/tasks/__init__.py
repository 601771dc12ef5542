"""Tasks: the registry and the built-in tasks."""

from asyncz.durable.spawning import Spawned
from asyncz.errors import GatherTimeoutError, SpawnedJobFailedError
from asyncz.tasks.loader import load_task_modules
from asyncz.tasks.registry import (
    REGISTRY,
    ParentResult,
    TaskContext,
    TaskRegistry,
    TaskSpec,
    task,
)

__all__ = [
    "REGISTRY",
    "GatherTimeoutError",
    "ParentResult",
    "Spawned",
    "SpawnedJobFailedError",
    "TaskContext",
    "TaskRegistry",
    "TaskSpec",
    "load_task_modules",
    "task",
]
