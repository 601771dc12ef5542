"""A LocalStack Lambda runtime executor that runs each function as a host process.

LocalStack's community edition runs Lambda functions in Docker containers. Where no
Docker engine exists, this executor (``LAMBDA_RUNTIME_EXECUTOR=hostprocess``) starts one
host Python process per execution environment instead: the function's code and its
layers on ``sys.path``, the function's environment, the handler on the main thread, the
function timeout enforced by killing the process, errors shaped as Lambda shapes them.
"""
