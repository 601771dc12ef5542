"""Infrastructure tier: synthesize each stage once per session and share the templates.

Synthesis runs the cdk-nag AwsSolutions checks, so a fixture that builds at all
proves the checks pass with every remaining finding acknowledged.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from asyncz_cdk.config import aws_stage, local_stage
from tests.support.synth import TIMINGS, Synth, synthesize


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
