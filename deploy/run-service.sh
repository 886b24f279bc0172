#!/usr/bin/env bash
# Runs one of agenthost's processes in the foreground, as supervisord starts it: loads the settings that
# deploy/start.sh recorded and the operator's agenthost.env, gives the process its own NATS identity, and
# gives secrets only to the process that needs them (the master key only to keyvault, a database URL only to the
# five services, each its own role's).
source "$(dirname "$0")/env.sh"
name=${1:?usage: run-service.sh <service> | doctor [--json]}
shift
# `doctor` (bin/agenthost doctor) runs the provisioner's audit with the provisioner's settings and database role.
tool=
if [ "$name" = doctor ]; then tool=doctor; name=provisioner; fi
if [ "$tool" = doctor ] && [ ! -f "$RUN_DIR/services.env" ]; then
  echo "agenthost doctor: cannot audit: the system was never started on this machine (bash deploy/start.sh)" >&2
  exit 2
fi
set -a
source "$AGENTHOST_STATE/infra.env"
[ -f "$AGENTHOST_STATE/agenthost.env" ] && source "$AGENTHOST_STATE/agenthost.env"
source "$RUN_DIR/services.env"
set +a
unset TEST_DATABASE_URL
# Every credential and the one program that uses it; every other program runs without it (or its _FILE form).
# The backup bucket's secret (agenthost.env names its file) is the provisioner's alone; another service would also
# try to read the file, which is not its to read. DOCKER_HOST reaches the Docker engine, which is root on this host.
CREDENTIALS=(
  MASTER_KEY_ENCRYPTION:keyvault MASTER_KEYS_PREVIOUS:keyvault KEYVAULT_SEAL_PRIVATE_KEY:keyvault
  AUTH_JWT_PRIVATE_KEY:auth GATEWAY_ASSERTION_PRIVATE_KEY:gateway GATEWAY_DATA_KEY:gateway
  KEEPER_SECRET_KEY:billing-chain BILLING_DATA_KEY:billing-chain
  BACKUP_KEY:provisioner CHECKPOINT_KEY:provisioner BACKUP_S3_ACCESS_KEY_ID:provisioner BACKUP_S3_SECRET_ACCESS_KEY:provisioner DOCKER_HOST:provisioner
  AWS_ACCESS_KEY_ID:provisioner AWS_SECRET_ACCESS_KEY:provisioner AWS_SESSION_TOKEN:provisioner AWS_SHARED_CREDENTIALS_FILE:provisioner
)
for pair in "${CREDENTIALS[@]}"; do
  [ "${pair#*:}" = "$name" ] || unset "${pair%%:*}" "${pair%%:*}_FILE"
done
case "$name" in
  keyvault)
    MASTER_KEY_ENCRYPTION="${MASTER_KEY_ENCRYPTION:-$(cat "$AGENTHOST_STATE/secrets/master-key")}"
    export MASTER_KEY_ENCRYPTION
    [ -n "${KEYVAULT_SEAL_PRIVATE_KEY:-}" ] || export KEYVAULT_SEAL_PRIVATE_KEY_FILE="$AGENTHOST_STATE/secrets/keyvault-seal.pem" ;;
  auth)
    # The signing key stays in its file (root only here; auth reads it at start), not in the environment.
    [ -n "${AUTH_JWT_PRIVATE_KEY:-}" ] || export AUTH_JWT_PRIVATE_KEY_FILE="$AGENTHOST_STATE/secrets/auth-jwt.pem" ;;
  gateway)
    # Its assertion key stays in its file, readable by the gateway's user only.
    [ -n "${GATEWAY_ASSERTION_PRIVATE_KEY:-}" ] || export GATEWAY_ASSERTION_PRIVATE_KEY_FILE="$AGENTHOST_STATE/secrets/gateway-assertion.pem" ;;
  billing-chain)
    # The key that seals the keeper's secret key in the billing schema, in a file readable by billing-chain's user only.
    [ -n "${BILLING_DATA_KEY:-}" ] || export BILLING_DATA_KEY_FILE="$AGENTHOST_STATE/secrets/billing-data-key" ;;
  provisioner)
    # The backup and checkpoint master keys stay in their files (root only; the provisioner runs as root), not in the environment.
    [ -n "${BACKUP_KEY:-}" ] || export BACKUP_KEY_FILE="$AGENTHOST_STATE/secrets/backup-key"
    [ -n "${CHECKPOINT_KEY:-}" ] || export CHECKPOINT_KEY_FILE="$AGENTHOST_STATE/secrets/checkpoint-key" ;;
