"""Typed settings, parsed once per sandbox from ``ASYNCZ_*`` environment variables.

Every Lambda reads the same model; :meth:`Settings.require_for` checks, at cold start,
that the variables a given function needs are present, so a missing one fails loudly
before any request is served.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Literal

from pydantic import Field, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from asyncz.tasks.limits import parse_overrides

FunctionName = Literal["api", "worker", "fleet", "recovery", "migrate"]


class SettingsError(ValueError):
    """The environment does not configure what a function needs."""


class Settings(BaseSettings):
    """All configuration of AsyncZ; field ``foo`` is read from ``ASYNCZ_FOO``."""

    model_config = SettingsConfigDict(env_prefix="ASYNCZ_", extra="ignore", frozen=True)

    stage: str = "local"

    # --- PostgreSQL: a URL locally, or a Secrets Manager secret (+ proxy host) in AWS.
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

    # --- Redis: a URL (rediss:// in AWS) and optionally an AUTH token from Secrets Manager.
    redis_url: str | None = None
    redis_auth_secret_arn: str | None = None
    # IAM auth to ElastiCache: the user and the replication group (or serverless cache)
    # the token is signed for.
    redis_iam_user: str | None = None
    redis_cache_name: str | None = None
    redis_serverless: bool = False
    redis_prefix: str = "asyncz"
    redis_socket_timeout_seconds: float = Field(default=5.0, gt=0)

    # --- Retry policy (exponential backoff with full jitter).
    backoff_base_seconds: float = Field(default=1.0, gt=0)
    backoff_max_seconds: float = Field(default=30.0, gt=0)

    # --- Jobs.
    default_max_retries: int = Field(default=3, ge=0, le=20)
    default_timeout_seconds: int = Field(default=300, ge=1)
    max_timeout_seconds: int = Field(default=840, ge=1)
    max_payload_bytes: int = Field(default=256 * 1024, ge=1)
    # A larger result fails its attempt: GET /jobs/{id} must fit a 6 MB Lambda response.
    max_result_bytes: int = Field(default=1024 * 1024, ge=1, le=4 * 1024 * 1024)
    queues: str = "default"  # comma-separated queues a worker polls
    task_modules: str = ""  # comma-separated modules imported at worker start
    # Per-deployment limits over the tasks' own: {"call_llm": {"concurrency": 3}} (JSON).
    task_limits: str = ""

    # --- Worker.
    worker_concurrency: int = Field(default=10, ge=1)
    heartbeat_seconds: float = Field(default=10.0, gt=0)
    lease_timeout_seconds: float = Field(default=60.0, gt=0)
    worker_safety_margin_seconds: float = Field(default=5.0, ge=0)
    worker_poll_seconds: float = Field(default=5.0, gt=0, le=25)
    worker_presence_ttl_seconds: int = Field(default=30, ge=1)
    worker_idle_exit_seconds: float = Field(default=30.0, ge=0)  # 0 = never leave early
    worker_function_name: str | None = None
    artifact_dir: str = "/tmp/asyncz-artifacts"  # noqa: S108 - Lambda's only writable dir

    # The gateway in front of the api (set by the construct): prices GET /stats' estimate.
    api_front: Literal["rest", "http"] = "rest"
    # ...computed at most this often per sandbox (its day is a range scan of a day's rows)
    cost_cache_seconds: float = Field(default=60.0, ge=0)

    # --- Fleet controller.
    fleet_min_workers: int = Field(default=0, ge=0)
    fleet_max_workers: int = Field(default=10, ge=0)
    fleet_jobs_per_worker: int = Field(default=200, ge=1)
    # Scale-out between fleet ticks: the api checks the backlog at most this often (per
    # sandbox) and starts the missing workers at once (one decision per interval across
    # sandboxes). 0 = only wake one worker when none is alive (the fleet tick does the rest).
    scale_out_seconds: float = Field(default=1.0, ge=0)

    # --- Recovery.
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

    # --- Retention (by the recovery sweep; 0 keeps forever). An idempotency key lives as
    # long as its job.
    retain_finished_seconds: int = Field(default=7 * 86400, ge=0)  # completed, cancelled
    retain_dead_seconds: int = Field(default=30 * 86400, ge=0)
    retain_audit_seconds: int = Field(default=365 * 86400, ge=0)  # the operator audit trail
    # Each run deletes in batches until nothing is left or this long has passed (per kind).
    retention_seconds_per_run: float = Field(default=20.0, gt=0)

    # --- API.
    api_key_hashes: str = ""  # comma-separated SHA-256 hex digests of accepted API keys
    api_keys_secret_arn: str | None = None  # secret: {"api_key": "..."} (see connections.py)
    # Plain keys, comma-separated: where no Secrets Manager endpoint exists (lean,
    # serverless), a deploy-time dynamic reference to the same secret.
    api_keys: str = ""
    wake_worker: bool = True

    # --- Observability.
    metrics_namespace: str = "AsyncZ"
    publish_gauges: bool = True  # recovery's PutMetricData of DLQDepth etc.
    gauges_as_emf: bool = False  # log the gauges as EMF lines instead (no CloudWatch endpoint)
    task_metrics: bool = True  # each worker's per-task EMF figures, once a minute (operate.md)
    # >0: recovery skips Postgres while Redis shows no work since the last run that found
    # Postgres idle, and checks Postgres at least this often anyway (serverless profile).
    recovery_idle_check_seconds: float = Field(default=0.0, ge=0)
    aws_region: str | None = Field(default=None, validation_alias="AWS_REGION")

    @model_validator(mode="after")
    def _check_ranges(self) -> Settings:
        parse_overrides(self.task_limits)  # a bad ASYNCZ_TASK_LIMITS fails at cold start
        if self.backoff_max_seconds < self.backoff_base_seconds:
            raise ValueError("ASYNCZ_BACKOFF_MAX_SECONDS must be >= ASYNCZ_BACKOFF_BASE_SECONDS")
        if self.db_pool_max < self.db_pool_min:
            raise ValueError("ASYNCZ_DB_POOL_MAX must be >= ASYNCZ_DB_POOL_MIN")
        if self.fleet_max_workers < self.fleet_min_workers:
            raise ValueError("ASYNCZ_FLEET_MAX_WORKERS must be >= ASYNCZ_FLEET_MIN_WORKERS")
        if self.default_timeout_seconds > self.max_timeout_seconds:
            raise ValueError("ASYNCZ_DEFAULT_TIMEOUT_SECONDS must be <= ASYNCZ_MAX_TIMEOUT_SECONDS")
        return self

    @property
    def statement_timeout_seconds(self) -> float:
        """The server-side statement bound in effect: at most 80% of the client-side one."""
        if not self.db_statement_timeout_seconds:
            return 0.0
        return min(self.db_statement_timeout_seconds, 0.8 * self.db_query_timeout_seconds)

    @property
    def queue_list(self) -> list[str]:
        return [q.strip() for q in self.queues.split(",") if q.strip()] or ["default"]

    @property
    def task_module_list(self) -> list[str]:
        return [m.strip() for m in self.task_modules.split(",") if m.strip()]

    @property
    def api_key_hash_list(self) -> list[str]:
        return [h.strip().lower() for h in self.api_key_hashes.split(",") if h.strip()]

    @property
    def _database_login(self) -> bool:
        """Host and user given, with an IAM token or a password to log in with."""
        return bool(
            self.database_host
            and self.database_user
            and (self.database_iam_auth or self.database_password)
        )

    def require_for(self, function: FunctionName) -> Settings:
        """Raise :class:`SettingsError` naming every variable ``function`` needs but lacks."""
        missing: list[str] = []
        if function != "fleet" and not (
            self.database_url or self.database_secret_arn or self._database_login
        ):
            missing.append(
                "ASYNCZ_DATABASE_URL, ASYNCZ_DATABASE_SECRET_ARN or ASYNCZ_DATABASE_HOST with "
                "ASYNCZ_DATABASE_USER (and ASYNCZ_DATABASE_IAM_AUTH or a password)"
            )
        if function != "migrate" and self.redis_iam_user and not self.redis_cache_name:
            missing.append("ASYNCZ_REDIS_CACHE_NAME (for ASYNCZ_REDIS_IAM_USER)")
        if function != "migrate" and not self.redis_url:
            missing.append("ASYNCZ_REDIS_URL")
        if function == "fleet" and not self.worker_function_name:
            missing.append("ASYNCZ_WORKER_FUNCTION_NAME")
        if function == "api" and not (
            self.api_key_hash_list or self.api_keys_secret_arn or self.api_keys.strip()
        ):
            missing.append("ASYNCZ_API_KEY_HASHES, ASYNCZ_API_KEYS or ASYNCZ_API_KEYS_SECRET_ARN")
        if missing:
            raise SettingsError(f"{function} is not configured: set {', '.join(missing)}")
        return self


@lru_cache(maxsize=1)
def get_settings() -> Settings:
    """The sandbox's settings, read from the environment once."""
    return Settings()
