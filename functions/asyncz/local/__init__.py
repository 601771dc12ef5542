"""The no-cloud local runner: embedded servers, an API Gateway front and Lambda-like sandboxes."""
