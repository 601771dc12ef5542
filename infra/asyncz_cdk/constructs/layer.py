"""The dependency layer, built by :mod:`asyncz_cdk.layer_build` with pip (no Docker)."""

from __future__ import annotations

from pathlib import Path

from aws_cdk import RemovalPolicy
from aws_cdk import aws_lambda as lambda_
from constructs import Construct

from asyncz_cdk.constructs.function_defaults import RUNTIME


class LayerNotBuiltError(RuntimeError):
    """The layer folder for the configured architecture does not exist."""


class DependencyLayer(Construct):
    """A layer from ``build_dir`` (holding ``python/``)."""

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
                f"layer not built: {build_dir / 'python'} is missing; build it with "
                f"`python -m asyncz_cdk.layer_build {architecture.name} {build_dir}`"
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
