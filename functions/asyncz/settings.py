"""Typed settings, parsed once per sandbox from ``ASYNCZ_*`` environment variables.

Every Lambda reads the same model; :meth:`Settings.require_for` checks, at cold start,
that the variables a given function needs are present, so a missing one fails loudly
before any request is served.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Literal

from pydantic import Field, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from asyncz.setting_groups import (
    ApiSettings,
    DatabaseSettings,
    FleetSettings,
    JobSettings,
    LimitSettings,
    ObservabilitySettings,
    OutboxSettings,
    RecoverySettings,
    RedisSettings,
    WebhookSettings,
    WorkerSettings,
)
from asyncz.tasks.limits import parse_overrides

FunctionName = Literal["api", "worker", "fleet", "recovery", "migrate", "events"]


class SettingsError(ValueError):
    """The environment does not configure what a function needs."""


class Settings(
    DatabaseSettings,
    RedisSettings,
    JobSettings,
    LimitSettings,
    WorkerSettings,
    FleetSettings,
    RecoverySettings,
    ApiSettings,
    ObservabilitySettings,
    WebhookSettings,
    OutboxSettings,
    BaseSettings,
):
    """All configuration of AsyncZ, one group per concern (:mod:`asyncz.setting_groups`);
    field ``foo`` is read from ``ASYNCZ_FOO``."""

    model_config = SettingsConfigDict(env_prefix="ASYNCZ_", extra="ignore", frozen=True)

    stage: str = "local"
    aws_region: str | None = Field(default=None, validation_alias="AWS_REGION")

    @model_validator(mode="after")
    def _check_ranges(self) -> Settings:
        parse_overrides(self.task_limits)  # a bad ASYNCZ_TASK_LIMITS fails at cold start
        if self.backoff_max_seconds < self.backoff_base_seconds:
            raise ValueError("ASYNCZ_BACKOFF_MAX_SECONDS must be >= ASYNCZ_BACKOFF_BASE_SECONDS")
        if self.db_pool_max < self.db_pool_min:
            raise ValueError("ASYNCZ_DB_POOL_MAX must be >= ASYNCZ_DB_POOL_MIN")
        if self.fleet_max_workers < self.fleet_min_workers:
            raise ValueError("ASYNCZ_FLEET_MAX_WORKERS must be >= ASYNCZ_FLEET_MIN_WORKERS")
        if self.default_timeout_seconds > self.max_timeout_seconds:
            raise ValueError("ASYNCZ_DEFAULT_TIMEOUT_SECONDS must be <= ASYNCZ_MAX_TIMEOUT_SECONDS")
        return self

    def require_for(self, function: FunctionName) -> Settings:
        """Raise :class:`SettingsError` naming every variable ``function`` needs but lacks."""
        missing: list[str] = []
        if function != "fleet" and not (
            self.database_url or self.database_secret_arn or self._database_login
        ):
            missing.append(
                "ASYNCZ_DATABASE_URL, ASYNCZ_DATABASE_SECRET_ARN or ASYNCZ_DATABASE_HOST with "
                "ASYNCZ_DATABASE_USER (and ASYNCZ_DATABASE_IAM_AUTH or a password)"
            )
        if function != "migrate" and self.redis_iam_user and not self.redis_cache_name:
            missing.append("ASYNCZ_REDIS_CACHE_NAME (for ASYNCZ_REDIS_IAM_USER)")
        if function != "migrate" and not self.redis_url:
            missing.append("ASYNCZ_REDIS_URL")
        if function == "fleet" and not self.worker_function_name:
            missing.append("ASYNCZ_WORKER_FUNCTION_NAME")
        if function == "api" and not (
            self.api_key_hash_list or self.api_keys_secret_arn or self.api_keys.strip()
        ):
            missing.append("ASYNCZ_API_KEY_HASHES, ASYNCZ_API_KEYS or ASYNCZ_API_KEYS_SECRET_ARN")
        if missing:
            raise SettingsError(f"{function} is not configured: set {', '.join(missing)}")
        return self


@lru_cache(maxsize=1)
def get_settings() -> Settings:
    """The sandbox's settings, read from the environment once."""
    return Settings()
