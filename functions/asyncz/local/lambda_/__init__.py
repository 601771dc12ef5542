"""The local Lambda: warm sandboxes, the runtime loop inside each, the Invoke API, and the
worker fleet."""
