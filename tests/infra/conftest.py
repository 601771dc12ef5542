"""Infrastructure tier: synthesize each stage once per session and share the templates.

Synthesis runs the cdk-nag AwsSolutions checks, so a fixture that builds at all
proves the checks pass with every remaining finding acknowledged.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

os.environ.setdefault("JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION", "20")

import aws_cdk as cdk
from aws_cdk.assertions import Template

from asyncz_cdk.config import StageConfig, aws_stage, local_stage
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


@pytest.fixture(scope="session")
def aws(tmp_path_factory: pytest.TempPathFactory) -> Synth:
    """The ``aws`` stage, as `cdk synth` builds it by default."""
    return synthesize(aws_stage(), tmp_path_factory.mktemp("cdk-aws"))


@pytest.fixture(scope="session")
def local(tmp_path_factory: pytest.TempPathFactory) -> Synth:
    """The ``local`` (LocalStack) stage with its default Postgres/Redis URLs."""
    return synthesize(local_stage(), tmp_path_factory.mktemp("cdk-local"))


@pytest.fixture(scope="session")
def lean(tmp_path_factory: pytest.TempPathFactory) -> Synth:
    """The ``aws`` stage with ``-c profile=lean``."""
    return synthesize(aws_stage(profile="lean"), tmp_path_factory.mktemp("cdk-lean"))


@pytest.fixture(scope="session")
def serverless(tmp_path_factory: pytest.TempPathFactory) -> Synth:
    """The ``aws`` stage with ``-c profile=serverless``."""
    return synthesize(aws_stage(profile="serverless"), tmp_path_factory.mktemp("cdk-serverless"))


@pytest.fixture(scope="session", params=["lean", "serverless"])
def iam_profile(request: pytest.FixtureRequest) -> Iterator[Synth]:
    """Each IAM-auth profile in turn."""
    yield request.getfixturevalue(request.param)


@pytest.fixture(scope="session", params=["aws", "local"])
def stage(request: pytest.FixtureRequest) -> Iterator[Synth]:
    """Each stage in turn."""
    yield request.getfixturevalue(request.param)


def pytest_terminal_summary(terminalreporter: Any) -> None:
    if TIMINGS:
        terminalreporter.section("infra timings")
        for name, seconds in TIMINGS.items():
            terminalreporter.write_line(f"{name}: {seconds:.1f} s")
