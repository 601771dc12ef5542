"""The no-cloud local runner (`asyncz dev`), filed by the AWS service it stands in for:
apigateway/, lambda_/, eventbridge.py, servers/ (PostgreSQL and Redis), and the
supervisor that starts them all."""
