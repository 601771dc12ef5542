"""Tasks: the registry and the built-in tasks."""

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
    "ParentResult",
    "TaskContext",
    "TaskRegistry",
    "TaskSpec",
    "load_task_modules",
    "task",
]
