"""A user's CDK app: the AsyncZ job queue running this folder's tasks.

cdk deploy --all                      # deployment "sizes" (cdk.json), stage aws
cdk deploy --all -c name=sizes-dev    # a second deployment beside it
"""

from pathlib import Path

import aws_cdk as cdk

from asyncz_cdk import AsyncZ, AsyncZProps, deployment_name, settings_from_context

HERE = Path(__file__).resolve().parent

app = cdk.App()
name = deployment_name(app)
AsyncZ(
    app,
    name,
    AsyncZProps(
        name=name,
        settings=settings_from_context(app),  # -c stage=local, -c architecture=arm64, ...
        task_code=HERE,  # shipped beside the asyncz package (cdk.out, .venv... left out)
        task_modules=["tasks"],  # ASYNCZ_TASK_MODULES
        task_requirements=HERE / "requirements.txt",  # into the dependency layer
    ),
)
app.synth()
