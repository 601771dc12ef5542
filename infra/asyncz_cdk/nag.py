"""cdk-nag AwsSolutions findings we accept, each with the reason."""

from __future__ import annotations

from typing import TYPE_CHECKING

import aws_cdk as cdk
from aws_cdk import aws_lambda as lambda_
from constructs import IConstruct

from asyncz_cdk.config import StageConfig

if TYPE_CHECKING:
    from asyncz_cdk.data_stack import DataStack
    from asyncz_cdk.service_stack import ServiceStack


def acknowledge(scope: IConstruct, rule: str, reason: str) -> None:
    """Acknowledge cdk-nag finding ``rule`` (e.g. ``AwsSolutions-L1``) under ``scope``."""
    cdk.Validations.of(scope).acknowledge(cdk.Acknowledgment(id=rule, reason=reason))


def _managed_policy(name: str) -> str:
    return f"AwsSolutions-IAM4[Policy::arn:<AWS::Partition>:iam::aws:policy/service-role/{name}]"


def _logical_id(fn: lambda_.Function) -> str:
    resource = fn.node.default_child
    assert isinstance(resource, cdk.CfnElement)
    return str(cdk.Stack.of(fn).resolve(resource.logical_id))


def acknowledge_data(stack: DataStack, config: StageConfig) -> None:
    """Findings on the data stack."""
    if config.iam_auth:
        _acknowledge_iam_data(stack, config)
        return
    acknowledge(
        stack.database,
        "AwsSolutions-RDS11",
        "Port 5432 is kept: RDS Proxy listens on 5432 for PostgreSQL whatever the instance "
        "port, and only the proxy's security group may reach the instance anyway.",
    )
    if not config.db_multi_az:
        acknowledge(
            stack.database,
            "AwsSolutions-RDS3",
            "Multi-AZ is a stage setting (db_multi_az); the default stage trades it for "
            "half the instance cost. Backups (7 days) and deletion protection stay on.",
        )
    acknowledge(
        stack.database,
        "AwsSolutions-SMG4",
        "No rotation schedule: a rotation Lambda needs egress to Secrets Manager and RDS "
        "from the VPC and is out of scope; the proxy and functions re-read the secret, "
        "so rotation can be added (HostedRotation.postgreSqlSingleUser) without code changes. "
        "The same holds for the runtime role's secret (asyncz_app), whose password the "
        "migration step sets on every deploy.",
    )
    acknowledge(
        stack.cache,
        "AwsSolutions-SMG4",
        "The Redis AUTH token rotates only through ModifyReplicationGroup with the ROTATE "
        "strategy, which Secrets Manager rotation cannot drive; rotate it by hand "
        "(docs/deploy.md).",
    )


def _acknowledge_iam_data(stack: DataStack, config: StageConfig) -> None:
    """Findings on the data stack of the IAM-auth profiles (lean, serverless)."""
    db = stack.iam_database
    acknowledge(
        db,
        "AwsSolutions-SMG4",
        "The owner's password is read only by the migration step, at deploy (a dynamic "
        "reference); rotating it needs no code change (the functions sign IAM tokens as "
        "the runtime role), but a rotation Lambda needs a Secrets Manager endpoint, which "
        "this profile leaves out to stay cheap.",
    )
    acknowledge(
        db,
        "AwsSolutions-RDS11",
        "Port 5432 is kept: only the functions' security group may reach the database, "
        "and every login needs a signed IAM token (runtime role) or the owner's password.",
    )
    acknowledge(
        stack.iam_cache,
        "AwsSolutions-AEC6",
        "Authentication is ElastiCache IAM auth (RBAC user group, user in IAM mode; the "
        "default user is switched off), which replaces the AUTH token this rule looks for. "
        "TLS is required in transit.",
    )
    if config.profile == "lean":
        acknowledge(
            stack.iam_cache,
            "AwsSolutions-AEC4",
            "One cache node by design in the lean profile: Redis holds only job ids, which "
            "recovery rebuilds from Postgres after a node replacement (docs/deploy.md).",
        )
        acknowledge(
            db,
            "AwsSolutions-RDS3",
            "Single-AZ by design in the lean profile (about half the instance cost); "
            "backups and deletion protection stay on. Multi-AZ is the standard profile.",
        )


def acknowledge_service(stack: ServiceStack, config: StageConfig) -> None:
    """Findings on the service stack."""
    functions = [*stack.functions.all, stack.migration.function, stack.publisher.function]
    for fn in functions:
        acknowledge(
            fn,
            "AwsSolutions-L1",
            "Python 3.12 is the runtime the application and its layer are built and tested for.",
        )
        assert fn.role is not None
        acknowledge(
            fn.role,
            "AwsSolutions-IAM5[Resource::*]",
            "Only actions without resource-level permissions use '*': the Lambda VPC "
            "network-interface calls (ec2:CreateNetworkInterface, Describe*, ...), X-Ray "
            "PutTraceSegments/PutTelemetryRecords, and recovery's cloudwatch:PutMetricData "
            "(restricted by a cloudwatch:namespace=AsyncZ condition).",
        )
    worker = _logical_id(stack.functions.worker)
    for fn in (stack.functions.fleet, stack.functions.api, stack.functions.recovery):
        assert fn.role is not None
        acknowledge(
            fn.role,
            f"AwsSolutions-IAM5[Resource::<{worker}.Arn>:*]",
            "Invoke is allowed on the worker function and its versions/aliases only.",
        )
    acknowledge(
        stack.functions.api_keys_secret,
        "AwsSolutions-SMG4",
        "The API key is also the API Gateway key value; rotating it means redeploying "
        "(or adding a second key), documented in docs/deploy.md.",
    )
    api = stack.api
    acknowledge(
        api,
        "AwsSolutions-APIG2",
        "Lambda proxy integration: the FastAPI app validates every request body and "
        "answers 422 with details, which gateway models would duplicate.",
    )
    acknowledge(
        api,
        "AwsSolutions-APIG4",
        "No IAM/Cognito authorizer: the api function checks every request's key (named keys "
        "with scopes and per-key rates, reloaded every 5 s) but the GETs of health, the docs "
        "and the dashboard's pages. /health needs none so load balancers and uptime checks "
        "can call it: it answers only ok/down per dependency (no data, no error text) from a "
        "ping cached 2 s per sandbox. /ui, /docs, /openapi.json and their assets/ are static "
        "files a browser loads before it can send a key; every data call they make sends one.",
    )
    acknowledge(
        api,
        "AwsSolutions-COG4",
        "Machine-to-machine API: clients authenticate with an API key, not Cognito users.",
    )
    acknowledge(
        api,
        "AwsSolutions-APIG3",
        "No WAF web ACL by default (about $6/month idle); the stage throttles the whole API "
        "and each named key may carry its own rate. Attach one with "
        "AWS::WAFv2::WebACLAssociation if exposed widely.",
    )
    if config.api == "http":
        return  # an HTTP API has no execution logs (access logs are written) nor models
    if config.api_execution_logging:
        acknowledge(
            api,
            _managed_policy("AmazonAPIGatewayPushToCloudWatchLogs"),
            "API Gateway's account-level logging role uses the AWS-maintained policy.",
        )
    else:
        acknowledge(
            api,
            "AwsSolutions-APIG6",
            "Execution logging needs the account-wide API Gateway CloudWatch role, which "
            "this stage (LocalStack) does not create; access logs are still written.",
        )
