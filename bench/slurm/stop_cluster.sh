#!/usr/bin/env bash
# Stop the single-node SLURM cluster that bench/slurm/start_cluster.sh started: cancels
# the jobs left in the queue, then stops slurmd, slurmctld, slurmdbd, MariaDB and munged by
# their pid files (never by process name). Configs, the database and the job history stay,
# so start_cluster.sh brings the same cluster back.
set -uo pipefail

log() { printf '[stop_cluster] %s\n' "$*"; }
[ "$(id -u)" = 0 ] || { echo "run as root" >&2; exit 1; }

RUN=/run/slurm

stop_pidfile() {  # name pidfile
  local name=$1 pidfile=$2 pid
  if [ ! -s "$pidfile" ] || ! kill -0 "$(cat "$pidfile")" 2>/dev/null; then
    log "$name not running"
    return
  fi
  pid=$(cat "$pidfile")
  log "stopping $name (pid $pid)"
  kill -TERM "$pid"
  for _ in $(seq 30); do kill -0 "$pid" 2>/dev/null || return 0; sleep 1; done
  log "$name still running after 30 s: SIGKILL"
  kill -KILL "$pid" 2>/dev/null || true
}

if [ -s "$RUN/slurmctld.pid" ] && kill -0 "$(cat "$RUN/slurmctld.pid")" 2>/dev/null; then
  jobs=$(squeue -h -o %i 2>/dev/null | tr '\n' ' ')
  if [ -n "${jobs// /}" ]; then
    log "cancelling jobs: $jobs"
    # shellcheck disable=SC2086
    scancel $jobs || true
    sleep 2
  fi
fi

stop_pidfile slurmd "$RUN/slurmd.pid"
stop_pidfile slurmctld "$RUN/slurmctld.pid"
stop_pidfile slurmdbd "$RUN/slurmdbd.pid"

if mariadb-admin ping --silent >/dev/null 2>&1; then
  log "stopping MariaDB"
  mariadb-admin shutdown
else
  log "MariaDB not running"
fi

stop_pidfile munged /run/munge/munged.pid
log "done"
