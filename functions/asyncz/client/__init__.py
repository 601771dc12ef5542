"""The AsyncZ API from Python: :class:`Client` (blocking) and :class:`AsyncClient` (asyncio),
on httpx with a kept connection pool, retries with backoff and jitter, typed models, and one
exception per API error. Needs httpx alone (``pip install "asyncz-serverless[client]"``);
it imports nothing of the server.

    from asyncz.client import Client

    with Client("http://127.0.0.1:8000", api_key) as client:
        job = client.submit("echo", {"hello": "world"})
        print(client.result(job.id, timeout=30))
"""

from asyncz.client.access import ApiKey, AuditEntry
from asyncz.client.aio import AsyncClient
from asyncz.client.errors import (
    ApiError,
    AsyncZClientError,
    ConnectionFailed,
    DuplicateJob,
    Forbidden,
    InvalidInput,
    InvalidState,
    JobFailed,
    NotFound,
    PayloadTooLarge,
    RateLimited,
    ServerError,
    Unauthorized,
    Unavailable,
    UniqueKeyHeld,
    WaitTimeout,
)
from asyncz.client.events import SentEvent
from asyncz.client.models import Attempt, Health, Job, QueueStats, Stats
from asyncz.client.steps import Step
from asyncz.client.sync import Client
from asyncz.client.typed import TaskInfo
from asyncz.client.webhooks import Webhook, WebhookDelivery

__all__ = [
    "ApiError",
    "ApiKey",
    "AsyncClient",
    "AsyncZClientError",
    "Attempt",
    "AuditEntry",
    "Client",
    "ConnectionFailed",
    "DuplicateJob",
    "Forbidden",
    "Health",
    "InvalidInput",
    "InvalidState",
    "Job",
    "JobFailed",
    "NotFound",
    "PayloadTooLarge",
    "QueueStats",
    "RateLimited",
    "SentEvent",
    "ServerError",
    "Stats",
    "Step",
    "TaskInfo",
    "Unauthorized",
    "Unavailable",
    "UniqueKeyHeld",
    "WaitTimeout",
    "Webhook",
    "WebhookDelivery",
]
