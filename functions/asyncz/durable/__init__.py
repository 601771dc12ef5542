"""Durable tasks (docs/durable.md): steps stored through the lease fence and replayed on
later attempts, with the replay checked against the stored history."""
