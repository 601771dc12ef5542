"""API Gateway REST API: Lambda proxy; the stage's throttle guards the whole API, the api
function checks every key (named keys with scopes and per-key rates, asyncz.access)."""

from __future__ import annotations

from aws_cdk import Aws, Fn, RemovalPolicy
from aws_cdk import aws_apigateway as apigw
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from constructs import Construct


class Api(Construct):
    """REST (v1) API in front of the api function. The gateway checks no key: API Gateway
    API keys know one key and no scopes, so a named key (``asyncz keys create``) could not
    pass them; the api function refuses a request without an accepted key (401) or outside
    its scopes (403), and counts per-key rates across sandboxes (429). The stage's throttle
    (rate and burst) stays as a flood guard for the whole API."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        name: str,
        handler: lambda_.IFunction,
        stage_name: str,
        throttle_rate: float,
        throttle_burst: int,
        execution_logging: bool,
        tracing: bool,
        log_retention: logs.RetentionDays,
    ) -> None:
        super().__init__(scope, construct_id)
        access_logs = logs.LogGroup(
            self, "AccessLogs", retention=log_retention, removal_policy=RemovalPolicy.DESTROY
        )
        self.rest_api = apigw.LambdaRestApi(
            self,
            "RestApi",
            rest_api_name=f"{name}-api",
            handler=handler,
            proxy=True,
            description="AsyncZ job queue API",
            endpoint_types=[apigw.EndpointType.REGIONAL],
            # The account-wide CloudWatch role is needed for execution logs only.
            cloud_watch_role=execution_logging,
            cloud_watch_role_removal_policy=RemovalPolicy.DESTROY if execution_logging else None,
            deploy_options=apigw.StageOptions(
                stage_name=stage_name,
                throttling_rate_limit=throttle_rate,
                throttling_burst_limit=throttle_burst,
                tracing_enabled=tracing,
                metrics_enabled=True,
                logging_level=(
                    apigw.MethodLoggingLevel.ERROR
                    if execution_logging
                    else apigw.MethodLoggingLevel.OFF
                ),
                access_log_destination=apigw.LogGroupLogDestination(access_logs),
                access_log_format=apigw.AccessLogFormat.json_with_standard_fields(
                    caller=False,
                    http_method=True,
                    ip=True,
                    protocol=True,
                    request_time=True,
                    resource_path=True,
                    response_length=True,
                    status=True,
                    user=False,
                ),
            ),
        )
        self.api_id: str = self.rest_api.rest_api_id
        self.url: str = self.rest_api.url
        # The same URL built from the API's id alone (not its deployment, which needs the
        # api function): the worker's callbacks' URLs, with no cycle through the api.
        self.public_url: str = Fn.join("", [
            "https://", self.api_id, ".execute-api.", Aws.REGION, ".", Aws.URL_SUFFIX, "/",
            stage_name,
        ])  # fmt: skip
