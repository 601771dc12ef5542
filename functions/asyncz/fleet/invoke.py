"""Starting a worker Lambda: one async invoke (InvocationType=Event), and the scale-out a
function that sees a backlog (a worker, recovery) runs with it."""

from __future__ import annotations

import asyncio
import gc
import threading
from collections.abc import Awaitable, Callable
from typing import Any

from asyncz.fleet.scale_out import ScaleOut, start_one
from asyncz.ports import JobBroker
from asyncz.settings import Settings

_client: Any = None
_lock = threading.Lock()


def lambda_client() -> Any:
    """The sandbox's Lambda client, created once (thread-safe). botocore's own, as
    ``boto3.client`` would build it (the same region, endpoint and credentials from the
    environment) without importing boto3 and s3transfer: ~0.2 s of CPU instead of ~0.3 s,
    paid once by every sandbox that starts a worker."""
    global _client
    with _lock:
        if _client is None:
            import botocore.session

            # a session of its own: botocore's shared one also signs IAM auth tokens
            # (asyncz.iam_auth), maybe on another thread, and a session is not thread-safe
            _client = botocore.session.Session().create_client("lambda")
            # The client's ~40,000 objects live as long as the sandbox. Left to the collector
            # they set off a full collection of everything (~50 ms of CPU) a few requests
            # later; frozen with the sandbox's other long-lived objects, no collection walks
            # them again (BENCHMARKS.md, "Measured reasons"). Once per sandbox, a request's
            # objects alive at this moment are frozen too: freed when dropped, unless a
            # cycle holds them.
            gc.freeze()
        return _client


def warm_in_background() -> None:
    """Create the client on a daemon thread: importing botocore and building a client
    takes a fifth of a second of CPU, which the first scale-out decision should not wait
    for."""
    threading.Thread(target=lambda_client, name="lambda-client", daemon=True).start()


def invoke_worker(function_name: str, payload: bytes = b"{}") -> None:
    """Async-invoke one worker."""
    lambda_client().invoke(FunctionName=function_name, InvocationType="Event", Payload=payload)


def lambda_scale_out(settings: Settings, function_name: str | None) -> ScaleOut | None:
    """Starting the workers a backlog lacks from a function other than the api (a busy
    worker, recovery after it enqueued jobs): one decision per interval across everyone,
    by the same lock (asyncz.fleet.scale_out). None when scale-out is off or no worker is named."""
    if not (function_name and settings.wake_worker and settings.scale_out_seconds > 0):
        return None
    name = function_name

    async def wake() -> None:
        await asyncio.to_thread(invoke_worker, name)

    return ScaleOut(settings, wake)


def lambda_start_worker(
    settings: Settings, function_name: str | None
) -> Callable[[JobBroker], Awaitable[int]] | None:
    """Start one worker now (asyncz.fleet.scale_out.start_one), by an async invoke; None
    when waking workers is off or no worker is named."""
    if not (function_name and settings.wake_worker):
        return None
    name = function_name

    async def wake() -> None:
        await asyncio.to_thread(invoke_worker, name)

    return lambda broker: start_one(broker, wake)
