"""Starting a worker Lambda: one async invoke (InvocationType=Event)."""

from __future__ import annotations

from typing import Any

_client: Any = None


def invoke_worker(function_name: str, payload: bytes = b"{}") -> None:
    """Async-invoke one worker; the boto3 client is created once per sandbox."""
    global _client
    if _client is None:
        import boto3

        _client = boto3.client("lambda")
    _client.invoke(FunctionName=function_name, InvocationType="Event", Payload=payload)
