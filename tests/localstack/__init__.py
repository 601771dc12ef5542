"""Tests against the `local` stage deployed in LocalStack (localstack/run-tests.sh)."""
