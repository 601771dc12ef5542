"""CDK entry point: ``cdk synth`` (stage ``aws``) or ``cdk synth -c stage=local``.

Per-stage values are chosen here, from CDK context, and passed to the stacks as
keyword arguments; nothing below this module reads context or the environment.

Context keys: ``stage`` (aws|local), ``database_url`` and ``redis_url`` (local), and
the overrides in :data:`CONTEXT_OVERRIDES` (docs/deploy.md lists them). The dependency
layer is built (pip, ~4 s) if missing or stale.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if __package__ in (None, ""):
    # Run as `python infra/app.py`: put the repo root (not infra/, whose `constructs`
    # folder would shadow the `constructs` library) on the path.
    sys.path[:1] = [str(ROOT)]

import aws_cdk as cdk  # noqa: E402
from cdk_nag import AwsSolutionsChecks  # noqa: E402

from infra.config import (  # noqa: E402
    DEFAULT_LOCAL_DATABASE_URL,
    DEFAULT_LOCAL_REDIS_URL,
    StageConfig,
    aws_stage,
    local_stage,
)
from infra.layer_build import ensure_layer  # noqa: E402
from infra.nag import acknowledge_data, acknowledge_service  # noqa: E402
from infra.stacks import DataStack, ServiceStack, local_data_access  # noqa: E402

# Defaults under any CLI/cdk.json context. Strong cross-stack references keep the data
# stack from deleting an export the service stack still imports.
APP_CONTEXT = {"@aws-cdk/core:defaultCrossStackReferences": "strong"}

CODE_DIR = ROOT / "functions"
LAYERS_ROOT = ROOT / "layers"


def _context(app: cdk.App, key: str) -> str | None:
    value = app.node.try_get_context(key)
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


# context key -> (StageConfig field, parser); the rest of StageConfig is fixed per stage.
CONTEXT_OVERRIDES: dict[str, tuple[str, Callable[[str], object]]] = {
    "architecture": ("architecture", _architecture),
    "alarm_email": ("alarm_email", str),
    "alarm_period_seconds": ("alarm_period_seconds", int),
    "oldest_queued_age_threshold_seconds": ("oldest_queued_age_threshold_seconds", int),
    "fleet_max_workers": ("fleet_max_workers", int),
    "worker_concurrency": ("worker_concurrency", int),
    "nat_gateways": ("nat_gateways", int),
    "deletion_protection": ("db_deletion_protection", _flag),
    "db_multi_az": ("db_multi_az", _flag),
    "cache_replicas": ("cache_replicas", int),
    "tracing": ("tracing", _flag),
}


def stage_config(app: cdk.App) -> StageConfig:
    """The :class:`StageConfig` selected by the app's context."""
    stage = _context(app, "stage") or "aws"
    overrides: dict[str, object] = {}
    for key, (field, parse) in CONTEXT_OVERRIDES.items():
        if (value := _context(app, key)) is not None:
            try:
                overrides[field] = parse(value)
            except ValueError as error:
                raise ValueError(f"context {key}: {error}") from None
    if stage == "local":
        return local_stage(
            database_url=_context(app, "database_url") or DEFAULT_LOCAL_DATABASE_URL,
            redis_url=_context(app, "redis_url") or DEFAULT_LOCAL_REDIS_URL,
            overrides=overrides,
        )
    if stage == "aws":
        return aws_stage(overrides=overrides)
    raise ValueError(f"unknown stage {stage!r}: use -c stage=aws (default) or -c stage=local")


def build(app: cdk.App, config: StageConfig, *, layer_dir: Path | None = None) -> ServiceStack:
    """Add the stage's stacks to ``app`` and the cdk-nag checks; return the service stack."""
    prefix = f"AsyncZ-{config.stage}"
    layer = layer_dir or ensure_layer(LAYERS_ROOT, config.architecture)
    if config.in_vpc:
        data_stack = DataStack(app, f"{prefix}-Data", config=config)
        acknowledge_data(data_stack, config)
        data = data_stack.data_access()
    else:
        assert config.database_url and config.redis_url
        data = local_data_access(database_url=config.database_url, redis_url=config.redis_url)
    service = ServiceStack(
        app, f"{prefix}-Service", config=config, data=data, code_dir=CODE_DIR, layer_dir=layer
    )
    acknowledge_service(service, config)
    # DBProxyTargetGroup takes no tags (CloudFormation rejects them).
    untaggable = ["AWS::RDS::DBProxyTargetGroup"]
    cdk.Tags.of(app).add("project", "asyncz", exclude_resource_types=untaggable)
    cdk.Tags.of(app).add("stage", config.stage, exclude_resource_types=untaggable)
    cdk.Validations.of(app).add_plugins(AwsSolutionsChecks(app))
    return service


def main() -> None:
    outdir = None if os.environ.get("CDK_OUTDIR") else str(ROOT / "cdk.out")
    app = cdk.App(outdir=outdir, context=APP_CONTEXT)
    build(app, stage_config(app))
    app.synth()


if __name__ == "__main__":
    main()
