"""Read a deployment's settings from CDK context (``cdk deploy -c key=value``).

For apps, not constructs: an app calls these once and passes the result to
:class:`~asyncz_cdk.construct.AsyncZProps`; no construct reads context itself.
Keys: ``name``, ``stage`` (aws|local), ``profile`` (standard|lean|serverless; aws only),
``database_url`` and ``redis_url`` (local), and
:data:`CONTEXT_OVERRIDES` (docs/deploy.md lists them).
"""

from __future__ import annotations

from collections.abc import Callable

from constructs import Construct

from asyncz_cdk.config import (
    DEFAULT_LOCAL_DATABASE_URL,
    DEFAULT_LOCAL_REDIS_URL,
    PROFILES,
    StageConfig,
    aws_stage,
    local_stage,
)
from asyncz_cdk.construct import check_name


def _context(scope: Construct, key: str) -> str | None:
    value = scope.node.try_get_context(key)
    return None if value in (None, "") else str(value)


def _flag(value: str) -> bool:
    if value.lower() in ("true", "1", "yes"):
        return True
    if value.lower() in ("false", "0", "no"):
        return False
    raise ValueError(f"expected true or false, got {value!r}")


def _architecture(value: str) -> str:
    if value not in ("x86_64", "arm64"):
        raise ValueError(f"architecture={value!r}: use x86_64 or arm64")
    return value


def _api_kind(value: str) -> str:
    if value not in ("rest", "http"):
        raise ValueError(f"api={value!r}: use rest or http")
    return value


def _otel(value: str) -> str:
    """``-c otel=xray``, ``-c otel=https://collector:4318``; off, false or none: off."""
    return "" if value.lower() in ("off", "false", "0", "no", "none") else value


def _names(value: str) -> tuple[str, ...]:
    return tuple(name.strip() for name in value.split(",") if name.strip())


# context key -> (StageConfig field, parser); the rest of StageConfig is fixed per stage.
CONTEXT_OVERRIDES: dict[str, tuple[str, Callable[[str], object]]] = {
    "architecture": ("architecture", _architecture),
    "arch": ("architecture", _architecture),  # the short form: -c arch=arm64
    "api": ("api", _api_kind),
    "alarm_email": ("alarm_email", str),
    "alarm_period_seconds": ("alarm_period_seconds", int),
    "oldest_queued_age_threshold_seconds": ("oldest_queued_age_threshold_seconds", int),
    "fleet_max_workers": ("fleet_max_workers", int),
    "worker_concurrency": ("worker_concurrency", int),
    "worker_idle_exit_seconds": ("worker_idle_exit_seconds", int),
    "nat_gateways": ("nat_gateways", int),
    "deletion_protection": ("db_deletion_protection", _flag),
    "db_multi_az": ("db_multi_az", _flag),
    "cache_replicas": ("cache_replicas", int),
    "tracing": ("tracing", _flag),
    "otel": ("otel_traces", _otel),
    "queues": ("queues", _names),
    # lifecycle events to EventBridge: "own", "default" or a bus's name or ARN (docs/events.md)
    "event_bus": ("event_bus", str),
    # webhooks: their key, and egress through a NAT for the events function (docs/events.md)
    "webhooks": ("webhooks", _flag),
    # lean / serverless sizing (the connection budget is checked at synth)
    "db_instance_type": ("db_instance_type", str),
    "api_reserved_concurrency": ("api_reserved_concurrency", int),
    "aurora_max_acu": ("aurora_max_acu", float),
}


def deployment_name(scope: Construct, default: str = "asyncz") -> str:
    """Context ``name`` (default ``asyncz``): prefixes the stacks and physical names."""
    return check_name(_context(scope, "name") or default)


def settings_from_context(scope: Construct) -> StageConfig:
    """The :class:`StageConfig` selected by context ``stage`` and the overrides."""
    stage = _context(scope, "stage") or "aws"
    overrides: dict[str, object] = {}
    for key, (field, parse) in CONTEXT_OVERRIDES.items():
        if (value := _context(scope, key)) is not None:
            try:
                overrides[field] = parse(value)
            except ValueError as error:
                raise ValueError(f"context {key}: {error}") from None
    if stage == "local":
        if _context(scope, "profile") not in (None, "standard"):
            raise ValueError("context profile: profiles apply to the aws stage only")
        return local_stage(
            database_url=_context(scope, "database_url") or DEFAULT_LOCAL_DATABASE_URL,
            redis_url=_context(scope, "redis_url") or DEFAULT_LOCAL_REDIS_URL,
            overrides=overrides,
        )
    profile = _context(scope, "profile") or "standard"
    if stage == "aws":
        if profile not in PROFILES:
            raise ValueError(f"context profile: {profile!r} is not one of {', '.join(PROFILES)}")
        return aws_stage(overrides=overrides, profile=profile)  # type: ignore[arg-type]
    raise ValueError(f"unknown stage {stage!r}: use -c stage=aws (default) or -c stage=local")
