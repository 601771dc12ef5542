"""``AsyncZ``: the whole job queue, with the user's own tasks, in the user's own CDK app."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import aws_cdk as cdk
from aws_cdk import aws_lambda as lambda_
from constructs import Construct

from asyncz_cdk.code_asset import check_task_modules, stage_code
from asyncz_cdk.config import StageConfig, aws_stage
from asyncz_cdk.constructs.function_defaults import CODE_EXCLUDES
from asyncz_cdk.data_stack import DataStack, local_data_access
from asyncz_cdk.layer_build import RUNTIME_REQUIREMENTS, cached_layer
from asyncz_cdk.nag import acknowledge_data, acknowledge_service
from asyncz_cdk.service_stack import ServiceStack

# Lower-case so it is valid in every physical name it prefixes (RDS proxy, dashboards,
# alarms, stack names); short so that CloudFormation's generated names keep a readable
# prefix.
_NAME = re.compile(r"^[a-z][a-z0-9]*(-[a-z0-9]+)*$")
MAX_NAME_LENGTH = 24
_REFERENCE_STRENGTH = "@aws-cdk/core:defaultCrossStackReferences"
# DBProxyTargetGroup takes no tags (CloudFormation rejects them).
_UNTAGGABLE = ["AWS::RDS::DBProxyTargetGroup"]


def check_name(name: str) -> str:
    """``name`` if it is a valid deployment name, else ``ValueError`` saying why."""
    if not _NAME.match(name) or len(name) > MAX_NAME_LENGTH:
        raise ValueError(
            f"deployment name {name!r}: use lower-case letters, digits and single hyphens, "
            f"starting with a letter, at most {MAX_NAME_LENGTH} characters"
        )
    return name


@dataclass(frozen=True)
class AsyncZProps:
    """What one deployment runs and how it is sized.

    ``task_code`` is a folder copied beside the ``asyncz`` package into every function
    (tooling such as ``cdk.out``, ``.venv``, ``node_modules``, tests is left out; add
    globs in ``task_code_excludes``). ``task_modules`` are imported at start
    (``ASYNCZ_TASK_MODULES``); each must be a module or package in ``task_code``.
    ``task_requirements`` is a pip requirements file resolved together with our own pins
    into the dependency layer (binary wheels only). ``settings`` holds everything else:
    network, database, cache, fleet, queues, alarms, tracing (see :class:`StageConfig`).
    ``build_dir`` caches the staged code and layers (default
    ``<task_code or cwd>/.asyncz/cdk-build``).
    """

    name: str = "asyncz"
    settings: StageConfig = field(default_factory=aws_stage)
    task_code: Path | None = None
    task_modules: Sequence[str] = ()
    task_requirements: Path | None = None
    task_code_excludes: Sequence[str] = ()
    build_dir: Path | None = None

    def __post_init__(self) -> None:
        check_name(self.name)
        if isinstance(self.task_modules, str):
            raise TypeError("task_modules is a list of module names, not one string")
        if self.task_requirements is not None and not self.task_requirements.is_file():
            raise ValueError(f"task_requirements {self.task_requirements} is not a file")


class AsyncZ(Construct):
    """One AsyncZ deployment: a data stack and a service stack, named ``<name>-Data`` and
    ``<name>-Service``; every physical name it sets starts with ``name``.

    Why two stacks: the data stack holds what must survive (VPC, PostgreSQL + proxy,
    Redis; deletion protection, snapshots) and changes rarely; the service stack holds
    everything stateless (code, layer, functions, API, schedules, alarms), which every
    task change redeploys and which can be destroyed and re-created at no risk to a job.
    Separate stacks give that a separate blast radius and a separate ``cdk destroy``;
    nested stacks would tie both to one deployment and one rollback. The local (LocalStack)
    stage has no data stack: its Postgres and Redis run beside LocalStack.

    Place it in the App (or a Stage), not in a Stack: it creates its own stacks.
    """

    def __init__(self, scope: Construct, construct_id: str, props: AsyncZProps) -> None:
        super().__init__(scope, construct_id)
        if any(isinstance(s, cdk.Stack) for s in self.node.scopes):
            raise TypeError("AsyncZ creates its own stacks: add it to the App, not to a Stack")
        # Strong references: the data stack cannot drop an export the service still uses.
        self.node.set_context(_REFERENCE_STRENGTH, "strong")
        config = props.settings
        name = props.name
        if props.task_code is not None:
            check_task_modules(props.task_code, props.task_modules)
        build_dir = props.build_dir or (props.task_code or Path.cwd()) / ".asyncz" / "cdk-build"
        requirements = [RUNTIME_REQUIREMENTS]
        if props.task_requirements is not None:
            requirements.append(props.task_requirements)
        layer_dir = cached_layer(requirements, config.architecture, build_dir)
        code_dir = stage_code(
            build_dir,
            package_excludes=CODE_EXCLUDES,
            task_code=props.task_code,
            task_excludes=props.task_code_excludes,
        )

        self.data_stack: DataStack | None = None
        if config.in_vpc:
            self.data_stack = DataStack(
                self, "Data", name=name, config=config, stack_name=f"{name}-Data"
            )
            acknowledge_data(self.data_stack, config)
            data = self.data_stack.data_access()
        else:
            assert config.database_url and config.redis_url  # StageConfig checks a local stage
            data = local_data_access(database_url=config.database_url, redis_url=config.redis_url)
        self.service_stack = ServiceStack(
            self,
            "Service",
            name=name,
            config=config,
            data=data,
            code_dir=code_dir,
            layer_dir=layer_dir,
            task_modules=props.task_modules,
            stack_name=f"{name}-Service",
        )
        acknowledge_service(self.service_stack, config)
        for key, value in (("project", "asyncz"), ("deployment", name), ("stage", config.stage)):
            cdk.Tags.of(self).add(key, value, exclude_resource_types=_UNTAGGABLE)

        functions = self.service_stack.functions
        # Grant the user's tasks what they need on these (e.g. bucket.grant_read(worker)).
        self.worker: lambda_.Function = functions.worker
        self.api: lambda_.Function = functions.api
        self.api_url: str = self.service_stack.api.url
        self.code_dir = code_dir
        self.layer_dir = layer_dir
