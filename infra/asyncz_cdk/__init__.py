"""The AsyncZ CDK construct: ``pip install 'asyncz-serverless[infra]'``, then in your app

from asyncz_cdk import AsyncZ, AsyncZProps
AsyncZ(app, "jobs", AsyncZProps(task_code=HERE, task_modules=["tasks"], ...))
"""

from asyncz_cdk.config import StageConfig, aws_stage, local_stage
from asyncz_cdk.construct import AsyncZ, AsyncZProps
from asyncz_cdk.context import deployment_name, settings_from_context
from asyncz_cdk.layer_build import LayerBuildError

__all__ = [
    "AsyncZ",
    "AsyncZProps",
    "LayerBuildError",
    "StageConfig",
    "aws_stage",
    "deployment_name",
    "local_stage",
    "settings_from_context",
]
