"""The unit prices and measured quantities behind the cost estimate of ``GET /stats``.

AWS's on-demand list prices in us-east-1, first tiers, as recorded on :data:`PRICED_ON`
(docs/cost.md says where each comes from; check them, and your region, before relying on
the estimate). The per-request and per-attempt quantities are ``bench_cost``'s
(BENCHMARKS.md, :data:`MEASURED_ON`). Change them here, and only here.
"""

from __future__ import annotations

PRICED_ON = "2026-12-04"
PRICE_SOURCE = (
    "AWS on-demand list prices, us-east-1, first tiers: aws.amazon.com/lambda/pricing, "
    "/api-gateway/pricing, /cloudwatch/pricing"
)
MEASURED_ON = "2026-12-05 (bench_cost, 1,000 echo jobs)"

LAMBDA_PER_REQUEST = 0.20 / 1e6
LAMBDA_PER_GB_SECOND = {"x86_64": 0.0000166667, "arm64": 0.0000133334}
GATEWAY_PER_REQUEST = {"rest": 3.50 / 1e6, "http": 1.00 / 1e6}
LOGS_PER_BYTE = 0.50 / 1e9  # CloudWatch Logs ingestion, $0.50 per GB

FUNCTION_MEMORY_GB = 1.0  # the api's and the worker's 1,024 MB
API_MS_PER_REQUEST = 22.0  # a submit's api invocation, billed ms (the louder of two runs: 11–22)
WORKER_OVERHEAD_MS_PER_ATTEMPT = 16.0  # claim, finish, polls and idle tail, per attempt
LOG_BYTES_PER_REQUEST = 115  # the HTTP API's access line
LOG_BYTES_PER_ATTEMPT = 115  # the outcome line and the attempt's metric values
