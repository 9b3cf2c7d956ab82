#!/usr/bin/env bash
# A Docker engine for the docker backend of the harness (python -m harness up --backend docker).
#
#   bash scripts/docker-engine.sh [start]   # an engine answers `docker info` afterwards
#   bash scripts/docker-engine.sh stop      # stops the dockerd this script started (by its pid)
#   bash scripts/docker-engine.sh status    # exit 0 if an engine answers
#
# start: if an engine already answers, nothing is done. Otherwise (as root) it installs Debian's
# `docker.io` package (dockerd 20.10, containerd, runc, iptables) with apt-get if `dockerd` is
# missing, starts `dockerd` in the background (overlay2 storage under /var/lib/docker, the default
# bridge network, its log in $STATE_DIR/dockerd.log) and waits until `docker info` answers. The
# pid of the dockerd it started goes to $STATE_DIR/dockerd.pid; `stop` stops exactly that process
# (and so the containerd it runs) and never an engine it did not start.
# STATE_DIR is $INDEXTABLES_DOCKER_STATE (default: .cache/docker-engine in this checkout).
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
STATE_DIR="${INDEXTABLES_DOCKER_STATE:-$ROOT/.cache/docker-engine}"
PID_FILE="$STATE_DIR/dockerd.pid"
LOG="$STATE_DIR/dockerd.log"
# The docker client may be newer than Debian's daemon (API 1.41); the client negotiates down, but
# an explicit DOCKER_API_VERSION from the caller is kept.
answers() { docker info --format '{{.ServerVersion}}' >/dev/null 2>&1; }

ensure_client_and_daemon() {
    if command -v dockerd >/dev/null 2>&1 && command -v docker >/dev/null 2>&1; then
        return
    fi
    if [ "$(id -u)" != 0 ]; then
        echo "docker-engine.sh: dockerd is not installed and this is not root: install Debian's docker.io" >&2
        exit 2
    fi
    echo "docker-engine.sh: installing Debian's docker.io (apt-get)" >&2
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    # No init system runs services here: the package's postinst may fail to start the service,
    # which does not matter (this script starts dockerd itself).
    apt-get install -y -qq --no-install-recommends docker.io iptables >/dev/null || dpkg --configure -a || true
    command -v dockerd >/dev/null 2>&1 || { echo "docker-engine.sh: docker.io installed no dockerd" >&2; exit 2; }
}

start() {
    if answers; then
        echo "docker engine: $(docker info --format '{{.ServerVersion}} ({{.Driver}})') answers already"
        return
    fi
    ensure_client_and_daemon
    mkdir -p "$STATE_DIR"
    if [ -f "$PID_FILE" ] && kill -0 "$(cat "$PID_FILE")" 2>/dev/null; then
        echo "docker-engine.sh: dockerd $(cat "$PID_FILE") runs but does not answer; see $LOG" >&2
    else
        # setsid: dockerd outlives this script and the shell that ran it.
        setsid dockerd --storage-driver=overlay2 >"$LOG" 2>&1 < /dev/null &
        echo $! >"$PID_FILE"
    fi
    for _ in $(seq 1 120); do
        if answers; then
            echo "docker engine: $(docker info --format '{{.ServerVersion}} ({{.Driver}})') started, pid $(cat "$PID_FILE"), log $LOG"
            return
        fi
        if ! kill -0 "$(cat "$PID_FILE")" 2>/dev/null; then
            echo "docker-engine.sh: dockerd exited; the end of $LOG:" >&2
            tail -n 20 "$LOG" >&2
            rm -f "$PID_FILE"
            exit 2
        fi
        sleep 0.5
    done
    echo "docker-engine.sh: dockerd did not answer within 60 s; see $LOG" >&2
    exit 2
}

stop() {
    if [ ! -f "$PID_FILE" ]; then
        echo "docker engine: not started by this script (no $PID_FILE): left alone"
        return
    fi
    pid="$(cat "$PID_FILE")"
    if kill -0 "$pid" 2>/dev/null; then
        kill -TERM "$pid"
        for _ in $(seq 1 60); do kill -0 "$pid" 2>/dev/null || break; sleep 0.5; done
        if kill -0 "$pid" 2>/dev/null; then kill -KILL "$pid"; fi
        echo "docker engine: stopped dockerd $pid"
    fi
    rm -f "$PID_FILE"
}

case "${1:-start}" in
    start) start ;;
    stop) stop ;;
    status) if answers; then docker info --format '{{.ServerVersion}} ({{.Driver}})'; else echo "no engine answers"; exit 1; fi ;;
    *) echo "usage: $0 [start|stop|status]" >&2; exit 2 ;;
esac
