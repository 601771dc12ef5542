#!/usr/bin/env bash
# Deploy the CDK app's `local` stage into the running LocalStack with cdklocal.
#
#   localstack/deploy.sh [--fresh]
#
# Ensures the Postgres database (asyncz_localstack) and the npm CLIs (aws-cdk,
# aws-cdk-local), bootstraps, deploys the deployment's service stack (asyncz/Service),
# applies the migrations and writes the stack outputs to .work/localstack/outputs.json.
# --fresh empties the database and Redis db 2 first (the tests count dead jobs, so they
# start from zero).
#
# Another CDK app (a user's project, e.g. examples/sizes) deploys the same way:
#   ASYNCZ_LS_APP_DIR=examples/sizes ASYNCZ_LS_NAME=sizes ASYNCZ_LS_DB_NAME=... \
#   ASYNCZ_LS_REDIS_DB=... ASYNCZ_LS_OUTPUTS=... localstack/deploy.sh --fresh
set -euo pipefail
source "$(dirname "$0")/env.sh"

fresh=0
for arg in "$@"; do
    case "$arg" in
        --fresh) fresh=1 ;;
        *) ls_die "usage: $0 [--fresh]" ;;
    esac
done

APP_DIR="$(cd "${ASYNCZ_LS_APP_DIR:-$LS_REPO}" && pwd)"
NAME="${ASYNCZ_LS_NAME:-asyncz}"
STACK="${ASYNCZ_LS_STACK:-$NAME/Service}"  # the CLI selects stacks by construct path
DB_NAME="${ASYNCZ_LS_DB_NAME:-asyncz_localstack}"
REDIS_DB="${ASYNCZ_LS_REDIS_DB:-2}"
LS_OUTPUTS="${ASYNCZ_LS_OUTPUTS:-$LS_OUTPUTS}"
export PGOPTIONS="-c client_min_messages=warning"

ls_healthy || ls_die "LocalStack does not answer at $LS_URL: run localstack/start.sh first"
mode="$(cat "$LS_MODEFILE" 2>/dev/null || echo host)"

# Postgres and Redis: the servers scripts/test found (ASYNCZ_TEST_DATABASE_URL /
# ASYNCZ_TEST_REDIS_URL, maybe embedded ones), else the system servers on 127.0.0.1.
# Host processes reach them on their own address; Docker Lambda containers cannot, and
# use host.docker.internal instead.
svc_host=""
[[ "$mode" == docker ]] && svc_host="${ASYNCZ_LS_SERVICES_HOST:-host.docker.internal}"
eval "$("$LS_REPO/.venv/bin/python" - "$DB_NAME" "$REDIS_DB" "$svc_host" <<'PY'
import os, shlex, sys
from urllib.parse import urlsplit, urlunsplit

db_name, redis_db, svc_host = sys.argv[1:]
pg = urlsplit(os.environ.get("ASYNCZ_TEST_DATABASE_URL") or "postgresql://postgres@127.0.0.1:5432/postgres")
rd = urlsplit(os.environ.get("ASYNCZ_TEST_REDIS_URL") or "redis://127.0.0.1:6379/0")

def with_host(parts, host):
    if not host:
        return parts
    netloc = parts.netloc.rsplit("@", 1)
    hostport = netloc[-1].replace(parts.hostname, host, 1)
    return parts._replace(netloc="@".join([*netloc[:-1], hostport]))

values = {
    "PG_ADMIN_URL": os.environ.get("ASYNCZ_LS_PG_ADMIN_URL") or urlunsplit(pg._replace(path="/postgres")),
    "DATABASE_URL": urlunsplit(with_host(pg._replace(path=f"/{db_name}"), svc_host)),
    "REDIS_ADMIN_URL": urlunsplit(rd._replace(path=f"/{redis_db}")),
    "REDIS_URL": urlunsplit(with_host(rd._replace(path=f"/{redis_db}"), svc_host)),
}
for key, value in values.items():
    print(f"{key}={shlex.quote(value)}")
PY
)"

t0=$SECONDS
phase() { ls_log "$1 ($((SECONDS - t0)) s)"; }

# --- Postgres database and Redis db --------------------------------------------------
command -v psql >/dev/null || ls_die "psql not found (apt-get install postgresql-client)"
pg_isready -q -d "$PG_ADMIN_URL" || ls_die "Postgres does not answer at $PG_ADMIN_URL"
if (( fresh )); then
    psql -q -d "$PG_ADMIN_URL" -v ON_ERROR_STOP=1 -c "DROP DATABASE IF EXISTS $DB_NAME WITH (FORCE)" >/dev/null
fi
if [[ "$(psql -d "$PG_ADMIN_URL" -tAc "SELECT 1 FROM pg_database WHERE datname = '$DB_NAME'")" != 1 ]]; then
    psql -q -d "$PG_ADMIN_URL" -v ON_ERROR_STOP=1 -c "CREATE DATABASE $DB_NAME" >/dev/null
