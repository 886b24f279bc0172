#!/usr/bin/env bash
# Probe (issue 33, docs/decisions/0049-...): checkpoint an agent's processes to an encrypted file and restore them
# while Docker's container keeps running, so that Docker, the reconciler, the doctor and backups see one running
# container throughout. Measured against the same run's restart floor. Not the provisioner's code: the figures
# and the steps a checkpoint sleep depth would take.
#
# How: the container's PID 1 is hold-init (deploy/criu/hold-init.c) instead of docker-init, and CRIU runs from the
# host *inside* the container's mount, uts, ipc, net and pid namespaces and cgroups (nsenter), from a read-only
# bind mount of CRIU, its libraries and its loader (deploy/criu/build.sh installs them in $CRIU_RT). CRIU then
# sees the agent's namespaces as its own and dumps only processes; the restored agent gets its old pid in the
# container's pid namespace and, when CRIU exits, becomes hold-init's child again. The image goes to a root-only
# tmpfs (plaintext never on disk), is sealed (deploy/criu/seal.c: zstd, AES-256-GCM per 1 MiB record) to a root-only
# directory on disk, and the tmpfs copy is dropped. A wake either streams it into CRIU (`--stream`: odd rounds, the
# wake until 30 Nov) or opens it into the tmpfs and restores with lazy pages (even rounds, the wake as built: CRIU's
# page server installs the memory through userfaultfd), so both are measured in one run. The agent's stdio (the engine's log pipes and stdin)
# are handed back to CRIU from hold-init's descriptors, so `docker logs` goes on after a restore.
#
# The provisioner's own checkpointed sleep runs the same steps: deploy/criu/checkpoint.sh.
# Usage (root): bash bench/openclaw/checkpoint-probe.sh [rounds]   env: PROBE_IMAGE (agenthost/openclaw:latest),
#   PROBE_PORT (18882), CRIU_RT (/usr/local/lib/agenthost-criu), PROBE_CPUS (1: pro; 0.5: free), PROBE_MEMORY_MB (2048),
#   PROBE_WARM=1 (the sealed image stays in the page cache: by default it is dropped before each wake),
#   PROBE_BURST=1 (the restore runs with 2 CPUs, clamped back once /readyz answers: CRIU restores inside the
#   container's cgroups, so under its CPU limit), PROBE_PREFIX (ckpt-probe: the container, volume and directories).
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
REPO="$(cd "$HERE/../.." && pwd)"
ROUNDS="${1:-3}"
IMAGE="${PROBE_IMAGE:-agenthost/openclaw:latest}"
PORT="${PROBE_PORT:-18882}"
RT="${CRIU_RT:-/usr/local/lib/agenthost-criu}"
PREFIX="${PROBE_PREFIX:-ckpt-probe}"
NAME="$PREFIX-oc"
STATE="/var/lib/$PREFIX"           # sealed images (root-only, on disk)
WORK="/run/$PREFIX"                # plaintext images (root-only tmpfs)
CPUS="${PROBE_CPUS:-1}"
MEMORY_MB="${PROBE_MEMORY_MB:-2048}"
TOKEN="$(head -c 24 /dev/urandom | base64 | tr -d '/+=')"
ms() { echo $(( $(date +%s%N) / 1000000 )); }
log() { echo "[$(date +%T)] $*" >&2; }

cleanup() {
  docker rm -f -v "$NAME" >/dev/null 2>&1 || true
  docker volume rm -f "$NAME" >/dev/null 2>&1 || true
  umount "$WORK" 2>/dev/null || true
  rm -rf "$STATE" "$WORK"
}
trap cleanup EXIT
cleanup
[ -x "$RT/criu" ] && [ -x "$RT/hold-init" ] || { echo "no CRIU runtime in $RT: run deploy/criu/build.sh" >&2; exit 1; }
install -d -m 0700 "$STATE" "$STATE/image" "$WORK"
mount -t tmpfs -o size=3g,mode=0700 "$PREFIX" "$WORK"
head -c 32 /dev/urandom >"$STATE/key" && chmod 600 "$STATE/key"
SEAL="$RT/seal"

