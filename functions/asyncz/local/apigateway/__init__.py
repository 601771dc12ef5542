"""The local API Gateway: the HTTP front, REST proxy events, the api sandboxes behind it."""
