# agenthost's own processes (devchain and the five services) run under supervisord, Debian's process
# supervisor: a process that crashes is started again within seconds, its output goes to a log file that
# rotates, and its state is what supervisord says, not a pid file. Sourced by start.sh and stop.sh.

SERVICES=(auth billing-chain provisioner keyvault)
SUPERVISOR_DIR="$AGENTHOST_STATE/supervisor"
SUPERVISOR_CONF="$SUPERVISOR_DIR/supervisord.conf"

supervisorctl_() { supervisorctl -c "$SUPERVISOR_CONF" "$@"; }
supervisor_running() { [ -f "$SUPERVISOR_CONF" ] && supervisorctl_ pid >/dev/null 2>&1; }

# One [program:…] section. Each program is started by deploy/run-service.sh, which gives it its own
# environment (its NATS identity; the master key only to keyvault), so this file holds no secret.
program_section() { # name
  cat <<EOC
[program:$1]
command=bash $DEPLOY_DIR/run-service.sh $1
environment=AGENTHOST_STATE="$AGENTHOST_STATE",AGENTHOST_CACHE="$AGENTHOST_CACHE"
autostart=false
autorestart=true
startsecs=3
startretries=1000000
stopsignal=TERM
stopwaitsecs=15
stopasgroup=true
killasgroup=true
redirect_stderr=true
stdout_logfile=$LOG_DIR/$1.log
stdout_logfile_maxbytes=50MB
stdout_logfile_backups=5

EOC
}

# The servers the single host depends on (deploy/run-infra.sh): Postgres, NATS and the Docker engine, when infra.sh
# started them. Each is recorded in $RUN_DIR/infra/<name> with its arguments, so that every later writer of this
# file (infra.sh, start.sh) writes the same section and `supervisorctl update` leaves a running one alone; a
# changed argument (a port, live-restore) restarts it. They start first (priority) and on supervisord's own start.
INFRA_PROGRAMS=(postgres nats dockerd)
supervised_infra() { local p; for p in "${INFRA_PROGRAMS[@]}"; do [ -f "$RUN_DIR/infra/$p" ] && echo "$p"; done; return 0; }
record_infra() { mkdir -p "$RUN_DIR/infra" && printf '%s\n' "${*:2}" >"$RUN_DIR/infra/$1"; }
infra_section() { # name
  local stop=TERM wait=30
  # Postgres: a fast shutdown (TERM is its smart one, which waits for every client to leave). The engine may take
  # a while to stop its containers when live-restore is off.
  case "$1" in postgres) stop=INT ;; dockerd) wait=120 ;; esac
  cat <<EOC
[program:$1]
command=bash $DEPLOY_DIR/run-infra.sh $1 $(cat "$RUN_DIR/infra/$1")
environment=AGENTHOST_STATE="$AGENTHOST_STATE",AGENTHOST_CACHE="$AGENTHOST_CACHE"
priority=10
autostart=true
autorestart=true
startsecs=2
startretries=1000000
stopsignal=$stop
stopwaitsecs=$wait
redirect_stderr=true
stdout_logfile=$LOG_DIR/$1.log
stdout_logfile_maxbytes=50MB
stdout_logfile_backups=3

EOC
}

# The programs of the running configuration other than the infrastructure (for infra.sh, which rewrites the file
# without changing them).
configured_programs() {
  [ -f "$SUPERVISOR_CONF" ] || return 0
  sed -n 's/^\[program:\(.*\)\]$/\1/p' "$SUPERVISOR_CONF" | grep -vxE "$(IFS='|'; echo "${INFRA_PROGRAMS[*]}")" || true
}

# Prometheus with deploy/observability's configuration and alert rules, scraping the targets start.sh wrote. It
# starts with an empty environment: supervisord's own holds start.sh's (the database's admin URL among it).
OBSERVABILITY_DIR="$AGENTHOST_STATE/observability"
prometheus_section() {
  # As Debian's own unprivileged prometheus user when the package made one (it owns the data directory).
  local user=""
  id prometheus >/dev/null 2>&1 && user="user=prometheus"
  cat <<EOC
[program:prometheus]
$user
command=env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin prometheus --config.file=$OBSERVABILITY_DIR/prometheus.yml --storage.tsdb.path=$OBSERVABILITY_DIR/data --web.listen-address=127.0.0.1:$PROMETHEUS_PORT --storage.tsdb.retention.time=15d
autostart=false
autorestart=true
startsecs=3
stopsignal=TERM
stopwaitsecs=15
redirect_stderr=true
stdout_logfile=$LOG_DIR/prometheus.log
stdout_logfile_maxbytes=50MB
stdout_logfile_backups=3

EOC
}

