"""AsyncZ Serverless: a durable background-job queue on AWS Lambda."""

__version__ = "0.1.0"
