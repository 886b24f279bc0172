#!/usr/bin/env bash
# A two-node Docker Swarm on one machine, for CI and for trying the swarm deployment without a second
# machine: this host's engine is the manager, and a second engine runs in its own network namespace
# (agenthost-n2, 10.99.0.2) as a worker. Idempotent: `up` reuses what is already there; `down` removes
# the second engine and its namespace and makes this engine leave the swarm.
#
#   deploy/swarm/two-node.sh up      # prints the worker's DOCKER_HOST
#   deploy/swarm/two-node.sh load    # copies this engine's agenthost/* images to the worker
#   deploy/swarm/two-node.sh crash-worker   # SIGKILLs the worker's engine and containers (start-worker brings it back)
#   deploy/swarm/two-node.sh down
#
# Why it is built this way (checked on Debian's docker.io 20.10):
# - the second dockerd is started with nsenter --net, not `ip netns exec`: the latter remounts /sys and
#   dockerd then fails with "Devices cgroup isn't mounted";
# - the manager advertises the veth address: advertising another host address broke VXLAN (replies left
#   with the veth's source address).
source "$(dirname "$0")/../env.sh"

NS=agenthost-n2
HOST_IF=ah-n2
NS_IF=ah-n2-in
HOST_ADDR=10.99.0.1
NS_ADDR=10.99.0.2
N2_STATE="$AGENTHOST_STATE/node2"
N2_SOCK=/run/agenthost-node2/docker.sock
export N2_HOST="unix://$N2_SOCK"

netns_up() {
  [ -e "/run/netns/$NS" ] || ip netns add "$NS"
  if ! ip link show "$HOST_IF" >/dev/null 2>&1; then
    ip link add "$HOST_IF" type veth peer name "$NS_IF"
    ip link set "$NS_IF" netns "$NS"
  fi
  ip addr replace "$HOST_ADDR/24" dev "$HOST_IF"
  ip link set "$HOST_IF" up
  ip -n "$NS" addr replace "$NS_ADDR/24" dev "$NS_IF"
  ip -n "$NS" link set "$NS_IF" up
  ip -n "$NS" link set lo up
  ip -n "$NS" route replace default via "$HOST_ADDR"
  # The worker reaches the outside (Debian mirrors) through this host.
  echo 1 >/proc/sys/net/ipv4/ip_forward
  iptables -t nat -C POSTROUTING -s 10.99.0.0/24 ! -o "$HOST_IF" -j MASQUERADE 2>/dev/null ||
    iptables -t nat -A POSTROUTING -s 10.99.0.0/24 ! -o "$HOST_IF" -j MASQUERADE
  # Docker's FORWARD policy is DROP: let the worker's traffic through.
  iptables -C FORWARD -i "$HOST_IF" -j ACCEPT 2>/dev/null || iptables -I FORWARD -i "$HOST_IF" -j ACCEPT
  iptables -C FORWARD -o "$HOST_IF" -j ACCEPT 2>/dev/null || iptables -I FORWARD -o "$HOST_IF" -j ACCEPT
}

engine2_up() {
  if docker -H "$N2_HOST" info >/dev/null 2>&1; then return; fi
  say "starting the second Docker engine in netns $NS ($NS_ADDR)"
  # A dockerd killed uncleanly leaves its overlay's vxlan interfaces in the namespace; the next one then fails every
  # task there with "error creating vxlan interface: file exists". No engine runs here now: none of them is in use.
  local vx
  for vx in $(nsenter --net="/run/netns/$NS" ip -o link show type vxlan 2>/dev/null | awk -F': ' '{print $2}' | cut -d@ -f1); do
    nsenter --net="/run/netns/$NS" ip link del "$vx" 2>/dev/null || true
  done
  mkdir -p "$N2_STATE/docker" "$(dirname "$N2_SOCK")"
  # An engine stopped moments ago (stop-worker: TERM, then KILL after 10 s) may still be exiting, and a killed one
  # leaves its containerd running: either makes the next dockerd fail at start. Wait for the one, end the other.
  local old
  old=$(cat /run/agenthost-node2/dockerd.pid 2>/dev/null || true)
  if [ -n "$old" ]; then for _ in $(seq 1 300); do kill -0 "$old" 2>/dev/null || break; sleep 0.1; done; fi
  pkill -f -- '--config /run/agenthost-node2/exec/containerd/containerd.toml' 2>/dev/null || true
  bash "$(dirname "$0")/node-engine.sh" before-start "$N2_STATE/docker" /run/agenthost-node2/exec
  # Its own UTS namespace too, so that the node has its own hostname in `docker node ls`.
  nohup nsenter --net="/run/netns/$NS" unshare --uts sh -c 'hostname agenthost-n2 && exec "$0" "$@"' dockerd --data-root "$N2_STATE/docker" --exec-root /run/agenthost-node2/exec \
    -H "$N2_HOST" --pidfile /run/agenthost-node2/dockerd.pid >>"$LOG_DIR/dockerd-node2.log" 2>&1 &
  remember_pid dockerd-node2 $!
  # A restart after a stop can take a while on a loaded machine: it first cleans up the containers it had.
  wait_for 180 docker -H "$N2_HOST" info || die "the second dockerd did not start (see $LOG_DIR/dockerd-node2.log)"
}

# A clean stop of the worker's engine, recorded as clean for its next start (node-engine.sh).
stop_worker() { stop_process dockerd-node2 && bash "$(dirname "$0")/node-engine.sh" after-stop "$N2_STATE/docker"; }