# Prometheus's configuration and one file of targets per service (file service discovery): each service's
# operator port on this machine (each sample carries its service label already). Prometheus re-reads the target
# files when they change.
write_observability() {
  mkdir -p "$OBSERVABILITY_DIR/targets" "$OBSERVABILITY_DIR/data"
  chmod 755 "$OBSERVABILITY_DIR" "$OBSERVABILITY_DIR/targets"
  if id prometheus >/dev/null 2>&1; then chown -R prometheus "$OBSERVABILITY_DIR/data"; fi
  cp "$DEPLOY_DIR/observability/prometheus.yml" "$DEPLOY_DIR/observability/alerts.yml" "$OBSERVABILITY_DIR/"
  local s
  for s in "${SERVICES[@]}" gateway; do
    printf '[{"targets":["127.0.0.1:%s"],"labels":{"node":"%s"}}]\n' "$(metrics_port "$s")" "$(hostname)" >"$OBSERVABILITY_DIR/targets/$s.json.new"
    mv -f "$OBSERVABILITY_DIR/targets/$s.json.new" "$OBSERVABILITY_DIR/targets/$s.json"
  done
}

write_supervisor_conf() { # programs...
  mkdir -p "$SUPERVISOR_DIR"
  chmod 700 "$SUPERVISOR_DIR"
  {
    cat <<EOC
; Written by deploy/start.sh; changes are lost at the next start.
[unix_http_server]
file=$RUN_DIR/supervisor.sock
chmod=0700

[supervisord]
logfile=$LOG_DIR/supervisord.log
logfile_maxbytes=10MB
logfile_backups=3
pidfile=$RUN_DIR/supervisord.pid
; Logs are readable by their owner and group only.
umask=027
; Every program inherits this working directory. Where supervisord was started (a checkout, a CI clone) may be
; deleted later, and Postgres then cannot start again ("could not locate my own executable path").
directory=/

[rpcinterface:supervisor]
supervisor.rpcinterface_factory = supervisor.rpcinterface:make_main_rpcinterface

[supervisorctl]
serverurl=unix://$RUN_DIR/supervisor.sock

EOC
    for p in "$@"; do
      case "$p" in
        prometheus) prometheus_section ;;
        postgres | nats | dockerd) infra_section "$p" ;;
        *) program_section "$p" ;;
      esac
    done
  } >"$SUPERVISOR_CONF.new"
  chmod 600 "$SUPERVISOR_CONF.new"
  mv -f "$SUPERVISOR_CONF.new" "$SUPERVISOR_CONF"
}

# Start supervisord, or make a running one read the configuration again.
ensure_supervisor() {
  if supervisor_running; then
    supervisorctl_ reread >/dev/null
    supervisorctl_ update >/dev/null
  else
    say "starting supervisord"
    # supervisord opens its own log before it applies the umask of its configuration: started under that umask,
    # supervisord.log is 0640 from the start, as every log it writes or rotates.
    (umask 027 && supervisord -c "$SUPERVISOR_CONF")
    wait_for 15 supervisor_running || die "supervisord did not start (see $LOG_DIR/supervisord.log)"
  fi
}

start_program() { # name
  supervisorctl_ start "$1" >/dev/null 2>&1 || true
  local state
  state=$(supervisorctl_ status "$1" 2>/dev/null | awk '{print $2}')
  case "$state" in
    RUNNING|STARTING) ;;
    *) tail -20 "$LOG_DIR/$1.log" >&2; die "$1 did not start: $state (log: $LOG_DIR/$1.log)" ;;
  esac
}

# Stop every program and supervisord itself.
stop_supervisor() {
  supervisor_running || return 0
  supervisorctl_ stop all >/dev/null 2>&1 || true
  supervisorctl_ shutdown >/dev/null 2>&1 || true
  local pid
  pid=$(cat "$RUN_DIR/supervisord.pid" 2>/dev/null || true)
  for _ in $(seq 1 100); do [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
  say "stopped the services and supervisord"
}
