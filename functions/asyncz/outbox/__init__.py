"""Lifecycle events of jobs: the outbox rows a trigger writes (migration 0023), their
CloudEvents envelope, the sinks that publish them, and the events function that drains it."""
