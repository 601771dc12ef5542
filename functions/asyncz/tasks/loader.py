"""Build the task registry: the built-in tasks, then the user's modules (composition root)."""

from __future__ import annotations

import importlib
from collections.abc import Iterable

from asyncz.tasks import builtin
from asyncz.tasks.registry import REGISTRY, TaskRegistry


def load_task_modules(modules: Iterable[str], registry: TaskRegistry = REGISTRY) -> TaskRegistry:
    """Register the built-in tasks and import every user module named in settings (their
    ``@task`` decorators register into :data:`REGISTRY`)."""
    builtin.register(registry)
    for module in modules:
        importlib.import_module(module)
    return registry
