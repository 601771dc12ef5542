"""Apply the SQL migrations during deployment, before the API takes traffic."""

from __future__ import annotations

from collections.abc import Sequence

from aws_cdk import Duration, triggers
from constructs import Construct

from asyncz_cdk.constructs.function_defaults import DataAccess, FunctionDefaults, python_function


class Migration(Construct):
    """A function running ``asyncz.migrate`` and a CDK trigger that invokes it.

    The trigger re-runs whenever the function's code or configuration changes (so
    every deploy that ships new migrations applies them); it runs after the data
    stores exist and before ``run_before``. A failing migration fails the deploy.
    ``outbox`` (the stage has a sink for the lifecycle events) leaves the outbox's
    triggers on; without one they are off and no end of a job writes a row. Turning it
    on changes the function's environment, so that deploy's run switches them.
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        defaults: FunctionDefaults,
        data: DataAccess,
        run_before: Sequence[Construct],
        outbox: bool,
        run_after: Sequence[Construct] = (),
    ) -> None:
        super().__init__(scope, construct_id)
        environment = dict(data.migration_environment or data.database_environment)
        environment["ASYNCZ_OUTBOX"] = "on" if outbox else "off"
        self.function = python_function(
            self,
            "Migrate",
            defaults=defaults,
            handler="asyncz.migrate.handler.handler",
            description="AsyncZ schema migrations (forward-only, run on deploy)",
            environment=environment,
            memory_size=256,
            timeout=Duration.minutes(5),
        )
        data.grant_migration(self.function)
        self.trigger = triggers.Trigger(
            self,
            "Run",
            handler=self.function,
            timeout=Duration.minutes(5),
            execute_on_handler_change=True,
            execute_after=list(run_after),
            execute_before=list(run_before),
        )
