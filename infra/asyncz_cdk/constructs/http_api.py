"""API Gateway HTTP API (payload format 2.0) in front of the api function: `-c api=http`.

An HTTP API costs $1.00 per million requests against the REST API's $3.50 (us-east-1, first
tiers: docs/cost.md) and adds less latency; what the REST API's API keys and usage plan did,
the api function does itself (named keys, scopes, per-key rates: asyncz.access). One
``$default`` route and stage: every path reaches the function, at the API's root URL.
"""

from __future__ import annotations

import json

from aws_cdk import RemovalPolicy
from aws_cdk import aws_apigatewayv2 as apigwv2
from aws_cdk import aws_apigatewayv2_integrations as integrations
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from constructs import Construct

# One line per request, ingested at $0.50 per GB: what an operator needs of a request (who,
# what, the answer, how long), short keys, no time (CloudWatch stamps each event), no route
# key (always $default) and no protocol. About 110 bytes, against 205 with the REST API's
# standard fields (docs/cost.md).
ACCESS_LOG = {
    "id": "$context.requestId",
    "ip": "$context.identity.sourceIp",
    "method": "$context.httpMethod",
    "path": "$context.path",
    "status": "$context.status",
    "bytes": "$context.responseLength",
    "ms": "$context.integrationLatency",
}


class HttpApiFront(Construct):
    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        name: str,
        handler: lambda_.IFunction,
        throttle_rate: float,
        throttle_burst: int,
        log_retention: logs.RetentionDays,
    ) -> None:
        super().__init__(scope, construct_id)
        access_logs = logs.LogGroup(
            self, "AccessLogs", retention=log_retention, removal_policy=RemovalPolicy.DESTROY
        )
        self.http_api = apigwv2.HttpApi(
            self,
            "HttpApi",
            api_name=f"{name}-api",
            description="AsyncZ job queue API",
            create_default_stage=False,
            default_integration=integrations.HttpLambdaIntegration(
                "Api",
                handler,
                payload_format_version=apigwv2.PayloadFormatVersion.VERSION_2_0,
            ),
        )
        stage = apigwv2.HttpStage(
            self,
            "Stage",
            http_api=self.http_api,
            stage_name="$default",
            auto_deploy=True,
            throttle=apigwv2.ThrottleSettings(rate_limit=throttle_rate, burst_limit=throttle_burst),
        )
        cfn_stage = stage.node.default_child
        assert isinstance(cfn_stage, apigwv2.CfnStage)
        cfn_stage.access_log_settings = apigwv2.CfnStage.AccessLogSettingsProperty(
            destination_arn=access_logs.log_group_arn,
            format=json.dumps(ACCESS_LOG, separators=(",", ":")),
        )
        self.api_id: str = self.http_api.api_id
        self.url: str = f"{self.http_api.api_endpoint}/"
        self.public_url: str = self.http_api.api_endpoint  # callbacks' URLs (the worker's)
