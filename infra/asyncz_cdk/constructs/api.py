"""API Gateway REST API: Lambda proxy, API key required, usage plan with throttle/quota."""

from __future__ import annotations

from aws_cdk import RemovalPolicy
from aws_cdk import aws_apigateway as apigw
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from aws_cdk import aws_secretsmanager as secretsmanager
from constructs import Construct

# Paths (below the stage) whose GET needs no API key.
PUBLIC_GET_PATHS = (
    "health",
    "openapi.json",
    "docs",
    "docs/assets/{name}",
    "ui",
    "ui/assets/{name}",
)


class Api(Construct):
    """REST (v1) API in front of the api function; every method but the GETs of
    :data:`PUBLIC_GET_PATHS` (health, the docs, the dashboard's pages) needs a key.

    The key's value is the ``api_key`` field of ``api_key_secret`` (a CloudFormation
    dynamic reference), so the gateway and the application accept the same key.
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        name: str,
        handler: lambda_.IFunction,
        api_key_secret: secretsmanager.ISecret,
        stage_name: str,
        throttle_rate: float,
        throttle_burst: int,
        quota_per_day: int,
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
            default_method_options=apigw.MethodOptions(api_key_required=True),
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
        # Without a key: GET /health (load balancers, uptime checks) and the pages a browser
        # opens before it can send a header: the dashboard, the docs and their static files
        # (the app checks the key again on every data call). Everything else goes through
        # the key-protected proxy.
        made: dict[str, apigw.IResource] = {}
        for path in PUBLIC_GET_PATHS:
            parent: apigw.IResource = self.rest_api.root
            for depth, part in enumerate(path.split("/"), start=1):
                key = "/".join(path.split("/")[:depth])
                if key not in made:  # (resource_for_path is refused on a proxying root)
                    made[key] = parent.add_resource(part)
                parent = made[key]
            parent.add_method("GET", apigw.LambdaIntegration(handler), api_key_required=False)
        self.api_key = apigw.ApiKey(
            self,
            "Key",
            api_key_name=f"{name}-default",
            description="AsyncZ default API key (value in the ApiKeys secret)",
            enabled=True,
            value=api_key_secret.secret_value_from_json("api_key").unsafe_unwrap(),
        )
        self.usage_plan = self.rest_api.add_usage_plan(
            "UsagePlan",
            name=f"{name}-clients",
            description="AsyncZ clients",
            throttle=apigw.ThrottleSettings(rate_limit=throttle_rate, burst_limit=throttle_burst),
            quota=apigw.QuotaSettings(limit=quota_per_day, period=apigw.Period.DAY),
            api_stages=[
                apigw.UsagePlanPerApiStage(api=self.rest_api, stage=self.rest_api.deployment_stage)
            ],
        )
        self.usage_plan.add_api_key(self.api_key)
        self.url: str = self.rest_api.url
