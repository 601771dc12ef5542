"""The dependency layer, built by ``layers/build.sh`` with pip (no Docker)."""

from __future__ import annotations

from pathlib import Path

from aws_cdk import RemovalPolicy
from aws_cdk import aws_lambda as lambda_
from constructs import Construct

from infra.constructs.runtime import RUNTIME


class LayerNotBuiltError(RuntimeError):
    """The layer folder for the configured architecture does not exist."""


class DependencyLayer(Construct):
    """A layer from ``build_dir`` (``layers/build/<arch>``, holding ``python/``)."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        build_dir: Path,
        architecture: lambda_.Architecture,
    ) -> None:
        super().__init__(scope, construct_id)
        if not (build_dir / "python").is_dir():
            raise LayerNotBuiltError(
                f"layer not built: {build_dir / 'python'} is missing; "
                f"run `layers/build.sh {architecture.name}`"
            )
        self.layer = lambda_.LayerVersion(
            self,
            "Layer",
            code=lambda_.Code.from_asset(str(build_dir)),
            compatible_runtimes=[RUNTIME],
            compatible_architectures=[architecture],
            description=f"AsyncZ dependencies ({architecture.name}, {RUNTIME.name})",
            removal_policy=RemovalPolicy.DESTROY,
        )
