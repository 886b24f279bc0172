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
  export SOLANA_RPC_URL="http://127.0.0.1:$DEVCHAIN_PORT"
  chain_config=$(curl -sf -X POST -H 'content-type: application/json' -d '{"jsonrpc":"2.0","id":1,"method":"devchain_getConfig"}' "$SOLANA_RPC_URL")
  export SUBSCRIPTION_PROGRAM_ID="${SUBSCRIPTION_PROGRAM_ID:-$(node -e 'console.log(JSON.parse(process.argv[1]).result.programId)' "$chain_config")}"
  export TREASURY_ADDRESS="${TREASURY_ADDRESS:-$(node -e 'console.log(JSON.parse(process.argv[1]).result.treasury)' "$chain_config")}"
fi

MASTER_KEY_ENCRYPTION="${MASTER_KEY_ENCRYPTION:-$(ensure_secret master-key bash -c 'head -c 32 /dev/urandom | base64')}"
KEEPER_SECRET_KEY="${KEEPER_SECRET_KEY:-$(ensure_secret keeper-key node -e 'console.log(JSON.stringify([...require("node:crypto").randomBytes(32)]))')}"
export MASTER_KEY_ENCRYPTION KEEPER_SECRET_KEY GATEWAY_PORT

for s in "${SERVICES[@]}"; do
  say "starting $s"
  start_process "$s" node "$REPO_DIR/services/$s/src/main.ts"
done
for s in "${SERVICES[@]}"; do wait_ready_line "$s" 60; done
say "starting gateway on port $GATEWAY_PORT"
start_process gateway node "$REPO_DIR/services/gateway/src/main.ts"
wait_for 60 curl -sf "http://127.0.0.1:$GATEWAY_PORT/api/health/ready" || die "gateway not ready (log: $LOG_DIR/gateway.log)"
say "agenthost is up: http://127.0.0.1:$GATEWAY_PORT/api  (logs: $LOG_DIR, stop: bash deploy/stop.sh)"
