"""The benchmarks' raw loops run the product's own statements with parameters they build
themselves: each must pass every parameter its statement names, and no other (a statement
that gains one, as the lean claim's ``nonce``, would otherwise break the benchmark at its
first call, not in a test)."""

from __future__ import annotations

import re

import pytest

from asyncz.store.queries import QUERIES
from tests.perf import bench_processing as bench

pytestmark = pytest.mark.unit

_PLACEHOLDER = re.compile(r"%\((\w+)\)s")
LEASE = {"id": "0b6f0b39-d1a4-4b0e-9a6e-0d3d8e5e2f10", "lease_token": "t", "payload": {"n": 1}}


@pytest.mark.parametrize(
    ("statement", "params"),
    [
        ("claim_jobs", bench.claim_params([LEASE["id"]], "raw:1")),
        ("complete_job", bench.complete_params(LEASE)),
        ("complete_jobs", bench.complete_many_params([LEASE])),
    ],
)
def test_the_raw_loop_passes_each_statement_exactly_the_parameters_it_names(
    statement: str, params: dict[str, object]
) -> None:
    assert set(params) == set(_PLACEHOLDER.findall(QUERIES[statement]))


def test_a_claim_is_fenced_by_a_fresh_nonce_each_time() -> None:
    first, second = (bench.claim_params(["x"], "raw:1")["nonce"] for _ in range(2))
    assert first != second
