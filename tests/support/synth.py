"""The infrastructure tier's synthesis: each stage's stacks built in a fresh app with the
context `cdk.json` gives the CLI (plus switches that keep synthesis fast), and how long each
synthesis took (printed at the end of the tier)."""

from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

os.environ.setdefault("JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION", "20")

import aws_cdk as cdk
from aws_cdk.assertions import Template

from asyncz_cdk.config import StageConfig
from infra.app import APP_CONTEXT, ROOT, build

TIMINGS: dict[str, float] = {}

# What `cdk.json` passes to the CLI (a bare App in pytest does not read cdk.json),
# plus switches that keep synthesis fast: no bundling, no asset copies.
FAST_CONTEXT = {
    **json.loads((ROOT / "cdk.json").read_text())["context"],
    **APP_CONTEXT,
    "aws:cdk:bundling-stacks": [],
    "aws:cdk:disable-asset-staging": True,
}


@dataclass
class Synth:
    """One stage's synthesized cloud assembly."""

    config: StageConfig
    outdir: Path
    templates: dict[str, dict[str, Any]]  # stack name -> template JSON
    artifacts: dict[str, str]  # stack name -> artifact id (the template file's name)
    name: str = "asyncz"

    @property
    def service(self) -> dict[str, Any]:
        return self.templates[f"{self.name}-Service"]

    @property
    def data(self) -> dict[str, Any]:
        return self.templates[f"{self.name}-Data"]

    def template(self, which: str = "Service") -> Template:
        return Template.from_json(self.templates[f"{self.name}-{which}"])

    def template_path(self, stack_name: str) -> Path:
        return self.outdir / f"{self.artifacts[stack_name]}.template.json"


def synthesize(config: StageConfig, outdir: Path, name: str = "asyncz") -> Synth:
    """Build ``config``'s stacks in a fresh app and synthesize (cdk-nag included)."""
    started = time.perf_counter()
    app = cdk.App(outdir=str(outdir), context=dict(FAST_CONTEXT))
    build(app, config, name=name)
    assembly = app.synth()
    templates = {stack.stack_name: stack.template for stack in assembly.stacks}
    artifacts = {stack.stack_name: stack.id for stack in assembly.stacks}
    TIMINGS[f"synth {config.stage} ({config.architecture})"] = time.perf_counter() - started
    return Synth(config, outdir, templates, artifacts, name)
