#!/usr/bin/env bash
# Start LocalStack for the AsyncZ `local` stage and wait until it is healthy.
#
#   Docker engine answers  -> `localstack start -d` (or `docker run` of the image)
#   no Docker (CI, here)   -> host mode: LocalStack in a Python 3.13 venv, Lambda functions
#                             as host processes through the `hostprocess` executor plugin
#
# ASYNCZ_LS_MODE=host|docker forces a mode. Fails loudly, with the log tail, if LocalStack
# does not come up. Everything it creates lives under .work/localstack/.
set -euo pipefail
source "$(dirname "$0")/env.sh"

mkdir -p "$LS_WORK"
started=$SECONDS

if ls_healthy; then
    if [[ -f "$LS_MODEFILE" ]]; then
        ls_log "LocalStack already running ($(cat "$LS_MODEFILE") mode) at $LS_URL"
        exit 0
    fi
    ls_die "something else answers on $LS_URL; stop it first (it was not started by localstack/start.sh)"
fi
if (exec 3<>"/dev/tcp/127.0.0.1/$LS_PORT") 2>/dev/null; then
    ls_die "port $LS_PORT is taken by a process that is not a healthy LocalStack"
fi

mode="$(ls_pick_mode)"

# --- Docker mode (a laptop) --------------------------------------------------------------
start_docker() {
    # Lambda containers reach the Postgres and Redis on the host through host.docker.internal.
    local flags="--add-host=host.docker.internal:host-gateway"
    if command -v localstack >/dev/null 2>&1; then
        ls_log "starting LocalStack with the localstack CLI (Docker)"
        LAMBDA_DOCKER_FLAGS="$flags" DISABLE_EVENTS=1 localstack start -d >"$LS_LOG" 2>&1 \
            || { tail -n 40 "$LS_LOG" >&2; ls_die "localstack start failed"; }
    else
        local image="${ASYNCZ_LS_IMAGE:-localstack/localstack:$LS_VERSION}"
        ls_log "starting LocalStack image $image with docker run"
        docker rm -f "$LS_DOCKER_NAME" >/dev/null 2>&1 || true
        docker run -d --name "$LS_DOCKER_NAME" \
            -p "127.0.0.1:$LS_PORT:4566" \
            -v /var/run/docker.sock:/var/run/docker.sock \
            -e MAIN_CONTAINER_NAME="$LS_DOCKER_NAME" \
            -e LAMBDA_DOCKER_FLAGS="$flags" -e DISABLE_EVENTS=1 \
            ${LOCALSTACK_AUTH_TOKEN:+-e LOCALSTACK_AUTH_TOKEN} \
            "$image" >"$LS_LOG" 2>&1 \
            || { tail -n 40 "$LS_LOG" >&2; ls_die "docker run $image failed"; }
    fi
}

# --- Host mode (no Docker) ---------------------------------------------------------------
# The venvs are built with uv (pinned, itself installed with pip into .work): it installs
# LocalStack's ~110 packages in ~10 s where pip takes 60-90 s, which is most of a cold run.
UV_VERSION=0.13.9
export UV_CACHE_DIR="$LS_WORK/uv-cache" UV_PYTHON_DOWNLOADS=never UV_NO_PROGRESS=1
uv_tmp="$LS_WORK/build/tmp"  # uv keeps lock files in TMPDIR
uv_bin() {
    local tool="$LS_WORK/uv-tool"
    if [[ "$("$tool/bin/uv" --version 2>/dev/null)" != "uv $UV_VERSION"* ]]; then
        ls_log "installing uv $UV_VERSION into $tool"
        rm -rf "$tool"
        { python3 -m venv "$tool" && PIP_CACHE_DIR="$LS_WORK/pip-cache" "$tool/bin/python" -m pip install \
            -q --disable-pip-version-check "uv==$UV_VERSION"; } >"$LS_WORK/uv-tool.log" 2>&1 \
            || { tail -n 20 "$LS_WORK/uv-tool.log" >&2; ls_die "installing uv failed (log: $LS_WORK/uv-tool.log)"; }
    fi
    echo "$tool/bin/uv"
}

# A venv is rebuilt only when what it was built from changes (the stamp holds the hash).
ensure_venv() {  # dir python stamp-inputs... -- uv-pip-install args...
    local dir="$1" python="$2"; shift 2
    local inputs=() ; while [[ "$1" != "--" ]]; do inputs+=("$1"); shift; done; shift
    local stamp; stamp="$(cat "${inputs[@]}" | sha256sum | cut -c1-16)"
    if [[ -x "$dir/bin/python" && "$(cat "$dir/.stamp" 2>/dev/null)" == "$stamp" ]]; then
        return 0
    fi
    [[ -x "$python" ]] || ls_die "no interpreter at $python: install it (pyenv install 3.13.0 / 3.12.1) or set ASYNCZ_LS_PYTHON313 / ASYNCZ_LS_PYTHON312"
    local uv; uv="$(uv_bin)"
    ls_log "building venv $dir"
    rm -rf "$dir"
    mkdir -p "$uv_tmp"
    { TMPDIR="$uv_tmp" "$uv" venv -q -p "$python" "$dir" \
        && TMPDIR="$uv_tmp" "$uv" pip install -q -p "$dir/bin/python" "$@"; } >"$dir.install.log" 2>&1 \
        || { tail -n 30 "$dir.install.log" >&2; ls_die "building $dir failed (log: $dir.install.log)"; }
    echo "$stamp" >"$dir/.stamp"
}

