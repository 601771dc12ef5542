"""The AWS Distro for OpenTelemetry (ADOT) Lambda layer on the functions a job's trace runs
through, so their spans (``asyncz.tracing``) reach X-Ray or an OTLP endpoint.

Our dependency layer ships the OpenTelemetry API only; the ADOT layer brings the SDK, sets its
tracer provider up before our handler runs (``/opt/otel-instrument``), and runs a collector
extension whose built-in configuration exports traces to X-Ray with the function's role.
"""

from __future__ import annotations

from aws_cdk import Aws
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_

# The AWS-managed ADOT Python layer, pinned here and nowhere else: OpenTelemetry Python 1.32.0
# and the ADOT Collector for Lambda 0.43.0, layer version 2, the newest that
# github.com/aws-observability/aws-otel-lambda lists (README and its sample apps' ARNs, release
# of 2025-05-30); the ARN's form is the one aws-otel.github.io/docs/getting-started/lambda/
# lambda-python documents. AWS publishes it from this account in the commercial regions it
# supports; in another region the deploy fails on the layer. aws-cdk-lib 2.275's own
# AdotLambdaLayerPythonSdkVersion stops at 1.29.0.
ADOT_ACCOUNT = "901920570463"
ADOT_PYTHON_VERSION = "1.32.0"
ADOT_LAYER_VERSION = 2
_ARCHITECTURES = {"x86_64": "amd64", "arm64": "arm64"}

EXEC_WRAPPER = "/opt/otel-instrument"
XRAY = "xray"  # the option's value that exports with the layer's collector to X-Ray
XRAY_ACTIONS = ["xray:PutTraceSegments", "xray:PutTelemetryRecords"]


def adot_layer_arn(architecture: lambda_.Architecture) -> str:
    """The pinned ADOT Python layer for ``architecture`` in the stack's region."""
    arch = _ARCHITECTURES[architecture.name]
    version = ADOT_PYTHON_VERSION.replace(".", "-")
    return (
        f"arn:aws:lambda:{Aws.REGION}:{ADOT_ACCOUNT}:layer:"
        f"aws-otel-python-{arch}-ver-{version}:{ADOT_LAYER_VERSION}"
    )


def otel_environment(traces: str) -> dict[str, str]:
    """What a traced function needs: the wrapper, ``ASYNCZ_TRACING`` (spans on), and for an
    OTLP endpoint the SDK's exporter (OTLP over HTTP, as ``asyncz dev`` sends)."""
    env = {"AWS_LAMBDA_EXEC_WRAPPER": EXEC_WRAPPER, "ASYNCZ_TRACING": "on"}
    if traces != XRAY:
        env["OTEL_EXPORTER_OTLP_ENDPOINT"] = traces
        env["OTEL_EXPORTER_OTLP_PROTOCOL"] = "http/protobuf"
    return env


def instrument(fn: lambda_.Function, *, traces: str, architecture: lambda_.Architecture) -> None:
    """Add the ADOT layer and its settings to ``fn``; with X-Ray, the grant its collector
    exports with (Lambda's active tracing grants the same actions when ``tracing`` is on)."""
    fn.add_layers(
        lambda_.LayerVersion.from_layer_version_arn(fn, "AdotLayer", adot_layer_arn(architecture))
    )
    for key, value in otel_environment(traces).items():
        fn.add_environment(key, value)
    if traces == XRAY:
        fn.add_to_role_policy(
            iam.PolicyStatement(
                actions=XRAY_ACTIONS,
                resources=["*"],  # X-Ray's put calls take no resource-level scoping
            )
        )
