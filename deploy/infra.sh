#!/usr/bin/env bash
# Starts Postgres, NATS (JetStream) and the Docker engine when they are not already running, under supervisord
# (deploy/run-infra.sh: each is started again within seconds when it dies), and writes their URLs to
# $AGENTHOST_STATE/infra.env (`infra.sh docker`: only the Docker engine). Servers given by DATABASE_URL, NATS_URL or
# DOCKER_HOST, and an engine that was running already (started by the host's own init), are used as they are.
# DOCKER_LIVE_RESTORE (auto): on, the engine keeps the agents running while it restarts. auto turns it on only for an
# engine whose live-restore keeps volumes with mount options right (docs/decisions/0054); off for an engine that is
# to be a Swarm node (Swarm mode refuses live-restore).
source "$(dirname "$0")/env.sh"
source "$DEPLOY_DIR/pg-roles.sh"
source "$DEPLOY_DIR/services.sh"

PG_BIN=/usr/lib/postgresql/15/bin
PG_USER=agenthost-pg
PG_DATA="$AGENTHOST_STATE/pg"

start_postgres() {
  local pwfile="$AGENTHOST_STATE/pg-password"
  if ! id "$PG_USER" >/dev/null 2>&1; then
    useradd --system --home-dir "$PG_DATA" --shell /usr/sbin/nologin "$PG_USER"
  fi
  if [ ! -s "$PG_DATA/PG_VERSION" ]; then
    say "initdb $PG_DATA"
    mkdir -p "$PG_DATA"
    chown "$PG_USER" "$PG_DATA"
    chmod 700 "$PG_DATA"
    umask 077
    head -c 24 /dev/urandom | base64 | tr -d '/+=' >"$pwfile"
    cp "$pwfile" /tmp/agenthost-pw.$$ && chown "$PG_USER" /tmp/agenthost-pw.$$
    runuser -u "$PG_USER" -- "$PG_BIN/initdb" -D "$PG_DATA" -U agenthost --pwfile=/tmp/agenthost-pw.$$ \
      --auth-local=scram-sha-256 --auth-host=scram-sha-256 -E UTF8 >/dev/null
    rm -f /tmp/agenthost-pw.$$
    umask 022
  fi
  # Ours from before it was supervised (pg_ctl start): stopped here, supervisord runs it from now on.
  if [ ! -f "$RUN_DIR/infra/postgres" ] && runuser -u "$PG_USER" -- "$PG_BIN/pg_ctl" -D "$PG_DATA" status >/dev/null 2>&1; then
    runuser -u "$PG_USER" -- "$PG_BIN/pg_ctl" -D "$PG_DATA" -m fast stop >/dev/null
  fi
  rm -f "$RUN_DIR/postgres.started"
  record_infra postgres "$PG_PORT" "${AGENTHOST_PG_FSYNC:-on}"
}

# Once supervisord runs it: the database, the URLs and the services' roles.
configure_postgres() {
  say "Postgres on 127.0.0.1:$PG_PORT"
  wait_for 90 runuser -u "$PG_USER" -- "$PG_BIN/pg_isready" -q -h 127.0.0.1 -p "$PG_PORT" || die "Postgres did not start (see $LOG_DIR/postgres.log)"
  local pw
  pw="$(cat "$AGENTHOST_STATE/pg-password")"
  DATABASE_URL="postgres://agenthost:$pw@127.0.0.1:$PG_PORT/agenthost"
  if ! PGPASSWORD="$pw" psql -h 127.0.0.1 -p "$PG_PORT" -U agenthost -d postgres -tAc "select 1 from pg_database where datname='agenthost'" | grep -q 1; then
    PGPASSWORD="$pw" psql -h 127.0.0.1 -p "$PG_PORT" -U agenthost -d postgres -qc "create database agenthost" >/dev/null
  fi
  TEST_DATABASE_URL="postgres://agenthost:$pw@127.0.0.1:$PG_PORT/postgres"
  PGPASSWORD="$pw" service_roles
  PG_PORT_LOCAL=$PG_PORT
}

# One login role per service schema (deploy/pg-roles.sh), with a password kept in $AGENTHOST_STATE/secrets/pg-<schema>;
# deploy/run-service.sh gives each service only its own role's URL.
service_roles() {
  local sqlfile pairs=() schema
  for schema in "${SERVICE_SCHEMAS[@]#*:}"; do
    pairs+=("$schema=$(ensure_secret "pg-$schema" bash -c 'head -c 24 /dev/urandom | base64 | tr -d "/+="')")
  done
  sqlfile=$(mktemp)
  chmod 600 "$sqlfile"
  pg_roles_sql agenthost "${pairs[@]}" >"$sqlfile"
  PGOPTIONS="-c client_min_messages=warning" psql -h 127.0.0.1 -p "$PG_PORT" -U agenthost -d agenthost -q -v ON_ERROR_STOP=1 -f "$sqlfile" >/dev/null
  rm -f "$sqlfile"
}

