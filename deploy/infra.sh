#!/usr/bin/env bash
# Starts Postgres, NATS (JetStream) and the Docker engine when they are not already running, and
# writes their URLs to $AGENTHOST_STATE/infra.env (`infra.sh docker`: only the Docker engine). Servers given by DATABASE_URL, NATS_URL or
# DOCKER_HOST are used as they are.
source "$(dirname "$0")/env.sh"
source "$DEPLOY_DIR/pg-roles.sh"

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
  if ! runuser -u "$PG_USER" -- "$PG_BIN/pg_ctl" -D "$PG_DATA" status >/dev/null 2>&1; then
    say "starting Postgres on 127.0.0.1:$PG_PORT"
    mkdir -p /run/agenthost-pg && chown "$PG_USER" /run/agenthost-pg
    runuser -u "$PG_USER" -- "$PG_BIN/pg_ctl" -D "$PG_DATA" -l "$PG_DATA/postgres.log" -w -t 60 \
      -o "-c listen_addresses=127.0.0.1 -p $PG_PORT -k /run/agenthost-pg -c max_connections=400 -c shared_buffers=256MB -c fsync=${AGENTHOST_PG_FSYNC:-on}" start >/dev/null
    touch "$RUN_DIR/postgres.started"
  fi
  local pw
  pw="$(cat "$pwfile")"
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
  local conf
  conf=$(node "$DEPLOY_DIR/nats-auth.ts" "$NATS_AUTH_DIR" 127.0.0.1 "$NATS_PORT" "$AGENTHOST_STATE/nats")
  if (exec 3<>/dev/tcp/127.0.0.1/"$NATS_PORT") 2>/dev/null; then
    local pid=""
    [ -s "$RUN_DIR/nats.pid" ] && pid=$(cat "$RUN_DIR/nats.pid")
    if [ -n "$pid" ] && grep -qa -- "$conf" "/proc/$pid/cmdline" 2>/dev/null; then
      kill -HUP "$pid" # reload the permissions table, which may have changed with the code
      return
    fi
    # Ours from before least privilege (no identities): replace it. Anything else is not ours to touch.
    if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then
      say "restarting NATS with TLS and per-service identities"
      kill -TERM "$pid"; for _ in $(seq 1 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    else
      die "port $NATS_PORT is taken by a NATS server deploy did not start; set NATS_URL (and each service's NATS_NKEY_SEED_FILE, NATS_CA_FILE) to use it"
    fi
  fi
  say "starting NATS with JetStream and TLS on 127.0.0.1:$NATS_PORT"
  mkdir -p "$AGENTHOST_STATE/nats"
  nohup nats-server -c "$conf" >"$LOG_DIR/nats.log" 2>&1 &
  remember_pid nats $!
  wait_for 15 bash -c "exec 3<>/dev/tcp/127.0.0.1/$NATS_PORT" || die "NATS did not start (see $LOG_DIR/nats.log)"
}

start_docker() {
  if docker info >/dev/null 2>&1; then return; fi
  say "starting the Docker engine"
  mkdir -p "$AGENTHOST_STATE/docker"
  nohup dockerd --data-root "$AGENTHOST_STATE/docker" >"$LOG_DIR/dockerd.log" 2>&1 &
  remember_pid dockerd $!
  wait_for 60 docker info || die "dockerd did not start (see $LOG_DIR/dockerd.log)"
}

# `infra.sh docker`: the engine alone (the tests bring their own Postgres and NATS as containers).
if [ "${1:-}" = docker ]; then
  [ -n "${DOCKER_HOST:-}" ] || { start_docker; bash "$DEPLOY_DIR/zram-swap.sh"; }
  say "Docker engine ready"
  exit 0
fi

if [ -n "${DATABASE_URL:-}" ]; then TEST_DATABASE_URL="${TEST_DATABASE_URL:-$DATABASE_URL}"; else start_postgres; fi
[ -n "${NATS_URL:-}" ] || start_nats
[ -n "${DOCKER_HOST:-}" ] || { start_docker; bash "$DEPLOY_DIR/zram-swap.sh"; }

umask 077
cat >"$AGENTHOST_STATE/infra.env" <<EOV
${PG_PORT_LOCAL:+PG_ROLES=local}
DATABASE_URL=$DATABASE_URL
TEST_DATABASE_URL=$TEST_DATABASE_URL
NATS_URL=$NATS_URL
${DOCKER_HOST:+DOCKER_HOST=$DOCKER_HOST}
EOV
say "infrastructure ready (Postgres, NATS, Docker)"
