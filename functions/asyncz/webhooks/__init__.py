"""Webhooks: a sink of the event pump that POSTs each lifecycle event, signed, to the URLs
operators register (docs/events.md, "Webhooks")."""