# The worker crashes as a machine does: every process of its engine and its containers SIGKILLed at once, nothing
# shut down. What the crash leaves on disk (the engine's state, the swarm's task and network records) stays, as it
# would on a machine that reboots; the node's network namespace keeps its links and rules (a reboot would lose them:
# a returning node is prepared again whatever it kept).
crash_worker() {
  local pid c pids=()
  pid=$(cat "$RUN_DIR/dockerd-node2.pid" 2>/dev/null || true)
  [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null || return 0
  # Each container's first process, while the engine still answers: it is the init of the container's own pid
  # namespace, so the kernel ends every other process in there with it.
  for c in $(docker -H "$N2_HOST" ps -q 2>/dev/null); do
    c=$(docker -H "$N2_HOST" inspect -f '{{.State.Pid}}' "$c" 2>/dev/null || true)
    [ -n "$c" ] && [ "$c" != 0 ] && pids+=("$c")
  done
  local containers=${#pids[@]}
  # The engine, its containerd and the shims (their command lines name the node's exec-root) at once.
  pids+=("$pid" $(pgrep -f -- '/run/agenthost-node2/exec/containerd/containerd' || true))
  kill -KILL "${pids[@]}" 2>/dev/null || true
  for _ in $(seq 1 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
  rm -f "$RUN_DIR/dockerd-node2.pid"
  say "crashed the worker (engine, containerd, $containers containers)"
}

swarm_state() { docker -H "${1:-unix:///var/run/docker.sock}" info -f '{{.Swarm.LocalNodeState}}' 2>/dev/null; }

swarm_up() {
  if [ "$(swarm_state)" != active ]; then
    [ "$(docker info -f '{{.LiveRestoreEnabled}}')" = true ] &&
      die "this engine runs with live-restore, which Swarm mode refuses: start it with DOCKER_LIVE_RESTORE=off bash deploy/infra.sh docker"
    say "docker swarm init (manager advertises $HOST_ADDR)"
    docker swarm init --advertise-addr "$HOST_ADDR" --listen-addr "$HOST_ADDR:2377" >/dev/null
  fi
  if [ "$(swarm_state "$N2_HOST")" != active ]; then
    local token
    token=$(docker swarm join-token -q worker)
    say "joining the second engine as a worker"
    # Still in the swarm of an earlier run (its manager left it while this engine was down): leave that one first.
    [ "$(swarm_state "$N2_HOST")" = inactive ] || docker -H "$N2_HOST" swarm leave --force >/dev/null 2>&1 || true
    docker -H "$N2_HOST" swarm join --advertise-addr "$NS_ADDR" --token "$token" "$HOST_ADDR:2377" >/dev/null
  fi
  # Forget workers of earlier runs that are gone (a new data root joins as a new node).
  local id
  for id in $(docker node ls -q --filter role=worker); do
    [ "$(docker node inspect -f '{{.Status.State}}' "$id")" = down ] && docker node rm --force "$id" >/dev/null || true
  done
  wait_for 30 bash -c "[ \$(docker node ls -q --filter role=worker | wc -l) -ge 1 ]" || die "the worker did not join"
  # Both engines share this machine's files: the worker's socket is not /var/run/docker.sock (which is the
  # manager's). The provisioner's volume janitor reads this label to reach the worker's own engine.
  local self
  self=$(docker -H "$N2_HOST" info -f '{{.Swarm.NodeID}}')
  docker node update --label-add "agenthost.docker-socket=$N2_SOCK" "$self" >/dev/null
}

down() {
  docker -H "$N2_HOST" swarm leave --force >/dev/null 2>&1 || true
  stop_worker
  docker swarm leave --force >/dev/null 2>&1 || true
  ip link del "$HOST_IF" 2>/dev/null || true
  ip netns del "$NS" 2>/dev/null || true
  # The swarm suite's outsider (deploy/swarm/test/isolation.ts): a third namespace that is neither node.
  ip link del ah-n3 2>/dev/null || true
  ip netns del agenthost-n3 2>/dev/null || true
  # This host's firewall rules for the swarm's instance bridge (node-setup.ts): the next swarm's bridge has another name.
  local chain rule
  for chain in INPUT DOCKER-USER; do
    # No rule left is the usual case: grep finding none is not a failure of the teardown.
    iptables -S "$chain" 2>/dev/null | { grep -E -- '--comment "?agenthost:[^ ]*-swarm"? ' || true; } | while read -r -a rule; do
      rule[0]=-D
      iptables "${rule[@]//\"/}" || true
    done
  done
}

# The worker has no registry to pull from: give it this engine's agenthost images (only the layers it lacks
# are written). A real cluster pushes to a registry instead (README).
load_images() {
  local refs
  refs=$(docker image ls --format '{{.Repository}}:{{.Tag}}' 'agenthost/*' | grep -v ':<none>$' | grep -Ev "${SKIP_IMAGES:-^$}")
  # shellcheck disable=SC2086
  docker save $refs | docker -H "$N2_HOST" load -q >/dev/null
}

case "${1:-up}" in
  up) netns_up; engine2_up; swarm_up; echo "$N2_HOST" ;;
  load) load_images ;;
  # The worker goes away (its engine stops, its containers with it) and comes back.
  stop-worker) stop_worker ;;
  crash-worker) crash_worker ;;
  start-worker) engine2_up ;;
  down) down ;;
  *) die "usage: two-node.sh up|load|stop-worker|crash-worker|start-worker|down" ;;
esac
