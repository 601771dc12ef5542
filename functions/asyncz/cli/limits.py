"""The ``asyncz pause`` and ``asyncz resume`` commands: a paused queue accepts jobs and
starts none until it is resumed."""

from __future__ import annotations

import argparse

from asyncz.cli.client import make_client
from asyncz.cli.output import emit


def cmd_pause(args: argparse.Namespace) -> int:
    return _set(args, "pause")


def cmd_resume(args: argparse.Namespace) -> int:
    return _set(args, "resume")


def _set(args: argparse.Namespace, action: str) -> int:
    with make_client(args) as client:
        call = client.ops.pause_queue if action == "pause" else client.ops.resume_queue
        state = call(args.queue)
    word = "paused" if state["paused"] else "running"
    emit(args, state, f"queue {state['queue']}  {word}")
    return 0
