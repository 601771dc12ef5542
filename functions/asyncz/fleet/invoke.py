"""Starting a worker Lambda: one async invoke (InvocationType=Event)."""

from __future__ import annotations

import threading
from typing import Any

_client: Any = None
_lock = threading.Lock()


def lambda_client() -> Any:
    """The sandbox's boto3 Lambda client, created once (thread-safe)."""
    global _client
    with _lock:
        if _client is None:
            import boto3

            _client = boto3.client("lambda")
        return _client


def warm_in_background() -> None:
    """Create the client on a daemon thread: importing boto3 and building a client takes
    a second or more of CPU, which the first scale-out decision should not wait for."""
    threading.Thread(target=lambda_client, name="lambda-client", daemon=True).start()


def invoke_worker(function_name: str, payload: bytes = b"{}") -> None:
    """Async-invoke one worker."""
    lambda_client().invoke(FunctionName=function_name, InvocationType="Event", Payload=payload)
