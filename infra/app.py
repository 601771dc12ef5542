"""Our own CDK app: one user of :class:`asyncz_cdk.AsyncZ`, with the built-in tasks only.

``cdk synth`` (stage ``aws``), ``cdk synth -c stage=local``, ``-c name=<deployment>``; the
other context keys are read by :mod:`asyncz_cdk.context` (docs/deploy.md lists them).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if __package__ in (None, ""):
    # Run as `python infra/app.py`: put the repo root on the path, not infra/.
    sys.path[:1] = [str(ROOT)]

import aws_cdk as cdk  # noqa: E402
from cdk_nag import AwsSolutionsChecks  # noqa: E402

from asyncz_cdk import AsyncZ, AsyncZProps, StageConfig  # noqa: E402
from asyncz_cdk.context import deployment_name, settings_from_context  # noqa: E402

# Defaults under any CLI/cdk.json context. Strong cross-stack references keep the data
# stack from deleting an export the service stack still imports.
APP_CONTEXT = {"@aws-cdk/core:defaultCrossStackReferences": "strong"}

# The built-in layer and code are cached here (git-ignored), shared by every synth.
BUILD_DIR = ROOT / "layers" / "build"


def build(app: cdk.App, config: StageConfig, *, name: str = "asyncz") -> AsyncZ:
    """Add deployment ``name`` (built-in tasks) and the cdk-nag checks to ``app``."""
    deployment = AsyncZ(app, name, AsyncZProps(name=name, settings=config, build_dir=BUILD_DIR))
    cdk.Validations.of(app).add_plugins(AwsSolutionsChecks(app))
    return deployment


def main() -> None:
    outdir = None if os.environ.get("CDK_OUTDIR") else str(ROOT / "cdk.out")
    app = cdk.App(outdir=outdir, context=APP_CONTEXT)
    build(app, settings_from_context(app), name=deployment_name(app))
    app.synth()


if __name__ == "__main__":
    main()
