"""The ``otel`` option: the ADOT Lambda layer on the functions a job's trace runs through,
X-Ray's grant and endpoint only where an exporter needs them, nothing of it by default."""

from __future__ import annotations

import json
from typing import Any

import pytest

from asyncz_cdk.config import aws_stage, local_stage
from asyncz_cdk.constructs.adot import ADOT_ACCOUNT, ADOT_LAYER_VERSION, ADOT_PYTHON_VERSION
from asyncz_cdk.context import settings_from_context
from tests.support.cfn_lint import cfn_lint, errors
from tests.support.synth import Synth, synthesize
from tests.support.templates import (
    actions,
    asyncz_functions,
    environment,
    resources,
    role_of,
    statements_of_role,
)

pytestmark = pytest.mark.infra

TRACED = {"api", "worker"}
XRAY = {"xray:PutTraceSegments", "xray:PutTelemetryRecords"}
OTLP = "https://otlp.example.com:4318"


@pytest.fixture(scope="module")
def xray_lean(tmp_path_factory: pytest.TempPathFactory) -> Synth:
    """``-c profile=lean -c otel=xray``: active tracing stays off (lean's default)."""
    config = aws_stage(profile="lean", overrides={"otel_traces": "xray"})
    return synthesize(config, tmp_path_factory.mktemp("cdk-otel-xray"))


@pytest.fixture(scope="module")
def otlp_standard(tmp_path_factory: pytest.TempPathFactory) -> Synth:
    """``-c otel=<url> -c tracing=false``: spans go to an OTLP endpoint, none to X-Ray."""
    config = aws_stage(overrides={"otel_traces": OTLP, "tracing": False, "nat_gateways": 1})
    return synthesize(config, tmp_path_factory.mktemp("cdk-otel-otlp"))


def adot_layers(fn: dict[str, Any]) -> list[Any]:
    return [
        layer
        for layer in fn["Properties"].get("Layers", [])
        if f":{ADOT_ACCOUNT}:layer:aws-otel-python-" in json.dumps(layer)
    ]


def granted(synth: Synth, name: str) -> set[str]:
    _, fn = asyncz_functions(synth.service)[name]
    return {a for s in statements_of_role(synth.service, role_of(fn)) for a in actions(s)}


def endpoint_services(synth: Synth) -> set[str]:
    return {
        e["Properties"]["ServiceName"]["Fn::Join"][1][-1]
        for e in resources(synth.data, "AWS::EC2::VPCEndpoint").values()
    }


def test_off_by_default_no_layer_wrapper_or_setting(aws: Synth, lean: Synth, local: Synth) -> None:
    for synth in (aws, lean, local):
        assert synth.config.otel_traces == ""
        for name, (_, fn) in asyncz_functions(synth.service).items():
            assert not adot_layers(fn), name
            env = environment(fn)
            assert "AWS_LAMBDA_EXEC_WRAPPER" not in env, name
            assert "ASYNCZ_TRACING" not in env and "OTEL_EXPORTER_OTLP_ENDPOINT" not in env


def test_lean_without_otel_has_no_x_ray_endpoint(lean: Synth) -> None:
    assert endpoint_services(lean) == {".lambda"}


@pytest.mark.parametrize("which", ["xray_lean", "otlp_standard"])
def test_layer_and_wrapper_on_the_functions_a_job_trace_runs_through(
    which: str, request: pytest.FixtureRequest
) -> None:
    synth: Synth = request.getfixturevalue(which)
    arch = {"x86_64": "amd64", "arm64": "arm64"}[synth.config.architecture]
    version = ADOT_PYTHON_VERSION.replace(".", "-")
    for name, (_, fn) in asyncz_functions(synth.service).items():
        env = environment(fn)
        if name not in TRACED:
            assert not adot_layers(fn) and "AWS_LAMBDA_EXEC_WRAPPER" not in env, name
            continue
        (layer,) = adot_layers(fn)
        assert f"aws-otel-python-{arch}-ver-{version}:{ADOT_LAYER_VERSION}" in json.dumps(layer)
        assert {"Ref": "AWS::Region"} in layer["Fn::Join"][1], "the layer of the stack's region"
        assert len(fn["Properties"]["Layers"]) == 2, "our dependency layer stays"
        assert env["AWS_LAMBDA_EXEC_WRAPPER"] == "/opt/otel-instrument"
        assert env["ASYNCZ_TRACING"] == "on"


def test_x_ray_export_grants_x_ray_and_adds_its_endpoint(xray_lean: Synth) -> None:
    assert not xray_lean.config.tracing  # lean keeps active tracing off
    for name in asyncz_functions(xray_lean.service):
        assert (granted(xray_lean, name) >= XRAY) == (name in TRACED), name
        fn = asyncz_functions(xray_lean.service)[name][1]
        assert fn["Properties"].get("TracingConfig", {}).get("Mode") != "Active"
        assert "OTEL_EXPORTER_OTLP_ENDPOINT" not in environment(fn)  # the layer's collector
    assert endpoint_services(xray_lean) == {".lambda", ".xray"}


def test_otlp_export_sets_the_endpoint_and_needs_nothing_of_x_ray(otlp_standard: Synth) -> None:
    for name, (_, fn) in asyncz_functions(otlp_standard.service).items():
        assert not granted(otlp_standard, name) & XRAY, name
        if name in TRACED:
            env = environment(fn)
            assert env["OTEL_EXPORTER_OTLP_ENDPOINT"] == OTLP
            assert env["OTEL_EXPORTER_OTLP_PROTOCOL"] == "http/protobuf"
    assert ".xray" not in endpoint_services(otlp_standard)


def test_the_option_is_checked() -> None:
    with pytest.raises(ValueError, match="otel_traces"):
        aws_stage(overrides={"otel_traces": "jaeger"})
    with pytest.raises(ValueError, match="ADOT"):
        local_stage(overrides={"otel_traces": "xray"})


@pytest.mark.parametrize(
    ("value", "expected"), [("xray", "xray"), ("off", ""), ("false", ""), (OTLP, OTLP)]
)
def test_context_key(value: str, expected: str) -> None:
    import aws_cdk as cdk

    app = cdk.App(context={"otel": value})
    assert settings_from_context(app).otel_traces == expected


def test_cfn_lint_has_no_errors_with_the_layer(xray_lean: Synth, otlp_standard: Synth) -> None:
    result = cfn_lint(xray_lean, otlp_standard)
    assert not errors(result), result.stdout + result.stderr