# NATS with TLS and one nkey user per service (deploy/nats-auth.ts): a connection without an identity is
# refused, and each service may use only its own subjects. Seeds are kept in $NATS_AUTH_DIR (root only).
start_nats() {
  NATS_URL="nats://127.0.0.1:$NATS_PORT"
  NATS_CONF=$(node "$DEPLOY_DIR/nats-auth.ts" "$NATS_AUTH_DIR" 127.0.0.1 "$NATS_PORT" "$AGENTHOST_STATE/nats")
  mkdir -p "$AGENTHOST_STATE/nats"
  if [ ! -f "$RUN_DIR/infra/nats" ] && (exec 3<>/dev/tcp/127.0.0.1/"$NATS_PORT") 2>/dev/null; then
    # Ours from before it was supervised (a pid file): replaced. Anything else is not ours to touch.
    local pid=""
    [ -s "$RUN_DIR/nats.pid" ] && pid=$(cat "$RUN_DIR/nats.pid")
    [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null ||
      die "port $NATS_PORT is taken by a NATS server deploy did not start; set NATS_URL (and each service's NATS_NKEY_SEED_FILE, NATS_CA_FILE) to use it"
    say "moving NATS under supervisord"
    stop_process nats
  fi
  record_infra nats "$NATS_CONF"
}

# Once supervisord runs it: a NATS that was running already reads its permissions table again (it may have
# changed with the code).
configure_nats() {
  if [ "${NATS_WAS_RUNNING:-}" = 1 ]; then supervisorctl_ signal HUP nats >/dev/null; fi
  wait_for 30 bash -c "exec 3<>/dev/tcp/127.0.0.1/$NATS_PORT" || die "NATS did not start (see $LOG_DIR/nats.log)"
  say "NATS with JetStream and TLS on 127.0.0.1:$NATS_PORT"
}

# Whether live-restore is safe for our volumes on this engine: Docker 20.10.24 (Debian 12's docker.io) unmounts local
# volumes that have mount options when it starts, and does not count their live-restored mounts, so after a restart
# a volume's data is gone from new containers and the volume can never be removed (moby#44422, moby#46148; fixed
# in 24.0.6 and later).
live_restore_setting() {
  case "${DOCKER_LIVE_RESTORE:-auto}" in
    on | off) echo "$DOCKER_LIVE_RESTORE" ;;
    auto)
      local v major minor patch
      v=$(dockerd --version 2>/dev/null | sed -n 's/^Docker version \([0-9]*\)\.\([0-9]*\)\.\([0-9]*\).*/\1 \2 \3/p')
      read -r major minor patch <<<"${v:-0 0 0}"
      if [ "$major" -gt 24 ] || { [ "$major" -eq 24 ] && [ "$minor" -eq 0 ] && [ "$patch" -ge 6 ]; }; then echo on; else echo off; fi ;;
    *) die "DOCKER_LIVE_RESTORE is auto, on or off, not $DOCKER_LIVE_RESTORE" ;;
  esac
}

start_docker() {
  local live
  live=$(live_restore_setting)
  if docker info >/dev/null 2>&1; then
    # Ours: a changed DOCKER_LIVE_RESTORE restarts it (with its containers, when live-restore was off). An engine
    # the host's init started is left as it is.
    [ -f "$RUN_DIR/infra/dockerd" ] && record_infra dockerd "$live"
    return 0
  fi
  # Ours from before it was supervised, not answering: replaced.
  stop_process dockerd
  record_infra dockerd "$live"
}

# supervisord with every server recorded above and the programs it already had.
supervise_infra() {
  local running
  running=$(supervisor_running && supervisorctl_ status nats 2>/dev/null | grep -c RUNNING || true)
  [ "${running:-0}" -gt 0 ] && NATS_WAS_RUNNING=1
  # shellcheck disable=SC2046 # one word per program
  write_supervisor_conf $(supervised_infra) $(configured_programs)
  ensure_supervisor
}

configure_docker() {
  [ -f "$RUN_DIR/infra/dockerd" ] || return 0
  wait_for 90 docker info || die "dockerd did not start (see $LOG_DIR/dockerd.log)"
}

# `infra.sh docker`: the engine alone (the tests bring their own Postgres and NATS as containers).
if [ "${1:-}" = docker ]; then
  if [ -z "${DOCKER_HOST:-}" ]; then
    start_docker
    supervise_infra
    configure_docker
    bash "$DEPLOY_DIR/zram-swap.sh"
  fi
  say "Docker engine ready"
  exit 0
fi

[ -n "${DATABASE_URL:-}" ] || start_postgres
[ -n "${NATS_URL:-}" ] || start_nats
[ -n "${DOCKER_HOST:-}" ] || start_docker
supervise_infra
if [ -n "${DATABASE_URL:-}" ]; then TEST_DATABASE_URL="${TEST_DATABASE_URL:-$DATABASE_URL}"; else configure_postgres; fi
[ -n "${NATS_CONF:-}" ] && configure_nats
[ -n "${DOCKER_HOST:-}" ] || { configure_docker; bash "$DEPLOY_DIR/zram-swap.sh"; }

umask 077
cat >"$AGENTHOST_STATE/infra.env" <<EOV
${PG_PORT_LOCAL:+PG_ROLES=local}
DATABASE_URL=$DATABASE_URL
TEST_DATABASE_URL=$TEST_DATABASE_URL
NATS_URL=$NATS_URL
${DOCKER_HOST:+DOCKER_HOST=$DOCKER_HOST}
EOV
say "infrastructure ready (Postgres, NATS, Docker)"
