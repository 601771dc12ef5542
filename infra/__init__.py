"""AWS CDK app for AsyncZ Serverless (entry point: ``infra/app.py``)."""
