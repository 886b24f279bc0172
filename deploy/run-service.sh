#!/usr/bin/env bash
# Runs one of agenthost's processes in the foreground, as supervisord starts it: loads the settings that
# deploy/start.sh recorded and the operator's agenthost.env, gives the process its own NATS identity, and
# gives secrets only to the process that needs them (the master key only to keyvault).
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
# The backup bucket's secret (agenthost.env names its file) is the provisioner's alone; another service would also
# try to read the file, which is not its to read.
[ "$name" = provisioner ] || unset BACKUP_S3_SECRET_ACCESS_KEY BACKUP_S3_SECRET_ACCESS_KEY_FILE
case "$name" in
  devchain)
    unset MASTER_KEY_ENCRYPTION AUTH_JWT_PRIVATE_KEY GATEWAY_ASSERTION_PRIVATE_KEY KEYVAULT_SEAL_PRIVATE_KEY BACKUP_KEY ;;
  keyvault)
    unset AUTH_JWT_PRIVATE_KEY GATEWAY_ASSERTION_PRIVATE_KEY BACKUP_KEY
    MASTER_KEY_ENCRYPTION="${MASTER_KEY_ENCRYPTION:-$(cat "$AGENTHOST_STATE/secrets/master-key")}"
    export MASTER_KEY_ENCRYPTION
    [ -n "${KEYVAULT_SEAL_PRIVATE_KEY:-}" ] || export KEYVAULT_SEAL_PRIVATE_KEY_FILE="$AGENTHOST_STATE/secrets/keyvault-seal.pem" ;;
  auth)
    unset MASTER_KEY_ENCRYPTION MASTER_KEYS_PREVIOUS GATEWAY_ASSERTION_PRIVATE_KEY KEYVAULT_SEAL_PRIVATE_KEY BACKUP_KEY
    # The signing key stays in its file (root only here; auth reads it at start), not in the environment.
    [ -n "${AUTH_JWT_PRIVATE_KEY:-}" ] || export AUTH_JWT_PRIVATE_KEY_FILE="$AGENTHOST_STATE/secrets/auth-jwt.pem" ;;
  gateway)
    unset MASTER_KEY_ENCRYPTION MASTER_KEYS_PREVIOUS AUTH_JWT_PRIVATE_KEY KEYVAULT_SEAL_PRIVATE_KEY BACKUP_KEY
    # Its assertion key stays in its file, readable by the gateway's user only.
    [ -n "${GATEWAY_ASSERTION_PRIVATE_KEY:-}" ] || export GATEWAY_ASSERTION_PRIVATE_KEY_FILE="$AGENTHOST_STATE/secrets/gateway-assertion.pem" ;;
  provisioner)
    unset MASTER_KEY_ENCRYPTION MASTER_KEYS_PREVIOUS AUTH_JWT_PRIVATE_KEY GATEWAY_ASSERTION_PRIVATE_KEY KEYVAULT_SEAL_PRIVATE_KEY
    # The backup master key stays in its file (root only; the provisioner runs as root), not in the environment.
    [ -n "${BACKUP_KEY:-}" ] || export BACKUP_KEY_FILE="$AGENTHOST_STATE/secrets/backup-key" ;;
  *)
    unset MASTER_KEY_ENCRYPTION MASTER_KEYS_PREVIOUS AUTH_JWT_PRIVATE_KEY GATEWAY_ASSERTION_PRIVATE_KEY KEYVAULT_SEAL_PRIVATE_KEY BACKUP_KEY ;;
esac
# With the local Postgres, each service connects as its own role, which owns its schema and nothing else.
if [ "${PG_ROLES:-}" = local ]; then
  for pair in "${SERVICE_SCHEMAS[@]}"; do
    [ "${pair%%:*}" = "$name" ] || continue
    schema=${pair#*:}
    DATABASE_URL="postgres://agenthost_$schema:$(cat "$AGENTHOST_STATE/secrets/pg-$schema")@${DATABASE_URL#*@}"
  done
fi
[ "$tool" = doctor ] && exec node "$REPO_DIR/services/provisioner/src/doctor/main.ts" "$@"
# Caddy runs as the edge's user, with the one capability of binding ports below 1024, on the configuration
# deploy/start.sh wrote for this start (never changed while it runs; routes come from the edge's route keeper).
if [ "$name" = caddy ]; then
  export HOME="$EDGE_DIR" XDG_DATA_HOME="$EDGE_DIR" XDG_CONFIG_HOME="$EDGE_DIR"
  exec setpriv --reuid "$(service_user edge)" --regid agenthost --init-groups --inh-caps=-all,+net_bind_service \
    --ambient-caps=-all,+net_bind_service --bounding-set=-all,+net_bind_service --no-new-privs \
    caddy run --config "$EDGE_DIR/caddy.json"
fi
main="$REPO_DIR/services/$name/src/main.ts"
if [ "$name" = devchain ]; then main="$REPO_DIR/packages/devchain/src/main.ts"; else
  export NATS_NKEY_SEED_FILE="$NATS_AUTH_DIR/$name.nk" NATS_CA_FILE="$NATS_AUTH_DIR/tls/ca.pem"
  # Its operator port (deploy/observability's Prometheus scrapes it; start.sh wrote it into the targets).
  export METRICS_PORT="$(metrics_port "$name")"
fi
# Everything above read root-only secrets; the service itself runs as its own unprivileged user, which can
# read its own seed (and auth its own signing key) and nothing of the others'. The provisioner stays root:
# it drives Docker, the host firewall and the loop-mounted volumes.
[ "$name" = provisioner ] && exec node "$main"
export HOME=/nonexistent
exec setpriv --reuid "$(service_user "$name")" --regid agenthost --init-groups --inh-caps=-all --bounding-set=-all --no-new-privs node "$main"
