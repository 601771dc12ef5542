"""The settings of each concern (:class:`asyncz.settings.Settings` inherits them all): field
``foo`` of any group is read from ``ASYNCZ_FOO``, validated where the group declares it."""

from __future__ import annotations

import ipaddress
from typing import Literal

from pydantic import BaseModel, Field, field_validator


class DatabaseSettings(BaseModel):
    """PostgreSQL: where it is, how to log in, the pool and the time bounds."""

    # a URL locally, or a Secrets Manager secret (+ proxy host) in AWS.
    database_url: str | None = None
    database_secret_arn: str | None = None
    # Only the migration step: the runtime role's secret, whose password it provisions.
    runtime_database_secret_arn: str | None = None
    database_host: str | None = None  # e.g. the RDS Proxy endpoint; overrides the secret's host
    database_name: str = "asyncz"
    # IAM auth (lean, serverless profiles): connect as database_user at database_host with
    # a token signed in the function; database_password only for the migration step there.
    database_iam_auth: bool = False
    database_user: str | None = None
    database_password: str | None = None
    database_port: int = Field(default=5432, ge=1, le=65535)
    # Migration step: let the runtime role log in with IAM tokens (GRANT rds_iam).
    runtime_role_iam: bool = False
    database_sslmode: str = "prefer"
    db_pool_min: int = Field(default=1, ge=0)
    db_pool_max: int = Field(default=2, ge=1)
    # An idle pooled connection (beyond db_pool_min) is closed after this long: with a
    # minimum of 0, a paused Aurora Serverless database is let pause (serverless profile).
    db_pool_max_idle_seconds: float = Field(default=600.0, gt=0)
    db_connect_timeout_seconds: float = Field(default=5.0, gt=0)
    # Bound on one store call (pool wait + statement): a frozen server must not hang callers.
    db_query_timeout_seconds: float = Field(default=10.0, gt=0)
    # Server-side bound on each statement: PostgreSQL cancels it and rolls it back, so the
    # caller knows nothing changed (a 504 query_timeout for a read). Sent at connect as a
    # startup parameter, kept under db_query_timeout_seconds so the server speaks first;
    # 0 = none. Behind RDS Proxy the stack sends none and the migration step makes it the
    # runtime role's default instead.
    db_statement_timeout_seconds: float = Field(default=5.0, ge=0)
    # RDS Proxy pins a session that uses server-side prepared statements: off behind it.
    db_prepared_statements: bool = True

    @property
    def statement_timeout_seconds(self) -> float:
        """The server-side statement bound in effect: at most 80% of the client-side one."""
        if not self.db_statement_timeout_seconds:
            return 0.0
        return min(self.db_statement_timeout_seconds, 0.8 * self.db_query_timeout_seconds)

    @property
    def _database_login(self) -> bool:
        """Host and user given, with an IAM token or a password to log in with."""
        return bool(
            self.database_host
            and self.database_user
            and (self.database_iam_auth or self.database_password)
        )


class RedisSettings(BaseModel):
    """Redis: where it is, how to log in, its key prefix."""

    # a URL (rediss:// in AWS) and optionally an AUTH token from Secrets Manager.
    redis_url: str | None = None
    redis_auth_secret_arn: str | None = None
    # IAM auth to ElastiCache: the user and the replication group (or serverless cache)
    # the token is signed for.
    redis_iam_user: str | None = None
    redis_cache_name: str | None = None
    redis_serverless: bool = False
    redis_prefix: str = "asyncz"
    redis_socket_timeout_seconds: float = Field(default=5.0, gt=0)


class JobSettings(BaseModel):
    """A job's defaults and bounds, its retry policy, and the queues and task modules."""

    # (exponential backoff with full jitter).
    backoff_base_seconds: float = Field(default=1.0, gt=0)
    backoff_max_seconds: float = Field(default=30.0, gt=0)

    default_max_retries: int = Field(default=3, ge=0, le=20)
    default_timeout_seconds: int = Field(default=300, ge=1)
    max_timeout_seconds: int = Field(default=840, ge=1)
    max_payload_bytes: int = Field(default=256 * 1024, ge=1)
    # A larger result fails its attempt: GET /jobs/{id} must fit a 6 MB Lambda response.
    max_result_bytes: int = Field(default=1024 * 1024, ge=1, le=4 * 1024 * 1024)
    # A durable task's stored steps (docs/durable.md): one result is bounded by
    # max_result_bytes, a job's steps by number and by their results' total (an attempt
    # reads them all back into memory when it starts).
    max_steps_per_job: int = Field(default=1000, ge=1, le=100_000)
    max_step_bytes_per_job: int = Field(default=16 * 1024 * 1024, ge=1, le=256 * 1024 * 1024)
    # The deployment's public base URL (the construct sets it): a callback's URL is
    # <public_url>/callbacks/<token>. Unset: cb.url is None (cb.token still works).
    public_url: str | None = None
    # Spawned jobs (docs/durable.md, "Spawned jobs"): how deep spawners may nest (a job
    # submitted from outside is at depth 0), and the bytes of results one gather returns.
    max_spawn_depth: int = Field(default=5, ge=1, le=100)
    max_gather_bytes: int = Field(default=4 * 1024 * 1024, ge=1, le=64 * 1024 * 1024)
    queues: str = "default"  # comma-separated queues a worker polls
    task_modules: str = ""  # comma-separated modules imported at worker start

    @property
    def queue_list(self) -> list[str]:
        return [q.strip() for q in self.queues.split(",") if q.strip()] or ["default"]

    @property
    def task_module_list(self) -> list[str]:
        return [m.strip() for m in self.task_modules.split(",") if m.strip()]


