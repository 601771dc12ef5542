"""The front and the logs of the deployed functions: `-c api=http` (the default of `lean` and
`serverless`) puts an HTTP API with payload format 2.0 in front of the api function, its stage
throttled and access-logged, and no REST API; Lambda's platform lines are dropped in AWS."""

from __future__ import annotations

import json

import pytest

from asyncz_cdk.config import aws_stage
from tests.support.synth import Synth, synthesize
from tests.support.templates import asyncz_functions, environment, resources

pytestmark = pytest.mark.infra


def check_http_api(synth: Synth) -> None:
    template = synth.service
    assert resources(template, "AWS::ApiGateway::RestApi") == {}
    ((_, api),) = resources(template, "AWS::ApiGatewayV2::Api").items()
    assert api["Properties"]["ProtocolType"] == "HTTP"
    ((_, integration),) = resources(template, "AWS::ApiGatewayV2::Integration").items()
    props = integration["Properties"]
    assert (props["IntegrationType"], props["PayloadFormatVersion"]) == ("AWS_PROXY", "2.0")
    api_id, api_fn = asyncz_functions(template)["api"]
    assert api_id in json.dumps(props["IntegrationUri"])
    assert environment(api_fn)["ASYNCZ_API_FRONT"] == "http"  # GET /stats prices this gateway
    ((_, route),) = resources(template, "AWS::ApiGatewayV2::Route").items()
    assert route["Properties"]["RouteKey"] == "$default"  # every path reaches the function
    assert route["Properties"].get("AuthorizationType", "NONE") == "NONE"  # keys: the app
    ((_, stage),) = resources(template, "AWS::ApiGatewayV2::Stage").items()
    stage_props = stage["Properties"]
    assert (stage_props["StageName"], stage_props["AutoDeploy"]) == ("$default", True)
    assert stage_props["DefaultRouteSettings"] == {
        "ThrottlingBurstLimit": synth.config.api_throttle_burst,
        "ThrottlingRateLimit": synth.config.api_throttle_rate,
    }
    log_format = json.loads(stage_props["AccessLogSettings"]["Format"])
    # who, what, the answer and how long, in short keys: one line per request is billed
    assert log_format == {
        "id": "$context.requestId", "ip": "$context.identity.sourceIp",
        "method": "$context.httpMethod", "path": "$context.path", "status": "$context.status",
        "bytes": "$context.responseLength", "ms": "$context.integrationLatency",
    }  # fmt: skip
    outputs = synth.service["Outputs"]
    assert {"ApiUrl", "ApiId"} <= set(outputs)
    # API Gateway may invoke the function (for any route of this API)
    permissions = resources(template, "AWS::Lambda::Permission").values()
    assert any(p["Properties"]["Principal"] == "apigateway.amazonaws.com" for p in permissions)


def test_the_http_api_fronts_the_function_when_asked(
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    config = aws_stage(overrides={"api": "http"})
    check_http_api(synthesize(config, tmp_path_factory.mktemp("cdk-http")))


def test_lean_and_serverless_use_the_http_api_by_default(iam_profile: Synth) -> None:
    assert iam_profile.config.api == "http"
    check_http_api(iam_profile)


def test_standard_keeps_the_rest_api_for_x_ray_tracing(aws: Synth) -> None:
    assert aws.config.api == "rest" and aws.config.tracing
    assert len(resources(aws.service, "AWS::ApiGateway::RestApi")) == 1
    assert resources(aws.service, "AWS::ApiGatewayV2::Api") == {}
    assert environment(asyncz_functions(aws.service)["api"][1])["ASYNCZ_API_FRONT"] == "rest"


def test_lambda_platform_lines_are_dropped_in_aws_and_kept_for_localstack(
    aws: Synth, local: Synth
) -> None:
    for _, fn in asyncz_functions(aws.service).values():
        assert fn["Properties"]["LoggingConfig"] == {
            "ApplicationLogLevel": "INFO",
            "LogFormat": "JSON",
            "LogGroup": fn["Properties"]["LoggingConfig"]["LogGroup"],
            "SystemLogLevel": "WARN",
        }
    for _, fn in asyncz_functions(local.service).values():
        assert "LogFormat" not in fn["Properties"].get("LoggingConfig", {})
