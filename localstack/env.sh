# Sourced by the localstack/*.sh scripts: paths and settings shared by all of them.
# Everything created at run time lives under $LS_WORK (git-ignored).

LS_REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
LS_DIR="$LS_REPO/localstack"
LS_WORK="${ASYNCZ_LS_WORK:-$LS_REPO/.work/localstack}"
LS_PORT=4566
LS_URL="http://127.0.0.1:$LS_PORT"
LS_VERSION="2026.3.0"
LS_PIDFILE="$LS_WORK/localstack.pid"
LS_MODEFILE="$LS_WORK/mode"
LS_LOG="$LS_WORK/localstack.log"
LS_OUTPUTS="$LS_WORK/outputs.json"
LS_DOCKER_NAME="asyncz-localstack"

# Python 3.13 runs LocalStack itself (host mode); Python 3.12 runs the Lambda functions.
LS_PYENV_ROOT="$(pyenv root 2>/dev/null || echo "$HOME/.pyenv")"
LS_PY313="${ASYNCZ_LS_PYTHON313:-$LS_PYENV_ROOT/versions/3.13.0/bin/python}"
LS_PY312="${ASYNCZ_LS_PYTHON312:-$LS_PYENV_ROOT/versions/3.12.1/bin/python}"

# Credentials and endpoints for every AWS client these scripts start (aws, cdk, tests).
export AWS_ACCESS_KEY_ID=test AWS_SECRET_ACCESS_KEY=test
export AWS_DEFAULT_REGION="${AWS_DEFAULT_REGION:-us-east-1}" AWS_REGION="${AWS_DEFAULT_REGION:-us-east-1}"
export AWS_ENDPOINT_URL="$LS_URL" AWS_ENDPOINT_URL_S3="$LS_URL"
export AWS_PAGER=""

ls_log() { printf '[localstack %s] %s\n' "$(date -u +%H:%M:%S)" "$*" >&2; }
ls_die() { printf '\n[localstack] ERROR: %s\n' "$*" >&2; exit 1; }

# A process that exists and is not a zombie (exited, waiting for init to reap it).
ls_alive() {
    local stat; stat="$(ps -o stat= -p "$1" 2>/dev/null)" || return 1
    [[ -n "$stat" && "$stat" != Z* ]]
}

ls_healthy() {
    curl -fsS --max-time 2 "$LS_URL/_localstack/health" >/dev/null 2>&1
}

# The mode LocalStack runs in: docker when a Docker engine answers, host otherwise.
ls_pick_mode() {
    case "${ASYNCZ_LS_MODE:-auto}" in
        host|docker) echo "$ASYNCZ_LS_MODE" ;;
        auto)
            if command -v docker >/dev/null 2>&1 && timeout 10 docker info >/dev/null 2>&1; then
                echo docker
            else
                echo host
            fi ;;
        *) ls_die "ASYNCZ_LS_MODE must be auto, host or docker (got '$ASYNCZ_LS_MODE')" ;;
    esac
}
