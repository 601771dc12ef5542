#!/usr/bin/env bash
# Stop LocalStack and every process it started (Lambda host processes included), then
# check that none is left. Exits non-zero if anything survives.
set -uo pipefail
source "$(dirname "$0")/env.sh"

mode="$(cat "$LS_MODEFILE" 2>/dev/null || echo none)"
pid_is_ours=1

session_pids() {  # every live process in LocalStack's session (setsid made its pid the sid)
    local p
    for p in $(ps -eo pid=,sid=,stat= | awk -v s="$1" '$2 == s && $1 != s && $3 !~ /^Z/ {print $1}'); do
        # With a recycled session leader, only our Lambda sandboxes are ours to kill.
        if ((pid_is_ours)) || tr '\0' ' ' <"/proc/$p/cmdline" 2>/dev/null | grep -q asyncz_localstack_executor; then
            echo "$p"
        fi
    done
}

stop_host() {
    local pid; pid="$(cat "$LS_PIDFILE" 2>/dev/null || true)"
    [[ -n "$pid" ]] || { ls_log "no LocalStack pid file; nothing to stop"; return 0; }
    # After a crash the pid may belong to another process by now: leave that one alone.
    if ls_alive "$pid" && ! tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | grep -q asyncz_localstack_executor.launch; then
        ls_log "pid $pid is no longer LocalStack; only its old session is cleaned up"
        pid_is_ours=0
    else
        pid_is_ours=1
    fi
    if ((pid_is_ours)) && ls_alive "$pid"; then
        ls_log "stopping LocalStack (pid $pid)"
        # Lambda sandboxes first (they are disposable): LocalStack's shutdown otherwise
        # waits on the invocations still running in them (a worker polls for ~1 min).
        local sandboxes; sandboxes="$(session_pids "$pid")"
        # shellcheck disable=SC2086
        [[ -z "$sandboxes" ]] || kill -KILL $sandboxes 2>/dev/null || true
        kill -TERM "$pid" 2>/dev/null || true
        for _ in $(seq 1 60); do ls_alive "$pid" || break; sleep 0.25; done
    fi
    local left; left="$( ((pid_is_ours)) && ls_alive "$pid" && echo "$pid"; session_pids "$pid")"
    if [[ -n "$left" ]]; then
        ls_log "killing what is left: $(echo $left)"
        # shellcheck disable=SC2086
        kill -KILL $left 2>/dev/null || true
        sleep 0.5
    fi
    left="$( ((pid_is_ours)) && ls_alive "$pid" && echo "$pid"; session_pids "$pid")"
    if [[ -n "$left" ]]; then
        ps -o pid,args -p "$(echo $left | tr ' ' ,)" >&2
        ls_die "processes survived the stop: $(echo $left)"
    fi
    rm -f "$LS_PIDFILE"
}

stop_docker() {
    if command -v localstack >/dev/null 2>&1; then
        localstack stop || true
    fi
    docker rm -f "$LS_DOCKER_NAME" >/dev/null 2>&1 || true
    # Lambda containers LocalStack started and did not remove.
    # (docker ps ORs repeated name filters; names are <main container>-lambda-<function>-<id>.)
    local lambdas; lambdas="$(docker ps -aq --filter "name=localstack-main-lambda-" --filter "name=$LS_DOCKER_NAME-lambda-")"
    # shellcheck disable=SC2086
    [[ -z "$lambdas" ]] || docker rm -f $lambdas >/dev/null
}

case "$mode" in
    host) stop_host ;;
    docker) stop_docker ;;
    none) ls_log "LocalStack was not started by localstack/start.sh; nothing to stop" ;;
esac
for _ in $(seq 1 20); do ls_healthy || break; sleep 0.25; done
if ls_healthy; then ls_die "something still answers on $LS_URL after stop"; fi
rm -f "$LS_MODEFILE"
ls_log "stopped; no LocalStack process left"
