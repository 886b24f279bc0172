# Starting and stopping agenthost's own processes. Sourced by start.sh and stop.sh.

SERVICES=(auth billing-chain provisioner keyvault)

# Secrets generated on first start are kept in $AGENTHOST_STATE/secrets (root only).
ensure_secret() { # name generator-command...
  local file="$AGENTHOST_STATE/secrets/$1"
  if [ ! -s "$file" ]; then
    mkdir -p "$AGENTHOST_STATE/secrets"
    chmod 700 "$AGENTHOST_STATE/secrets"
    (umask 077; "${@:2}" >"$file")
  fi
  cat "$file"
}

# A service's own NATS identity (its nkey seed file) and the CA of NATS's certificate, as env assignments.
nats_identity() { # service
  echo "NATS_NKEY_SEED_FILE=$NATS_AUTH_DIR/$1.nk NATS_CA_FILE=$NATS_AUTH_DIR/tls/ca.pem"
}

start_process() { # name command...
  local name=$1; shift
  local pidfile="$RUN_DIR/$name.pid"
  if [ -s "$pidfile" ] && kill -0 "$(cat "$pidfile")" 2>/dev/null; then
    say "$name already running (pid $(cat "$pidfile"))"
    return
  fi
  # A fresh log per start, so readiness is read from this run's lines (the previous run's log is kept as .1).
  [ -f "$LOG_DIR/$name.log" ] && mv -f "$LOG_DIR/$name.log" "$LOG_DIR/$name.log.1"
  nohup "$@" >"$LOG_DIR/$name.log" 2>&1 &
  remember_pid "$name" $!
}

wait_ready_line() { # name seconds
  local name=$1 seconds=$2
  wait_for "$seconds" grep -q '"event":"ready"' "$LOG_DIR/$name.log" ||
    { tail -20 "$LOG_DIR/$name.log" >&2; die "$name did not become ready (log: $LOG_DIR/$name.log)"; }
}

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