fi
if (( fresh )); then
    command -v redis-cli >/dev/null || ls_die "redis-cli not found"
    [[ "$(redis-cli -u "$REDIS_ADMIN_URL" FLUSHDB)" == OK ]] || ls_die "Redis does not answer at $REDIS_ADMIN_URL"
fi
phase "database $DB_NAME ready$( ((fresh)) && echo ' (fresh)')"

# --- npm CLIs (cached in node_modules/, npm's cache under .work) ----------------------
cd "$LS_REPO"
export npm_config_cache="$LS_WORK/npm-cache" npm_config_update_notifier=false
lock_stamp="$(cat package.json package-lock.json | sha256sum | cut -c1-16)"
if [[ ! -x node_modules/.bin/cdklocal || "$(cat node_modules/.asyncz-stamp 2>/dev/null)" != "$lock_stamp" ]]; then
    npm ci --no-audit --no-fund --loglevel=error >"$LS_WORK/npm.log" 2>&1 \
        || { tail -n 30 "$LS_WORK/npm.log" >&2; ls_die "npm ci failed (log: $LS_WORK/npm.log)"; }
    echo "$lock_stamp" >node_modules/.asyncz-stamp
fi
phase "cdk CLIs ready"

# --- cdklocal bootstrap + deploy ------------------------------------------------------
export CDK_HOME="$LS_WORK/cdk-home" CDK_DISABLE_VERSION_CHECK=1 CDK_DISABLE_CLI_TELEMETRY=1
export JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION=20 CI=true
# jsii and the CDK CLI put their scratch folders in TMPDIR.
export TMPDIR="$LS_WORK/deploy-tmp"
mkdir -p "$CDK_HOME" "$TMPDIR"
account=000000000000
cdk_out="$LS_WORK/cdk.out-$NAME"
cdk_log="$LS_WORK/cdk-$NAME.log"
# A user's cdk.json runs `python app.py`: the venv with asyncz-serverless[infra] comes first.
export PATH="$LS_REPO/.venv/bin:$PATH"
: >"$cdk_log"
run_cdk() {  # the CLI's chatter goes to the log; on failure its tail is shown
    if ! (cd "$APP_DIR" && "$LS_REPO/node_modules/.bin/cdklocal" "$@" --no-notices \
            --output "$cdk_out") >>"$cdk_log" 2>&1; then
        echo "----- last lines of $cdk_log -----" >&2; tail -n 60 "$cdk_log" >&2
        ls_die "cdklocal $1 failed"
    fi
}
run_cdk bootstrap "aws://$account/$AWS_DEFAULT_REGION"
phase "bootstrapped"
run_cdk deploy "$STACK" -c name="$NAME" \
    -c stage=local -c database_url="$DATABASE_URL" -c redis_url="$REDIS_URL" \
    -c alarm_period_seconds=10 -c event_bus="${ASYNCZ_LS_EVENT_BUS:-own}" \
    --require-approval never --outputs-file "$LS_WORK/outputs-$NAME.raw.json"
phase "deployed $STACK"

# Flatten to {"OutputName": value} for the tests. LocalStack may answer the CLI's last
# DescribeStacks before it has filled the new stack's outputs (the CLI then writes "{}"):
# those are read from CloudFormation until they are there.
"$LS_REPO/.venv/bin/python" - "$LS_WORK/outputs-$NAME.raw.json" "$NAME-Service" "$LS_OUTPUTS" <<'PY'
import json, sys, time
raw, stack, out = sys.argv[1:]
data = json.load(open(raw))
outputs = data.get(stack) or next(iter(data.values()), None)
if not outputs:
    import boto3
    cfn = boto3.client("cloudformation")
    for _ in range(30):
        found = cfn.describe_stacks(StackName=stack)["Stacks"][0].get("Outputs", [])
        outputs = {o["OutputKey"]: o["OutputValue"] for o in found}
        if outputs:
            break
        time.sleep(1)
    else:
        sys.exit(f"the deployed stack {stack} has no outputs")
outputs["Stage"] = "local"
outputs["StackName"] = stack
json.dump(outputs, open(out, "w"), indent=2, sort_keys=True)
PY

# --- migrations ------------------------------------------------------------------------
# The stack's migration trigger is a CloudFormation custom resource, which LocalStack's
# community edition skips; apply the migrations by invoking the function instead.
migrate="$("$LS_REPO/.venv/bin/python" -c 'import json,sys; print(json.load(open(sys.argv[1])).get("MigrateFunctionName", ""))' "$LS_OUTPUTS")"
if [[ -n "$migrate" ]]; then
    "$LS_REPO/.venv/bin/python" - "$migrate" <<'PY' || ls_die "the migration function failed"
import json, sys, boto3
name = sys.argv[1]
resp = boto3.client("lambda").invoke(FunctionName=name, Payload=b"{}")
body = resp["Payload"].read().decode()
if resp.get("FunctionError"):
    print(f"{name} failed: {body}", file=sys.stderr)
    sys.exit(1)
print(f"migrations: {body}")
PY
    phase "migrations applied"
fi
ls_log "outputs in $LS_OUTPUTS; deploy took $((SECONDS - t0)) s"