# The provisioner's hardening (docker/spec.ts) and pro's limits; hold-init instead of --init; io_uring refused.
docker run -d --name "$NAME" --user 10001:10001 --read-only --tmpfs /tmp:rw,nosuid,nodev,size=64m,mode=1777 \
  --cap-drop ALL --security-opt no-new-privileges:true --security-opt "seccomp=$REPO/deploy/criu/seccomp-no-io_uring.json" \
  --pids-limit 512 --memory "${MEMORY_MB}m" --memory-swap "${MEMORY_MB}m" --cpus "$CPUS" -p "127.0.0.1:$PORT:18789" \
  --mount "type=volume,source=$NAME,target=/data" --mount "type=bind,source=$RT,target=/opt/agenthost-criu,readonly" \
  -e "OPENCLAW_GATEWAY_TOKEN=$TOKEN" -e "NODE_OPTIONS=--max-old-space-size=$((MEMORY_MB * 3 / 4))" \
  --entrypoint /opt/agenthost-criu/hold-init "$IMAGE" /usr/local/bin/openclaw gateway --allow-unconfigured --bind lan --port 18789 --auth token >/dev/null

# First 200 (any status for GET /: the gateway answers) within $1 ms; prints the ms it took.
first_byte() {
  local start=$(ms) deadline=$(( $(ms) + $1 ))
  while [ "$(ms)" -lt "$deadline" ]; do
    if [ "$(curl -s -o /dev/null -m 2 -w '%{http_code}' "http://127.0.0.1:$PORT/readyz")" = 200 ]; then echo $(( $(ms) - start )); return 0; fi
    sleep 0.05
  done
  echo timeout; return 1
}
view() { docker inspect -f '{{.State.Status}} pid={{.State.Pid}} started={{.State.StartedAt}} restarts={{.RestartCount}}' "$NAME"; }
# Host memory charged to the container's cgroup (MB), v1 or v2.
held_mb() {
  local pid cg f
  pid=$(docker inspect -f '{{.State.Pid}}' "$NAME")
  cg=$(awk -F: '$2=="memory"||$2==""{print $3; exit}' "/proc/$pid/cgroup")
  for f in "/sys/fs/cgroup/memory$cg/memory.usage_in_bytes" "/sys/fs/cgroup$cg/memory.current"; do
    [ -r "$f" ] && { echo $(( $(cat "$f") / 1048576 )); return; }
  done
  echo "?"
}
rss_mb() { docker top "$NAME" -eo pid,rss | awk 'NR>1{s+=$2} END{print int(s/1024)}'; }

CRIU_MOUNT=/opt/agenthost-criu
source "$HERE/../../deploy/criu/criu-in.sh"

log "load: $(cut -d' ' -f1-3 /proc/loadavg); booting $IMAGE with $CPUS CPU, $MEMORY_MB MB${PROBE_BURST:+, restores on 2 CPUs}"
boot=$(first_byte 300000) || { docker logs --tail 30 "$NAME" >&2; exit 1; }
log "boot → /readyz: $boot ms; $(view)"
sleep 20
idle_rss=$(rss_mb); idle_held=$(held_mb)
log "idle: rss $idle_rss MB, cgroup $idle_held MB"

for round in $(seq 1 "$ROUNDS"); do
  init=$(docker inspect -f '{{.State.Pid}}' "$NAME")
  agent=$(ps -o pid= --ppid "$init" | head -1 | tr -d ' ')
  vpid=$(awk '/^NSpid/{print $NF}' "/proc/$agent/status")
  # The stdio pipes' identities, for --inherit-fd at the restore.
  inherit=(); for fd in 0 1 2; do
    what=$(readlink "/proc/$agent/fd/$fd"); if [[ $what == pipe:* ]]; then inherit+=(--inherit-fd "fd[$((fd + 4))]:$what"); fi
  done
  before="$(view)"
  t0=$(ms)
  kill -USR1 "$init"   # hold-init: the agent's end is a checkpoint, not the container's
  criu_in "$init" "$WORK" dump -t "$vpid" -o dump.log --tcp-established --network-lock nftables --file-locks --ext-unix-sk \
    || { grep -E 'Error' "$WORK/dump.log" >&2; exit 1; }
  t1=$(ms)
  "$SEAL" seal "$STATE/key" "$NAME" "$WORK" "$STATE/image" && rm -f "$WORK"/*
  t2=$(ms)
  image_mb=$(du -sm "$STATE/image" | cut -f1)
  if [ "$round" = 1 ]; then
    # Another tenant's instance cannot open it: the AAD names the instance (CRIU itself would restore A's image
    # into B's container and run A's memory there: the decision record has the experiment).
    if [ "$("$SEAL" cat "$STATE/key" "$PREFIX-other" "$STATE/image" inventory.img 2>/dev/null | wc -c)" != 0 ]; then
      log "round 1: A's image OPENED as another instance's"; exit 1
    fi
    log "round 1: opening the image as another instance's: refused, 0 bytes out"
  fi
  # A wake after a long sleep reads the image from disk; PROBE_WARM=1 leaves it in the page cache.
  [ -n "${PROBE_WARM:-}" ] || { sync; echo 1 >/proc/sys/vm/drop_caches 2>/dev/null || true; }
  sleep 3
  asleep_held=$(held_mb); asleep_rss=$(rss_mb)
  log "round $round: dump $((t1 - t0)) ms, seal $((t2 - t1)) ms, sealed image $image_mb MB; asleep: cgroup $asleep_held MB, rss $asleep_rss MB; $(view)"
  w0=$(ms)
  [ -n "${PROBE_BURST:-}" ] && docker update --cpus 2 "$NAME" >/dev/null
  if [ $((round % 2)) = 1 ]; then
    how=streamed; stream=(--stream)
    "$SEAL" serve "$STATE/key" "$NAME" "$STATE/image" "$WORK" >"$WORK/serve.out" &
    server=$!
    until grep -q ready "$WORK/serve.out" 2>/dev/null; do sleep 0.01; done
  else
    how="opened, lazy pages"; stream=(--lazy-pages)
    "$SEAL" open "$STATE/key" "$NAME" "$STATE/image" "$WORK"
    criu_in "$init" "$WORK" lazy-pages -o lazy.log &
    server=$!
    until [ -S "$WORK/lazy-pages.socket" ]; do kill -0 "$server" 2>/dev/null || { log "the page server did not start"; exit 1; }; sleep 0.005; done
  fi
  w1=$(ms)
  criu_in "$init" "$WORK" restore -o restore.log --tcp-close --file-locks --ext-unix-sk --restore-detached \
    "${stream[@]}" "${inherit[@]}" \
    || { grep -E 'Error' "$WORK/restore.log" >&2; exit 1; }
  w2=$(ms)
  wait "$server" || { log "the streamer or page server failed"; exit 1; }
  w3=$(ms)
  rm -f "$STATE"/image/*
  fb=$(first_byte 30000)
  [ -n "${PROBE_BURST:-}" ] && docker update --cpus "$CPUS" "$NAME" >/dev/null
  log "round $round ($how): open $((w1 - w0)) ms, criu restore $((w2 - w1)) ms, all pages in $((w3 - w1)) ms, wake → /readyz $(( $(ms) - w0 )) ms (after restore $fb ms); $(view)"
  [ "$before" = "$(view)" ] && log "  Docker's view unchanged" || log "  Docker's view CHANGED: was $before"
  rm -f "$WORK"/*
  sleep 5
done

log "restart floor: docker restart → /readyz"
r0=$(ms); docker restart -t 10 "$NAME" >/dev/null; fb=$(first_byte 300000); log "restart → /readyz $(( $(ms) - r0 )) ms; load $(cut -d' ' -f1-3 /proc/loadavg)"