class LimitSettings(BaseModel):
    """The deployment's limits over the tasks' own (``ASYNCZ_TASK_LIMITS``)."""

    # Per-deployment limits over the tasks' own: {"call_llm": {"concurrency": 3}} (JSON).
    task_limits: str = ""


class WorkerSettings(BaseModel):
    """The worker: how many attempts at once, its heartbeats, leases and polling."""

    worker_concurrency: int = Field(default=10, ge=1)
    heartbeat_seconds: float = Field(default=10.0, gt=0)
    lease_timeout_seconds: float = Field(default=60.0, gt=0)
    worker_safety_margin_seconds: float = Field(default=5.0, ge=0)
    worker_poll_seconds: float = Field(default=5.0, gt=0, le=25)
    worker_presence_ttl_seconds: int = Field(default=30, ge=1)
    worker_idle_exit_seconds: float = Field(default=30.0, ge=0)  # 0 = never leave early
    worker_function_name: str | None = None
    artifact_dir: str = "/tmp/asyncz-artifacts"  # noqa: S108 - Lambda's only writable dir


class FleetSettings(BaseModel):
    """The fleet controller and scale-out."""

    fleet_min_workers: int = Field(default=0, ge=0)
    fleet_max_workers: int = Field(default=10, ge=0)
    fleet_jobs_per_worker: int = Field(default=200, ge=1)
    # Scale-out between fleet ticks: the api checks the backlog at most this often (per
    # sandbox) and starts the missing workers at once (one decision per interval across
    # sandboxes). 0 = only wake one worker when none is alive (the fleet tick does the rest).
    scale_out_seconds: float = Field(default=1.0, ge=0)


class RecoverySettings(BaseModel):
    """The recovery sweep, the cascades it finishes, and retention."""

    recovery_batch_size: int = Field(default=500, ge=1)
    recovery_max_batches: int = Field(default=20, ge=1)
    # Cascades (settling a parent's children, cancel's cascade, replay's heal) run in pages
    # of this many children, each its own statement. A call (the api's cancel or replay, a
    # worker's completion) works on one for at most cascade_seconds, then leaves the rest to
    # the recovery sweep (the api answers 202 with cascade_pending); the sweep itself works on
    # cascades for at most recovery_cascade_seconds a run.
    cascade_page_size: int = Field(default=1000, ge=1, le=100_000)
    cascade_seconds: float = Field(default=2.0, ge=0)
    recovery_cascade_seconds: float = Field(default=20.0, gt=0)

    # Retention (by the recovery sweep; 0 keeps forever). An idempotency key lives as
    # long as its job.
    retain_finished_seconds: int = Field(default=7 * 86400, ge=0)  # completed, cancelled
    retain_dead_seconds: int = Field(default=30 * 86400, ge=0)
    retain_audit_seconds: int = Field(default=365 * 86400, ge=0)  # the operator audit trail
    # Events (POST /events): kept this long, which bounds how far back a durable task's
    # wait_for_event looks for one sent before it began waiting.
    retain_events_seconds: int = Field(default=7 * 86400, ge=0)
    # Each run deletes in batches until nothing is left or this long has passed (per kind).
    retention_seconds_per_run: float = Field(default=20.0, gt=0)


class OutboxSettings(BaseModel):
    """Lifecycle events (docs/events.md): the outbox's publisher (the events function), what
    wakes it, and its sinks."""

    # The events function, async-invoked by a process that committed ends (a worker, the
    # api, recovery) at most once per outbox_wake_seconds per sandbox. Unset: nothing wakes
    # it between its minute's sweeps.
    events_function_name: str | None = None
    outbox_wake_seconds: float = Field(default=1.0, ge=0)
    outbox_page_size: int = Field(default=100, ge=1, le=1000)
    # One run of the publisher (its sinks' own work included) ends after this long.
    outbox_run_seconds: float = Field(default=50.0, gt=0)
    # >0: a completed event carries the job's result when its JSON is at most this long
    # (EventBridge takes 256 KB an entry, the envelope included).
    outbox_result_bytes: int = Field(default=0, ge=0, le=200 * 1024)
    # EventBridge: the bus's name or ARN ("default": the account's default bus). Unset: none.
    event_bus: str | None = None
    event_source: str = "asyncz"
    # Each event as a line on stdout (asyncz dev, where no bus is configured).
    console_events: bool = False
    # An event nothing published for this long is dropped (0 keeps it forever).
    retain_outbox_seconds: int = Field(default=7 * 86400, ge=0)
    # Read by whatever migrates: "off" disables the triggers that write the outbox (a stage
    # with no sink, where every row would only be forgotten); "on" enables them again.
    outbox: Literal["on", "off"] = "on"


