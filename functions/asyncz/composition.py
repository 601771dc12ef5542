"""Composition root: builds the job service (store, broker, task registry, settings) once
per sandbox and event loop, lazily. Nothing connects at import time; every handler runs on
the sandbox's long-lived loop (:func:`asyncz.eventloop.sandbox_loop`), so the pools made at
the first invocation are reused by every warm one.
"""

from __future__ import annotations

import asyncio
import weakref
from typing import TypeVar

from asyncz.broker.redis import RedisBroker
from asyncz.connections import (
    database_conninfo,
    database_password,
    redis_credentials,
    redis_password,
)
from asyncz.outbox.wake import lambda_wake
from asyncz.ports import MetricsSink
from asyncz.service import JobService
from asyncz.settings import Settings
from asyncz.store.postgres import PostgresStore
from asyncz.tasks.loader import load_task_modules
from asyncz.webhooks.cipher import KmsCipher, SecretCipher

T = TypeVar("T")

_services: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, dict[Settings, JobService]] = (
    weakref.WeakKeyDictionary()
)


async def build_service(
    settings: Settings, *, metrics: MetricsSink | None = None, pool_max: int | None = None
) -> JobService:
    """A new service with its own pool and Redis client (opened, connecting lazily)."""
    registry = load_task_modules(settings.task_module_list)
    store = PostgresStore.create(
        database_conninfo(settings),
        min_size=settings.db_pool_min,
        max_size=pool_max or settings.db_pool_max,
        timeout=settings.db_connect_timeout_seconds,
        prepare=settings.db_prepared_statements,
        query_timeout=settings.db_query_timeout_seconds,
        statement_timeout=settings.statement_timeout_seconds,
        password=database_password(settings),
        max_idle=settings.db_pool_max_idle_seconds,
    )
    await store.open()
    broker = build_broker(settings)
    service = JobService(
        store, broker, registry, settings, metrics=metrics, cipher=build_cipher(settings)
    )
    service.leases.ended = lambda_wake(settings, broker)  # ends committed: wake the events fn
    return service


def build_cipher(settings: Settings) -> SecretCipher | None:
    """KMS for webhooks' signing secrets where a key is configured (AWS); else None: the
    service uses the deployment's own key."""
    if not settings.webhook_kms_key_id:
        return None
    import boto3  # only where KMS is configured

    return KmsCipher(boto3.client("kms"), settings.webhook_kms_key_id)


def build_broker(settings: Settings) -> RedisBroker:
    """The Redis adapter alone (connecting lazily): what the fleet controller needs."""
    return RedisBroker.from_url(
        settings.redis_url or "redis://127.0.0.1:6379/0",
        prefix=settings.redis_prefix,
        password=redis_password(settings),
        socket_timeout=settings.redis_socket_timeout_seconds,
        credentials=redis_credentials(settings),
        track_activity=settings.recovery_idle_check_seconds > 0,
    )


_brokers: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, dict[Settings, RedisBroker]] = (
    weakref.WeakKeyDictionary()
)


async def current_broker(settings: Settings) -> RedisBroker:
    """The broker bound to the running event loop, built at first use."""
    per_loop = _brokers.setdefault(asyncio.get_running_loop(), {})
    if settings not in per_loop:
        per_loop[settings] = build_broker(settings)
    return per_loop[settings]


async def close_service(service: JobService) -> None:
    await service.store.close()  # type: ignore[attr-defined]
    await service.broker.close()  # type: ignore[attr-defined]


async def current_service(
    settings: Settings, *, metrics: MetricsSink | None = None, pool_max: int | None = None
) -> JobService:
    """The service bound to the running event loop, built at first use."""
    per_loop = _services.setdefault(asyncio.get_running_loop(), {})
    service = per_loop.get(settings)
    if service is None:
        service = await build_service(settings, metrics=metrics, pool_max=pool_max)
        per_loop[settings] = service
    return service
