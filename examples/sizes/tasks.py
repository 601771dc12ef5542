"""This project's tasks: imported by every function (ASYNCZ_TASK_MODULES=tasks)."""

import humanize

from asyncz.tasks import task


@task("human_size", timeout_seconds=30, max_retries=2)
def human_size(payload):
    """{"bytes": 3000000} -> {"text": "3.0 MB"}"""
    return {"text": humanize.naturalsize(int(payload["bytes"]))}
