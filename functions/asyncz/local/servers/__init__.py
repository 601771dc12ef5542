"""PostgreSQL and Redis for the local runner: the URLs given, or embedded servers."""
