"""plux entry point: LocalStack looks executors up in ``localstack.lambda.runtime_executor``."""

from localstack.services.lambda_.invocation.plugins import RuntimeExecutorPlugin


class HostProcessRuntimeExecutorPlugin(RuntimeExecutorPlugin):
    name = "hostprocess"

    def load(self, *args, **kwargs):
        from asyncz_localstack_executor.executor import HostProcessRuntimeExecutor

        return HostProcessRuntimeExecutor
