#!/usr/bin/env bash
# Starts the whole system on this machine: installs what is missing, starts Postgres, NATS (JetStream),
# the Docker engine and devchain when they are not given, builds the instance images, then the four
# services and the gateway under supervisord (a crashed process is started again within seconds).
# Prints the API URL when the gateway answers and every backend is ready. Running it again applies
# changed settings: every service is restarted.
# Configuration: environment variables, or $AGENTHOST_STATE/agenthost.env (docs/configuration.md).
source "$(dirname "$0")/env.sh"
source "$DEPLOY_DIR/services.sh"
[ -f "$AGENTHOST_STATE/agenthost.env" ] && set -a && source "$AGENTHOST_STATE/agenthost.env" && set +a

bash "$DEPLOY_DIR/install.sh"
bash "$DEPLOY_DIR/infra.sh"
set -a; source "$AGENTHOST_STATE/infra.env"; set +a
bash "$DEPLOY_DIR/images/build.sh" all

# Made once and kept; only keyvault is given the master key, only auth its signing key (deploy/run-service.sh).
ensure_secret master-key bash -c 'head -c 32 /dev/urandom | base64' >/dev/null
# The backup master key: only the provisioner is given it (each archive's key is derived from it; losing it loses the backups).
ensure_secret backup-key bash -c 'head -c 32 /dev/urandom | base64' >/dev/null
# The checkpoint master key: the provisioner's too (a sleeping agent's image is sealed under a key derived from it).
ensure_secret checkpoint-key bash -c 'head -c 32 /dev/urandom | base64' >/dev/null
ensure_secret auth-jwt.pem openssl genpkey -algorithm ed25519 >/dev/null
# The gateway signs an assertion for each call it makes for a user (only the gateway has the private key; the
# backends are given its public key); keyvault opens the provider keys the gateway seals to its public key.
ensure_secret gateway-assertion.pem openssl genpkey -algorithm ed25519 >/dev/null
ensure_secret keyvault-seal.pem openssl genpkey -algorithm x25519 >/dev/null
# billing-chain seals the keeper's Solana secret key in its schema under this key (base64 of 32 bytes; billing-chain's alone).
ensure_secret billing-data-key bash -c 'head -c 32 /dev/urandom | base64' >/dev/null
# The last 32 bytes of a public key's DER form are the raw key: base64 of them is how public keys are configured.
raw_public_key() { openssl pkey -in "$AGENTHOST_STATE/secrets/$1" -pubout -outform DER | tail -c 32 | base64; }

# One system user per service (the provisioner runs as root), each able to read only its own secrets.
getent group agenthost >/dev/null || groupadd --system agenthost
for s in "${SERVICES[@]}" gateway devchain edge; do
  u=$(service_user "$s")
  id "$u" >/dev/null 2>&1 || useradd --system --gid agenthost --home-dir /nonexistent --no-create-home --shell /usr/sbin/nologin "$u"
  [ -f "$NATS_AUTH_DIR/$s.nk" ] && chown "$u":root "$NATS_AUTH_DIR/$s.nk" && chmod 400 "$NATS_AUTH_DIR/$s.nk"