esac
# The database: only the five services get a URL, each its own role's. With the local Postgres that is the role
# deploy/pg-roles.sh made, owning the service's schema and nothing else. With an external DATABASE_URL, the URL in
# $AGENTHOST_STATE/secrets/database-url-<service> (root only, as the swarm's secrets of that name) when the operator
# wrote one, else DATABASE_URL as given: then every service shares that role (README).
schema=
for pair in "${SERVICE_SCHEMAS[@]}"; do [ "${pair%%:*}" = "$name" ] && schema=${pair#*:}; done
if [ -z "$schema" ]; then
  unset DATABASE_URL DATABASE_URL_FILE
elif [ "${PG_ROLES:-}" = local ]; then
  unset DATABASE_URL_FILE
  DATABASE_URL="postgres://agenthost_$schema:$(cat "$AGENTHOST_STATE/secrets/pg-$schema")@${DATABASE_URL#*@}"
elif [ -s "$AGENTHOST_STATE/secrets/database-url-$name" ]; then
  unset DATABASE_URL_FILE
  DATABASE_URL="$(cat "$AGENTHOST_STATE/secrets/database-url-$name")"
fi
unset PG_ROLES
# The doctor also reads supervisord's view of this host's processes (a crash loop is drift).
[ "$tool" = doctor ] && AGENTHOST_SUPERVISOR_CONF="$AGENTHOST_STATE/supervisor/supervisord.conf" exec node "$REPO_DIR/services/provisioner/src/doctor/main.ts" "$@"
# Caddy (internet-facing) and devchain use no setting of infra.env or agenthost.env but their own: each starts with
# an empty environment and is given only what it reads, so nothing reaches them that they could leak.
# Caddy runs as the edge's user, with the one capability of binding ports below 1024, on the configuration
# deploy/start.sh wrote for this start (never changed while it runs; routes come from the edge's route keeper).
if [ "$name" = caddy ]; then
  exec env -i PATH="$PATH" HOME="$EDGE_DIR" XDG_DATA_HOME="$EDGE_DIR" XDG_CONFIG_HOME="$EDGE_DIR" \
    setpriv --reuid "$(service_user edge)" --regid agenthost --init-groups --inh-caps=-all,+net_bind_service \
    --ambient-caps=-all,+net_bind_service --bounding-set=-all,+net_bind_service --no-new-privs \
    caddy run --config "$EDGE_DIR/caddy.json"
fi
main="$REPO_DIR/services/$name/src/main.ts"
own_env=()
if [ "$name" = devchain ]; then
  main="$REPO_DIR/packages/devchain/src/main.ts"
  own_env=(env -i PATH="$PATH" HOME=/nonexistent)
  for v in $(compgen -e); do [[ $v == DEVCHAIN_* ]] && own_env+=("$v=${!v}"); done
else
  export NATS_NKEY_SEED_FILE="$NATS_AUTH_DIR/$name.nk" NATS_CA_FILE="$NATS_AUTH_DIR/tls/ca.pem"
  # Its operator port (deploy/observability's Prometheus scrapes it; start.sh wrote it into the targets).
  export METRICS_PORT="$(metrics_port "$name")"
fi
# Everything above read root-only secrets; the service itself runs as its own unprivileged user, which can
# read its own seed (and auth its own signing key) and nothing of the others'. The provisioner stays root:
# it drives Docker, the host firewall and the loop-mounted volumes.
[ "$name" = provisioner ] && exec node "$main"
export HOME=/nonexistent
exec "${own_env[@]}" setpriv --reuid "$(service_user "$name")" --regid agenthost --init-groups --inh-caps=-all --bounding-set=-all --no-new-privs node "$main"
