#!/usr/bin/env bash
# Stops what deploy/start.sh started, and nothing else: servers that were already running when it
# started (or that DATABASE_URL / NATS_URL / DOCKER_HOST pointed at) are left alone.
source "$(dirname "$0")/env.sh"
source "$DEPLOY_DIR/services.sh"

stop_supervisor
# What supervisord ran is stopped with it (Postgres, NATS and the engine last): the next start decides again which
# of them are ours to run.
rm -rf "$RUN_DIR/infra"
source "$DEPLOY_DIR/edge-limit.sh"
edge_limit_off
# Ours from before they were supervised.
stop_process nats
stop_process dockerd
if [ -f "$RUN_DIR/postgres.started" ]; then
  runuser -u agenthost-pg -- /usr/lib/postgresql/15/bin/pg_ctl -D "$AGENTHOST_STATE/pg" -m fast stop >/dev/null 2>&1 || true
  rm -f "$RUN_DIR/postgres.started"
  say "stopped Postgres"
fi
