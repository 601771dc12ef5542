"""Each pytest-xdist worker tests on a database and Redis dbs of its own, so two workers never
empty or flush each other's data (tests/support/databases.py)."""

from __future__ import annotations

import psycopg
import pytest

from tests.support import databases

pytestmark = pytest.mark.unit

BASE_DB = "postgresql://postgres@127.0.0.1:5432/asyncz_test"


def redis_dbs_of(monkeypatch: pytest.MonkeyPatch, worker: str | None) -> set[int]:
    if worker is None:
        monkeypatch.delenv("PYTEST_XDIST_WORKER", raising=False)
    else:
        monkeypatch.setenv("PYTEST_XDIST_WORKER", worker)
    urls = [databases.redis_url()]
    urls += [databases.sibling_redis_url(i) for i in range(1, databases.REDIS_DBS_PER_RUN)]
    return {int(url.rsplit("/", 1)[1]) for url in urls}


@pytest.mark.parametrize("base_db", [0, 1, 5, 15])
def test_the_main_run_and_two_workers_use_disjoint_redis_dbs(
    monkeypatch: pytest.MonkeyPatch, base_db: int
) -> None:
    monkeypatch.setenv("ASYNCZ_TEST_REDIS_URL", f"redis://127.0.0.1:6379/{base_db}")
    blocks = [redis_dbs_of(monkeypatch, w) for w in (None, "gw0", "gw1")]
    assert all(len(b) == databases.REDIS_DBS_PER_RUN for b in blocks)
    assert len(set().union(*blocks)) == 3 * databases.REDIS_DBS_PER_RUN


def test_a_third_worker_is_refused_rather_than_sharing_a_redis_db(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("PYTEST_XDIST_WORKER", "gw2")
    with pytest.raises(RuntimeError, match="no Redis dbs of its own"):
        databases.redis_url()


def test_each_worker_has_its_own_database_and_siblings(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ASYNCZ_TEST_DATABASE_URL", BASE_DB)
    names = {}
    for worker in (None, "gw0", "gw1"):
        if worker is None:
            monkeypatch.delenv("PYTEST_XDIST_WORKER", raising=False)
        else:
            monkeypatch.setenv("PYTEST_XDIST_WORKER", worker)
        urls = (databases.database_url(), databases.sibling_url("dev"))
        names[worker] = tuple(psycopg.conninfo.conninfo_to_dict(u)["dbname"] for u in urls)
    assert names[None] == ("asyncz_test", "asyncz_test_dev")
    assert names["gw1"] == ("asyncz_test_gw1", "asyncz_test_gw1_dev")
    assert len({name for pair in names.values() for name in pair}) == 6
