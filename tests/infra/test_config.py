"""Context -> stage configuration, chosen only in the app entry."""

from __future__ import annotations

from pathlib import Path

import aws_cdk as cdk
import pytest
from aws_cdk import aws_lambda as lambda_

from asyncz_cdk.config import DEFAULT_LOCAL_DATABASE_URL, DEFAULT_LOCAL_REDIS_URL, aws_stage
from asyncz_cdk.constructs.layer import DependencyLayer, LayerNotBuiltError
from asyncz_cdk.context import settings_from_context

pytestmark = pytest.mark.infra


def test_defaults_are_the_aws_stage() -> None:
    config = settings_from_context(cdk.App())
    assert config == aws_stage()
    assert config.stage == "aws" and config.architecture == "x86_64"
    assert config.alarm_period_seconds == 60 and config.nat_gateways == 0


def test_local_stage_defaults() -> None:
    config = settings_from_context(cdk.App(context={"stage": "local"}))
    assert config.kind == "local"
    assert config.database_url == DEFAULT_LOCAL_DATABASE_URL
    assert config.redis_url == DEFAULT_LOCAL_REDIS_URL
    assert config.alarm_period_seconds == 10


def test_context_overrides() -> None:
    config = settings_from_context(
        cdk.App(
            context={
                "stage": "local",
                "database_url": "postgresql://db/x",
                "redis_url": "redis://r/3",
                "architecture": "arm64",
                "alarm_period_seconds": "30",
                "alarm_email": "ops@example.com",
                "queues": "default, reports",
            }
        )
    )
    assert config.queues == ("default", "reports")
    assert (config.database_url, config.redis_url) == ("postgresql://db/x", "redis://r/3")
    assert config.architecture == "arm64"
    assert config.alarm_period_seconds == 30
    assert config.alarm_email == "ops@example.com"
    aws = settings_from_context(
        cdk.App(
            context={"nat_gateways": "1", "deletion_protection": "false", "db_multi_az": "true"}
        )
    )
    assert aws.nat_gateways == 1 and not aws.db_deletion_protection and aws.db_multi_az
    assert settings_from_context(cdk.App(context={"webhooks": "true"})).webhooks
    assert not settings_from_context(cdk.App()).webhooks  # off by default: it costs money


@pytest.mark.parametrize(
    "context",
    [
        {"stage": "prod"},
        {"architecture": "sparc"},
        {"deletion_protection": "maybe"},
        {"alarm_period_seconds": "45"},
        {"queues": "a b"},
    ],
)
def test_bad_context_fails_clearly(context: dict[str, str]) -> None:
    with pytest.raises(ValueError):
        settings_from_context(cdk.App(context=context))


def test_missing_layer_build_fails_with_the_command(tmp_path: Path) -> None:
    stack = cdk.Stack(cdk.App(), "Bare")
    with pytest.raises(LayerNotBuiltError, match=r"layer not built: .*arm64"):
        DependencyLayer(
            stack, "Layer", build_dir=tmp_path / "arm64", architecture=lambda_.Architecture.ARM_64
        )
