#!/usr/bin/env bash
# Starts the whole system on this machine: installs what is missing, starts Postgres, NATS (JetStream),
# the Docker engine and devchain when they are not given, builds the instance images, then the four
# services and the gateway. Prints the API URL when the gateway answers and every backend is ready.
# Configuration: environment variables, or $AGENTHOST_STATE/agenthost.env (see README).
source "$(dirname "$0")/env.sh"
source "$DEPLOY_DIR/services.sh"
[ -f "$AGENTHOST_STATE/agenthost.env" ] && set -a && source "$AGENTHOST_STATE/agenthost.env" && set +a

bash "$DEPLOY_DIR/install.sh"
bash "$DEPLOY_DIR/infra.sh"
set -a; source "$AGENTHOST_STATE/infra.env"; set +a
bash "$DEPLOY_DIR/images/build.sh" all

if [ -z "${SOLANA_RPC_URL:-}" ]; then
  say "starting devchain (local Solana JSON-RPC) on 127.0.0.1:$DEVCHAIN_PORT"
  DEVCHAIN_PORT=$DEVCHAIN_PORT start_process devchain node "$REPO_DIR/packages/devchain/src/main.ts"
  wait_for 30 curl -sf -X POST -H 'content-type: application/json' -d '{"jsonrpc":"2.0","id":1,"method":"getHealth"}' "http://127.0.0.1:$DEVCHAIN_PORT" ||
    die "devchain did not start (log: $LOG_DIR/devchain.log)"
  # billing-chain asks devchain for the program id and treasury when they are not configured.
  export SOLANA_RPC_URL="http://127.0.0.1:$DEVCHAIN_PORT"
fi

MASTER_KEY_ENCRYPTION="${MASTER_KEY_ENCRYPTION:-$(ensure_secret master-key bash -c 'head -c 32 /dev/urandom | base64')}"
export MASTER_KEY_ENCRYPTION GATEWAY_PORT

for s in "${SERVICES[@]}"; do
  say "starting $s"
  start_process "$s" env $(nats_identity "$s") node "$REPO_DIR/services/$s/src/main.ts"
done
for s in "${SERVICES[@]}"; do wait_ready_line "$s" 60; done
say "starting gateway on port $GATEWAY_PORT"
start_process gateway env $(nats_identity gateway) node "$REPO_DIR/services/gateway/src/main.ts"
wait_for 60 curl -sf "http://127.0.0.1:$GATEWAY_PORT/api/health/ready" || die "gateway not ready (log: $LOG_DIR/gateway.log)"
say "agenthost is up: http://127.0.0.1:$GATEWAY_PORT/api  (logs: $LOG_DIR, stop: bash deploy/stop.sh)"