start_host() {
    local venv="$LS_WORK/venv" lambda_venv="$LS_WORK/lambda-py312"
    mkdir -p "$LS_WORK/home"
    local executor_files; executor_files=$(find -L "$LS_DIR/executor" -type f \( -name '*.py' -o -name '*.toml' \) | sort)

    ensure_venv "$venv" "$LS_PY313" "$LS_DIR/constraints-py313.txt" -- \
        -c "$LS_DIR/constraints-py313.txt" "localstack-core[runtime]==$LS_VERSION"
    # The executor is built from a copy so that no build files land in the work tree.
    local src="$LS_WORK/build/executor"
    # shellcheck disable=SC2086
    local exec_stamp; exec_stamp="$(cat $executor_files | sha256sum | cut -c1-16)"
    if [[ "$(cat "$venv/.executor-stamp" 2>/dev/null)" != "$exec_stamp" ]]; then
        rm -rf "$src" && mkdir -p "$src" && cp -rL "$LS_DIR/executor/." "$src/"  # -L: bootstrap.py is a link
        mkdir -p "$uv_tmp"
        TMPDIR="$uv_tmp" "$(uv_bin)" pip install -q -p "$venv/bin/python" --no-deps --reinstall "$src" \
            >"$LS_WORK/executor.install.log" 2>&1 \
            || { tail -n 30 "$LS_WORK/executor.install.log" >&2; ls_die "installing the executor plugin failed"; }
        rm -rf "$src"
        echo "$exec_stamp" >"$venv/.executor-stamp"
    fi
    HOME="$LS_WORK/home" "$venv/bin/python" - <<'PY' || ls_die "the hostprocess executor is not registered (LocalStack would silently fall back to docker)"
from localstack.services.lambda_.invocation.runtime_executor import EXECUTOR_PLUGIN_MANAGER
assert EXECUTOR_PLUGIN_MANAGER.exists("hostprocess")
PY
    ensure_venv "$lambda_venv" "$LS_PY312" "$LS_DIR/lambda-runtime-requirements.txt" -- \
        -r "$LS_DIR/lambda-runtime-requirements.txt"
    ls_log "venvs ready ($((SECONDS - started)) s)"

    local fs="$LS_WORK/fs" tmp="$LS_WORK/tmp"
    mkdir -p "$fs" "$tmp" "$LS_WORK/logs"
    : >"$LS_LOG"
    # setsid: LocalStack and every Lambda process it starts share one session, which is
    # what stop.sh kills and then checks is empty.
    env -i PATH="$PATH" HOME="$LS_WORK/home" LANG=C.UTF-8 \
        GATEWAY_LISTEN="127.0.0.1:$LS_PORT" GATEWAY_SERVER=hypercorn \
        LOCALSTACK_HOST="localhost:$LS_PORT" \
        DNS_ADDRESS=0 DISABLE_EVENTS=1 SKIP_SSL_CERT_DOWNLOAD=1 \
        CFN_IGNORE_UNSUPPORTED_RESOURCE_TYPES=1 \
        FILESYSTEM_ROOT="$fs" TMPDIR="$tmp" \
        LAMBDA_RUNTIME_EXECUTOR=hostprocess \
        LAMBDA_HOSTPROC_PYTHON312="$lambda_venv/bin/python" \
        LAMBDA_HOSTPROC_LOG_DIR="$LS_WORK/logs" \
        LAMBDA_RUNTIME_ENVIRONMENT_TIMEOUT=60 \
        ${LS_DEBUG:+DEBUG=1} \
        setsid "$venv/bin/python" -m asyncz_localstack_executor.launch >>"$LS_LOG" 2>&1 </dev/null 9>&- &
    echo $! >"$LS_PIDFILE"
}

echo "$mode" >"$LS_MODEFILE"
if [[ "$mode" == docker ]]; then start_docker; else start_host; fi

ls_log "waiting for $LS_URL/_localstack/health ($mode mode)"
deadline=$((SECONDS + ${ASYNCZ_LS_START_TIMEOUT:-90}))
until ls_healthy; do
    if [[ "$mode" == host ]] && ! ls_alive "$(cat "$LS_PIDFILE")"; then
        echo "----- last lines of $LS_LOG -----" >&2; tail -n 60 "$LS_LOG" >&2
        ls_die "LocalStack exited during startup"
    fi
    if (( SECONDS > deadline )); then
        echo "----- last lines of $LS_LOG -----" >&2; tail -n 60 "$LS_LOG" >&2
        "$LS_DIR/stop.sh" >&2 || true
        ls_die "LocalStack was not healthy within ${ASYNCZ_LS_START_TIMEOUT:-90} s"
    fi
    sleep 0.5
done
ls_log "LocalStack healthy at $LS_URL ($mode mode) in $((SECONDS - started)) s; log: $LS_LOG"
