#!/usr/bin/env bash
# Runs one of the servers agenthost's single host depends on, in the foreground, as supervisord starts it:
#   run-infra.sh postgres <port> <fsync>   the local Postgres, as its own system user
#   run-infra.sh nats <config>             NATS with JetStream (deploy/nats-auth.ts wrote the config)
#   run-infra.sh dockerd <on|off>          the Docker engine, with or without live-restore
# supervisord starts each again within seconds when it dies (deploy/services.sh infra_section), so a killed
# Postgres, NATS or engine comes back without an operator. Each prepares what a reboot or a crash takes away
# (its /run directory, a stale pid file) and then replaces itself with the server, so supervisord's pid is the server's.
source "$(dirname "$0")/env.sh"
name=${1:?usage: run-infra.sh postgres <port> <fsync> | nats <config> | dockerd <on|off>}
arg=${2:?usage: run-infra.sh $name <argument>}
# Each runs with a plain environment (supervisord's holds whatever start.sh had, the database's admin URL among
# it) and umask: supervisord itself runs under 027 for its logs, and the engine's volumes must stay traversable.
umask 022
clean=(env -i PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin)

case "$name" in
  postgres)
    PG_BIN=/usr/lib/postgresql/15/bin
    install -d -o agenthost-pg -m 2775 /run/agenthost-pg
    # A postmaster killed with SIGKILL leaves postmaster.pid. Postgres itself refuses to start while a process of
    # that pid lives or its shared memory is still attached (its backends exit within moments of its death, and
    # supervisord tries again); otherwise it removes the file and runs crash recovery from the WAL.
    exec "${clean[@]}" setpriv --reuid=agenthost-pg --regid="$(id -g agenthost-pg)" --init-groups -- \
      "$PG_BIN/postgres" -D "$AGENTHOST_STATE/pg" -c listen_addresses=127.0.0.1 -p "$arg" -k /run/agenthost-pg \
      -c max_connections=400 -c shared_buffers=256MB -c "fsync=${3:-on}" ;;
  nats)
    exec "${clean[@]}" nats-server -c "$arg" ;;
  dockerd)
    mkdir -p "$AGENTHOST_STATE/docker"
    # live-restore keeps the agents running while the engine is away (killed, restarted, upgraded). Swarm mode
    # refuses it, so an engine that is to be a Swarm node runs without it (DOCKER_LIVE_RESTORE=off).
    flags=()
    [ "$arg" = on ] && flags+=(--live-restore)
    # The engine's own containerd dies with it (the containers' shims stay), but where nothing reaps orphans at once
    # it lingers as a zombie: the next dockerd takes its pid file for a live containerd, waits 15 s for its socket,
    # and exits (seen in the chaos suite: 28 s to come back). A pid file of a process that is gone or a zombie goes.
    pidfile=/var/run/docker/containerd/containerd.pid
    if [ -s "$pidfile" ]; then
      state=$(awk '{print $3}' "/proc/$(cat "$pidfile")/stat" 2>/dev/null || true)
      case "$state" in '' | Z | X) rm -f "$pidfile" ;; esac
    fi
    exec "${clean[@]}" dockerd --data-root "$AGENTHOST_STATE/docker" "${flags[@]}" ;;
  *)
    echo "run-infra.sh: unknown server $name" >&2
    exit 2 ;;
esac
