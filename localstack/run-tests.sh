#!/usr/bin/env bash
# The LocalStack tier in one command: start -> deploy -> pytest tests/localstack -> stop.
#
#   localstack/run-tests.sh [pytest args...]
#
# Stops LocalStack whatever happens (trap), prints the time of each phase, and exits
# non-zero, loudly, if any phase fails; it never skips (pytest collecting no test fails).
set -uo pipefail
source "$(dirname "$0")/env.sh"
cd "$LS_REPO"

# One tier run per checkout at a time (they share port 4566, the database and .work).
mkdir -p "$LS_WORK"
exec 9>"$LS_WORK/tier.lock"
if ! flock -n 9; then
    ls_log "another LocalStack tier run holds $LS_WORK/tier.lock; waiting (up to 15 min)"
    flock -w 900 9 || ls_die "the other LocalStack tier run did not finish within 15 min"
fi

declare -a phases=()
t_all=$SECONDS
failed=""

timed() {  # name command...
    local name="$1"; shift
    local t=$SECONDS
    ls_log "=== $name"
    "$@"
    local rc=$?
    phases+=("$(printf '%-8s %4d s  %s' "$name" $((SECONDS - t)) "$( ((rc == 0)) && echo ok || echo "FAILED (exit $rc)")")")
    return $rc
}

finish() {
    local rc=$?
    trap - EXIT INT TERM
    timed stop "$LS_DIR/stop.sh" || { failed="${failed:-stop}"; rc=1; }
    echo
    echo "LocalStack tier ($(cat "$LS_MODEFILE" 2>/dev/null || echo host) mode), $((SECONDS - t_all)) s in all:"
    printf '  %s\n' "${phases[@]}"
    if [[ -n "$failed" ]] || ((rc != 0)); then
        echo
        echo "LOCALSTACK TIER FAILED at: ${failed:-exit $rc}   (logs: $LS_WORK/*.log, $LS_WORK/logs/lambda/)"
        exit 1
    fi
    echo "LocalStack tier passed."
}
trap finish EXIT
trap 'failed="${failed:-interrupted}"; exit 130' INT TERM

# The project venv runs the CDK app (cdk.json) and pytest; the tier does not build it.
check_project_venv() {
    "$LS_REPO/.venv/bin/python" -c 'import importlib.util as u, sys
sys.exit(any(u.find_spec(m) is None for m in ("aws_cdk", "boto3", "httpx", "pytest")))' \
        2>/dev/null && return 0
    echo "[localstack] the project venv .venv (Python 3.12, extras dev + infra) is missing:" >&2
    echo "    python3.12 -m venv .venv && .venv/bin/pip install -e '.[dev,infra]'" >&2
    return 1
}
timed check check_project_venv || { failed=check; exit 1; }
# A LocalStack left over from an earlier run would carry its stack along: start clean.
if [[ -f "$LS_MODEFILE" ]]; then
    timed stop-old "$LS_DIR/stop.sh" || { failed=stop-old; exit 1; }
fi
timed start "$LS_DIR/start.sh" || { failed=start; exit 1; }
# Redis dbs 1 and 3 places after the test db, in the block of the tiers that run without
# xdist (tests/support/databases.py; the browser tier's is 2 places on): scripts/test runs
# this tier beside the integration tier, whose xdist workers own the blocks after it.
redis_base="${ASYNCZ_TEST_REDIS_URL:-redis://127.0.0.1:6379/1}"
redis_base="${redis_base##*/}"
[[ "$redis_base" =~ ^[0-9]+$ ]] || redis_base=0
export ASYNCZ_LS_REDIS_DB="${ASYNCZ_LS_REDIS_DB:-$(((redis_base + 1) % 16))}"
timed deploy "$LS_DIR/deploy.sh" --fresh || { failed=deploy; exit 1; }
# A user's project beside it (tests/localstack/test_example.py): its own name, database
# and Redis db, so the two deployments share nothing.
deploy_example() {
    ASYNCZ_LS_APP_DIR="$LS_REPO/examples/sizes" ASYNCZ_LS_NAME=sizes \
    ASYNCZ_LS_DB_NAME=asyncz_localstack_example ASYNCZ_LS_REDIS_DB=$(((redis_base + 3) % 16)) \
    ASYNCZ_LS_OUTPUTS="$LS_WORK/example-outputs.json" "$LS_DIR/deploy.sh" --fresh
}
timed example deploy_example || { failed=example; exit 1; }

run_pytest() {
    ASYNCZ_LOCALSTACK_REQUIRED=1 "$LS_REPO/.venv/bin/python" -m pytest tests/localstack \
        -m localstack -p no:cacheprovider -v --durations=0 "$@"
    local rc=$?
    if ((rc == 5)); then echo "pytest collected no LocalStack test" >&2; fi
    return $rc
}
timed tests run_pytest "$@" || { failed=tests; exit 1; }