done
# The gateway's socket for the edge (GATEWAY_EDGE_SOCKET): X-Forwarded-For is believed there, so only Caddy (the edge's
# user, alone in group agenthost-edge) and the gateway reach its directory; the socket takes the directory's group.
getent group agenthost-edge >/dev/null || groupadd --system agenthost-edge
usermod -a -G agenthost-edge "$(service_user edge)"
install -d -o "$(service_user gateway)" -g agenthost-edge -m 2750 "$RUN_DIR/gateway"
GATEWAY_EDGE_SOCKET="$RUN_DIR/gateway/edge.sock"
# The gateway listens on loopback and on the instance bridge's address (the host interface the provisioner names
# after INSTANCE_NETWORK), never on the other interfaces: the edge is the only public door.
INSTANCE_BRIDGE=$(cd "$REPO_DIR/services/provisioner" && node --input-type=module -e "
  const { provisionerConfig } = await import('./src/config.ts');
  const { bridgeNameFor } = await import('./src/docker/network.ts');
  console.log(bridgeNameFor(provisionerConfig.shape.INSTANCE_NETWORK.parse(process.env.INSTANCE_NETWORK || undefined)));
") || die "invalid INSTANCE_NETWORK"
# The identities' directory is traversable (each seed is readable by its own user only); the CA is public.
chmod 711 "$NATS_AUTH_DIR" "$NATS_AUTH_DIR/tls"
chmod 644 "$NATS_AUTH_DIR/tls/ca.pem"
chmod 711 "$AGENTHOST_STATE/secrets"
chown "$(service_user auth)":root "$AGENTHOST_STATE/secrets/auth-jwt.pem" && chmod 400 "$AGENTHOST_STATE/secrets/auth-jwt.pem"
chown "$(service_user gateway)":root "$AGENTHOST_STATE/secrets/gateway-assertion.pem" && chmod 400 "$AGENTHOST_STATE/secrets/gateway-assertion.pem"
chown "$(service_user keyvault)":root "$AGENTHOST_STATE/secrets/keyvault-seal.pem" && chmod 400 "$AGENTHOST_STATE/secrets/keyvault-seal.pem"
chown "$(service_user billing-chain)":root "$AGENTHOST_STATE/secrets/billing-data-key" && chmod 400 "$AGENTHOST_STATE/secrets/billing-data-key"

programs=()
if [ -z "${SOLANA_RPC_URL:-}" ]; then
  programs+=(devchain)
  # billing-chain asks devchain for the program id and treasury when they are not configured.
  SOLANA_RPC_URL="http://127.0.0.1:$DEVCHAIN_PORT"
fi
programs+=("${SERVICES[@]}" gateway edge caddy)
if [ "$METRICS_PORT_BASE" != 0 ]; then
  write_observability
  [ "$PROMETHEUS_PORT" != 0 ] && programs+=(prometheus)
fi

# The edge: Caddy's base configuration for this start's settings, its data (certificates, the local CA) and the
# route keeper's socket, all owned by the edge's user. Instances get their https address.
port_suffix=""; [ "$EDGE_HTTPS_PORT" = 443 ] || port_suffix=":$EDGE_HTTPS_PORT"
default_url="https://{id}.$EDGE_DOMAIN$port_suffix"
INSTANCE_URL_TEMPLATE="${INSTANCE_URL_TEMPLATE:-$default_url}"
mkdir -p "$EDGE_DIR/data"
chown -R "$(service_user edge)":agenthost "$EDGE_DIR" && chmod 750 "$EDGE_DIR"
EDGE_DOMAIN="$EDGE_DOMAIN" EDGE_HTTPS_PORT="$EDGE_HTTPS_PORT" EDGE_HTTP_PORT="$EDGE_HTTP_PORT" EDGE_DATA_DIR="$EDGE_DIR/data" \
  EDGE_ADMIN_SOCKET="$EDGE_DIR/admin.sock" EDGE_KEEPER_SOCKET="$EDGE_DIR/keeper.sock" EDGE_GATEWAYS="unix/$GATEWAY_EDGE_SOCKET" \
  node "$REPO_DIR/services/edge/src/write-config.ts" >"$EDGE_DIR/caddy.json.new" || die "invalid edge settings"
mv -f "$EDGE_DIR/caddy.json.new" "$EDGE_DIR/caddy.json" && chmod 644 "$EDGE_DIR/caddy.json"
source "$DEPLOY_DIR/edge-limit.sh"
edge_limit_on

# The warm pool (docs/decisions/0063-...): one checkpointed agent per tier a new user starts on, claimed by a create
# (it runs in about a second instead of a boot), unless agenthost.env says otherwise (`{}`: none).
default_pool='{"openclaw":{"pro":1,"free":1}}'
WARM_POOL_JSON="${WARM_POOL_JSON:-$default_pool}"

# What this start decided, for deploy/run-service.sh (which supervisord runs for every (re)start).
(umask 077; cat >"$RUN_DIR/services.env" <<EOV
GATEWAY_PORT=$GATEWAY_PORT
GATEWAY_HOST=${GATEWAY_HOST:-127.0.0.1}
GATEWAY_INSTANCE_BRIDGE=$INSTANCE_BRIDGE
GATEWAY_EDGE_SOCKET=$GATEWAY_EDGE_SOCKET
DEVCHAIN_PORT=$DEVCHAIN_PORT
SOLANA_RPC_URL=$SOLANA_RPC_URL
GATEWAY_ASSERTION_PUBLIC_KEYS=$(raw_public_key gateway-assertion.pem)
KEYVAULT_SEAL_PUBLIC_KEY=$(raw_public_key keyvault-seal.pem)
INSTANCE_URL_TEMPLATE=$INSTANCE_URL_TEMPLATE
EDGE_DOMAIN=$EDGE_DOMAIN
EDGE_HTTPS_PORT=$EDGE_HTTPS_PORT
EDGE_HTTP_PORT=$EDGE_HTTP_PORT
EDGE_DATA_DIR=$EDGE_DIR/data
EDGE_ADMIN_SOCKET=$EDGE_DIR/admin.sock
EDGE_KEEPER_SOCKET=$EDGE_DIR/keeper.sock
EDGE_GATEWAYS=unix/$GATEWAY_EDGE_SOCKET
WARM_POOL_JSON=$(printf %q "$WARM_POOL_JSON")
EOV
)

# Logs are for root and the agenthost services only (supervisord writes new ones 0640, and rotates them).
chmod 750 "$LOG_DIR"
find "$LOG_DIR" -maxdepth 1 -type f -exec chmod o-rwx {} +

# shellcheck disable=SC2046 # one word per program
write_supervisor_conf $(supervised_infra) "${programs[@]}"
ensure_supervisor
# Restart what runs, so this start's settings and code are what serves (the servers under them stay up).
supervisorctl_ stop "${programs[@]}" >/dev/null 2>&1 || true
if [[ " ${programs[*]} " == *" devchain "* ]]; then
  say "starting devchain (local Solana JSON-RPC) on 127.0.0.1:$DEVCHAIN_PORT"
  start_program devchain
  wait_for 30 curl -sf -X POST -H 'content-type: application/json' -d '{"jsonrpc":"2.0","id":1,"method":"getHealth"}' "$SOLANA_RPC_URL" ||
    die "devchain did not start (log: $LOG_DIR/devchain.log)"
fi
for s in "${SERVICES[@]}" gateway edge caddy; do
  say "starting $s"
  start_program "$s"
done
wait_for 90 curl -sf "http://127.0.0.1:$GATEWAY_PORT/api/health/ready" ||
  { supervisorctl_ status >&2; die "not every service became ready (logs: $LOG_DIR)"; }
if [[ " ${programs[*]} " == *" prometheus "* ]]; then
  say "starting prometheus on 127.0.0.1:$PROMETHEUS_PORT (metrics of every service, alert rules: deploy/observability)"
  start_program prometheus
fi
ca="$EDGE_DIR/data/pki/authorities/local/root.crt"
if [ -z "${EDGE_ACME_EMAIL:-}" ]; then
  edge_ready=(curl -sSf --max-time 5 --cacert "$ca" --resolve "$EDGE_DOMAIN:$EDGE_HTTPS_PORT:127.0.0.1" "https://$EDGE_DOMAIN$port_suffix/api/health/ready")
  if ! wait_for 30 "${edge_ready[@]}"; then
    # What the last try got, and the end of both logs: a start that fails should say why without another step.
    "${edge_ready[@]}" >/dev/null || true
    for f in caddy edge; do echo "--- last lines of $LOG_DIR/$f.log" >&2; tail -n 15 "$LOG_DIR/$f.log" >&2 || true; done
    die "the edge does not answer (logs: $LOG_DIR/caddy.log, $LOG_DIR/edge.log)"
  fi
  say "local CA (trust it to reach the edge without warnings): $ca"
fi
say "agenthost is up: https://$EDGE_DOMAIN$port_suffix/api  (instances: https://<instance_id>.$EDGE_DOMAIN$port_suffix/; logs: $LOG_DIR, status: supervisorctl -c $SUPERVISOR_CONF status, stop: bash deploy/stop.sh)"
