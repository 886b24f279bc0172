#!/usr/bin/env bash
# Starts Postgres, NATS (JetStream) and the Docker engine when they are not already running, and
# writes their URLs to $AGENTHOST_STATE/infra.env. Servers given by DATABASE_URL, NATS_URL or
# DOCKER_HOST are used as they are.
source "$(dirname "$0")/env.sh"

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
}

start_nats() {
  if (exec 3<>/dev/tcp/127.0.0.1/"$NATS_PORT") 2>/dev/null; then
    NATS_URL="nats://127.0.0.1:$NATS_PORT"
    return
  fi
  say "starting NATS with JetStream on 127.0.0.1:$NATS_PORT"
  mkdir -p "$AGENTHOST_STATE/nats"
  nohup nats-server -js -a 127.0.0.1 -p "$NATS_PORT" -sd "$AGENTHOST_STATE/nats" >"$LOG_DIR/nats.log" 2>&1 &
  remember_pid nats $!
  wait_for 15 bash -c "exec 3<>/dev/tcp/127.0.0.1/$NATS_PORT" || die "NATS did not start (see $LOG_DIR/nats.log)"
  NATS_URL="nats://127.0.0.1:$NATS_PORT"
}

start_docker() {
  if docker info >/dev/null 2>&1; then return; fi
  say "starting the Docker engine"
  mkdir -p "$AGENTHOST_STATE/docker"
  nohup dockerd --data-root "$AGENTHOST_STATE/docker" >"$LOG_DIR/dockerd.log" 2>&1 &
  remember_pid dockerd $!
  wait_for 60 docker info || die "dockerd did not start (see $LOG_DIR/dockerd.log)"
}

if [ -n "${DATABASE_URL:-}" ]; then TEST_DATABASE_URL="${TEST_DATABASE_URL:-$DATABASE_URL}"; else start_postgres; fi
[ -n "${NATS_URL:-}" ] || start_nats
[ -n "${DOCKER_HOST:-}" ] || start_docker

umask 077
cat >"$AGENTHOST_STATE/infra.env" <<EOV
DATABASE_URL=$DATABASE_URL
TEST_DATABASE_URL=$TEST_DATABASE_URL
NATS_URL=$NATS_URL
${DOCKER_HOST:+DOCKER_HOST=$DOCKER_HOST}
EOV
say "infrastructure ready (Postgres, NATS, Docker)"