class ApiSettings(BaseModel):
    """The api: its keys, waking a worker, the gateway in front and the cost estimate."""

    api_key_hashes: str = ""  # comma-separated SHA-256 hex digests of accepted API keys
    api_keys_secret_arn: str | None = None  # secret: {"api_key": "..."} (see connections.py)
    # Plain keys, comma-separated: where no Secrets Manager endpoint exists (lean,
    # serverless), a deploy-time dynamic reference to the same secret.
    api_keys: str = ""
    wake_worker: bool = True
    # POST /callbacks/* needs no key (the token is the credential): this rate, counted for
    # the whole deployment, bounds them (requests/period, as a key's rate).
    callback_rate: str = "100/s"

    # The gateway in front of the api (set by the construct): prices GET /stats' estimate.
    api_front: Literal["rest", "http"] = "rest"
    # ...computed at most this often per sandbox (its day is a range scan of a day's rows)
    cost_cache_seconds: float = Field(default=60.0, ge=0)

    @property
    def api_key_hash_list(self) -> list[str]:
        return [h.strip().lower() for h in self.api_key_hashes.split(",") if h.strip()]


class ObservabilitySettings(BaseModel):
    """Metrics and gauges, and recovery's idle skip."""

    metrics_namespace: str = "AsyncZ"
    publish_gauges: bool = True  # recovery's PutMetricData of DLQDepth etc.
    gauges_as_emf: bool = False  # log the gauges as EMF lines instead (no CloudWatch endpoint)
    task_metrics: bool = True  # each worker's per-task EMF figures, once a minute (operate.md)
    # >0: recovery skips Postgres while Redis shows no work since the last run that found
    # Postgres idle, and checks Postgres at least this often anyway (serverless profile).
    recovery_idle_check_seconds: float = Field(default=0.0, ge=0)


class WebhookSettings(BaseModel):
    """Webhooks (docs/events.md): who may be called, how often again, for how long."""

    # the events function delivers webhooks (its webhook sink); off: no event makes a
    # delivery, and none is sent
    webhooks: bool = False

    # KMS key (id, ARN or alias) that encrypts signing secrets; none: AES-GCM under the
    # deployment's own key in asyncz_secrets (asyncz dev, tests)
    webhook_kms_key_id: str | None = None
    # http:// URLs are refused unless this is on (asyncz dev turns it on)
    webhook_allow_http: bool = False
    # Networks a webhook may reach besides public addresses, comma-separated CIDRs (asyncz
    # dev: loopback); every other private, loopback, link-local, multicast or reserved
    # address is refused, at registration and at every delivery
    webhook_allow_networks: str = ""
    # retries: full jitter under base * 2**(attempt-1), capped; the first within seconds
    webhook_retry_base_seconds: float = Field(default=2.0, gt=0)
    webhook_retry_max_seconds: float = Field(default=3600.0, gt=0)
    # a delivery not accepted within this long after its event is marked failed (3 days)
    webhook_retry_for_seconds: float = Field(default=259_200.0, gt=0)
    webhook_timeout_seconds: float = Field(default=5.0, gt=0)  # one request, connect to body
    # requests in flight to one webhook at once: a slow endpoint holds only its own
    webhook_per_endpoint_in_flight: int = Field(default=4, ge=1, le=100)
    webhook_page_size: int = Field(default=100, ge=1, le=1000)  # deliveries claimed at once
    # how long the replaced secret signs beside the new one after a rotation (1 day)
    webhook_secret_overlap_seconds: float = Field(default=86_400.0, ge=0)
    webhook_max_count: int = Field(default=100, ge=1, le=10_000)  # live webhooks at most
    # a delivery (and its attempts) is kept this long after it ended (0: forever)
    retain_webhook_deliveries_seconds: int = Field(default=30 * 86400, ge=0)

    @field_validator("webhook_allow_networks")
    @classmethod
    def _networks(cls, value: str) -> str:
        """A bad CIDR fails at cold start, not at a registration."""
        for part in value.split(","):
            if part.strip():
                ipaddress.ip_network(part.strip(), strict=False)  # ValueError names it
        return value
