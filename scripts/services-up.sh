#!/usr/bin/env bash
# Makes sure the local PostgreSQL (127.0.0.1:5432) and Redis (127.0.0.1:6379) the test suite uses are up:
# starts whichever is down, waits until both answer, and fails loudly when one does not come up.
set -euo pipefail

PG_HOST=127.0.0.1
PG_PORT=5432
REDIS_HOST=127.0.0.1
REDIS_PORT=6379
WAIT_SECONDS=${SERVICES_WAIT_SECONDS:-30}

log() { printf '[services-up] %s\n' "$*" >&2; }
die() { printf '[services-up] ERROR: %s\n' "$*" >&2; exit 1; }

pg_up() { pg_isready -h "$PG_HOST" -p "$PG_PORT" -q; }
redis_up() { [ "$(redis-cli -h "$REDIS_HOST" -p "$REDIS_PORT" ping 2>/dev/null)" = "PONG" ]; }

command -v pg_isready >/dev/null || die "pg_isready not found: install the PostgreSQL client (apt-get install postgresql)"
command -v redis-cli >/dev/null || die "redis-cli not found: install Redis (apt-get install redis-server)"

if pg_up; then
  log "PostgreSQL already answers on $PG_HOST:$PG_PORT"
else
  command -v pg_ctlcluster >/dev/null || die "PostgreSQL is down and pg_ctlcluster is not available to start it"
  [ -d /etc/postgresql ] || die "PostgreSQL is down and no cluster is configured under /etc/postgresql"
  version=$(ls /etc/postgresql | sort -V | tail -1)
  [ -n "$version" ] || die "no PostgreSQL version under /etc/postgresql"
  log "starting PostgreSQL $version/main"
  pg_ctlcluster --skip-systemctl-redirect "$version" main start || die "pg_ctlcluster $version main start failed"
fi

if redis_up; then
  log "Redis already answers on $REDIS_HOST:$REDIS_PORT"
else
  command -v redis-server >/dev/null || die "Redis is down and redis-server is not installed"
  log "starting redis-server on $REDIS_HOST:$REDIS_PORT"
  redis-server --daemonize yes --bind "$REDIS_HOST" --port "$REDIS_PORT" --save '' --appendonly no >/dev/null ||
    die "redis-server failed to start"
fi

deadline=$((SECONDS + WAIT_SECONDS))
until pg_up && redis_up; do
  if [ "$SECONDS" -ge "$deadline" ]; then
    pg_up || die "PostgreSQL does not answer on $PG_HOST:$PG_PORT after ${WAIT_SECONDS}s"
    die "Redis does not answer on $REDIS_HOST:$REDIS_PORT after ${WAIT_SECONDS}s"
  fi
  sleep 0.5
done
log "PostgreSQL and Redis are up"
