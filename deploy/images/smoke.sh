#!/usr/bin/env bash
# Image smoke test: runs an agent image under the provisioner's hardening and checks its probes.
#
# Usage: deploy/images/smoke.sh [standin|openclaw|all]   (default: standin)
#
# Builds the image first if it is missing. Runs it with a read-only root, tmpfs /tmp, all
# capabilities dropped, no-new-privileges, uid 10001, pids/memory limits and a fresh named
# volume on /data, with AGENTHOST_BOOTSTRAP_SKIP_KEYS=1 (no gateway involved). Checks
# /healthz and /readyz, reports time-to-healthy/ready and memory, then removes everything.
# Environment: SMOKE_PORT (host port on 127.0.0.1, default 18998 standin / 18999 openclaw).
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=versions.env
source "$HERE/versions.env"

log() { printf '[smoke] %s\n' "$*" >&2; }
die() { printf '[smoke] FAIL: %s\n' "$*" >&2; exit 1; }

command -v docker >/dev/null || die "docker is not installed"
command -v curl >/dev/null || die "curl is not installed"
docker info >/dev/null 2>&1 || die "the Docker engine is not reachable"

CONTAINERS=()
VOLUMES=()
PIDS=()
DIRS=()
cleanup() {
  local c v p d
  for c in "${CONTAINERS[@]}"; do docker rm -f "$c" >/dev/null 2>&1 || true; done
  for v in "${VOLUMES[@]}"; do docker volume rm -f "$v" >/dev/null 2>&1 || true; done
  for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
  for d in "${DIRS[@]}"; do rm -rf "$d"; done
}
trap cleanup EXIT

ms_now() { date +%s%3N; }

# http_status URL -> prints the status code (000 when nothing answers)
http_status() { curl -s -o /dev/null -m 2 -w '%{http_code}' "$1" || true; }

# wait_status URL CODE TIMEOUT_MS -> 0 when URL answered CODE within the timeout
wait_status() {
  local url="$1" want="$2" deadline=$(( $(ms_now) + $3 ))
  while (( $(ms_now) < deadline )); do
    [[ "$(http_status "$url")" == "$want" ]] && return 0
    sleep 0.2
  done
  return 1
}

# start NAME IMAGE PORT VOLUME [extra docker args...] -> starts hardened, prints nothing
start() {
  local name="$1" image="$2" port="$3" volume="$4"; shift 4
  docker run -d --name "$name" \
    --read-only --tmpfs /tmp:rw,size=64m \
    --cap-drop ALL --security-opt no-new-privileges \
    --user 10001:10001 --pids-limit 256 --memory "${SMOKE_MEMORY:-1536m}" \
    -v "$volume:/data" -p "127.0.0.1:$port:18789" \
    -e AGENTHOST_BOOTSTRAP_SKIP_KEYS=1 \
    "$@" "$image" >/dev/null
}

mem_usage() { docker stats --no-stream --format '{{.MemUsage}}' "$1" | cut -d/ -f1 | tr -d ' '; }

fail_with_logs() {
  log "container logs ($1):"
  docker logs "$1" 2>&1 | tail -n 40 >&2 || true
  die "$2"
}

ensure_image() { # image target
  if ! docker image inspect "$1" >/dev/null 2>&1; then
    log "$1 missing, building ($2)"
    "$HERE/build.sh" "$2"
  fi
}

smoke_standin() {
  local image="agenthost/standin:$STANDIN_TAG" port="${SMOKE_PORT:-18998}"
  local name="agenthost-smoke-standin-$$" volume="agenthost-smoke-standin-$$" t0 t_health t_ready
  ensure_image "$image" standin
  VOLUMES+=("$volume"); CONTAINERS+=("$name")
  docker volume create "$volume" >/dev/null
  t0=$(ms_now)
  start "$name" "$image" "$port" "$volume" --memory 256m -e STANDIN_READY_DELAY_MS=1500
  wait_status "http://127.0.0.1:$port/healthz" 200 10000 || fail_with_logs "$name" "standin /healthz did not answer 200"
  t_health=$(( $(ms_now) - t0 ))
  local early; early="$(http_status "http://127.0.0.1:$port/readyz")"
  [[ "$early" == 503 ]] || fail_with_logs "$name" "standin /readyz answered $early before its ready delay (want 503)"
  wait_status "http://127.0.0.1:$port/readyz" 200 10000 || fail_with_logs "$name" "standin /readyz never answered 200"
  t_ready=$(( $(ms_now) - t0 ))
  local info; info="$(curl -s "http://127.0.0.1:$port/")"
  [[ "$info" == *'"uid":10001'* ]] || fail_with_logs "$name" "standin does not run as uid 10001: $info"
  [[ "$info" == *'"pid":1'* ]] || fail_with_logs "$name" "standin is not PID 1 (bootstrap did not exec it): $info"
  local envs; envs="$(curl -s "http://127.0.0.1:$port/env")"
  [[ "$envs" != *AGENTHOST_INSTANCE_SECRET* && "$envs" != *AGENTHOST_INSTANCE_KEY* ]] || die "instance credentials visible to the agent"
  local mem; mem="$(mem_usage "$name")"
  local s0; s0=$(ms_now)
  docker stop -t 10 "$name" >/dev/null
  local stop_ms=$(( $(ms_now) - s0 ))
  local code; code="$(docker inspect -f '{{.State.ExitCode}}' "$name")"
  [[ "$code" == 0 ]] || fail_with_logs "$name" "standin exited $code on SIGTERM (want 0)"
  (( stop_ms < 5000 )) || die "standin took ${stop_ms} ms to stop (SIGTERM not handled?)"
  log "standin OK: healthz after ${t_health} ms, readyz after ${t_ready} ms (delay 1500), memory ${mem}, stop ${stop_ms} ms"
}

# The keys path end to end: a throwaway keys endpoint on the host (node:http, sealing with
# node:crypto under the AAD rule), the standin on the host network without SKIP_KEYS, and
# the standin's /env (names + SHA-256 of values) to check what the agent received.
smoke_standin_keys() {
  local image="agenthost/standin:$STANDIN_TAG" node name="agenthost-smoke-keys-$$" dir
  node="$(command -v node || true)"
  [[ -n "$node" ]] || { log "standin keys: no host node, skipped"; return 0; }
  dir="$(mktemp -d)"; DIRS+=("$dir")
  cat >"$dir/server.mjs" <<'JS'
import { createCipheriv, createHash, randomBytes, randomUUID } from "node:crypto";
import http from "node:http";
const key = randomBytes(32), id = randomUUID(), secret = randomBytes(24).toString("hex");
const values = { SMOKE_API_KEY: `v-${randomBytes(8).toString("hex")}`, SMOKE_OTHER: "second ✓" };
function seal(name, value) {
  const iv = randomBytes(12), c = createCipheriv("aes-256-gcm", key, iv);
  c.setAAD(Buffer.from(`agenthost:v1:${id}:${name}`, "utf8"));
  const enc = Buffer.concat([c.update(value, "utf8"), c.final()]);
  return JSON.stringify({ encrypted: enc.toString("hex"), iv: iv.toString("hex"), authTag: c.getAuthTag().toString("hex"), kid: "smoke" });
}
const keys = Object.fromEntries(Object.entries(values).map(([k, v]) => [k, seal(k, v)]));
keys.SMOKE_FOREIGN = seal("SOMETHING_ELSE", "must-not-appear");
const server = http.createServer((req, res) => {
  const ok = req.url === "/api/keys/retrieve" && req.headers["x-instance-id"] === id && req.headers["x-instance-secret"] === secret;
  res.writeHead(ok ? 200 : 401, { "content-type": "application/json" });
  res.end(JSON.stringify(ok ? { keys } : { error: "unauthorized" }));
});
server.listen(0, "127.0.0.1", () => {
  const sha = Object.fromEntries(Object.entries(values).map(([k, v]) => [k, createHash("sha256").update(v).digest("hex")]));
  console.log(JSON.stringify({ port: server.address().port, id, secret, key: key.toString("base64"), sha }));
});
JS
  "$node" "$dir/server.mjs" >"$dir/out" &
  local spid=$!; PIDS+=("$spid")
  local i; for i in $(seq 1 50); do [[ -s "$dir/out" ]] && break; sleep 0.1; done
  local cfg; cfg="$(cat "$dir/out")"
  [[ -n "$cfg" ]] || die "keys server did not start"
  local field; field() { "$node" -e 'const c=JSON.parse(process.argv[1]); const v=process.argv[2].split(".").reduce((o,k)=>o[k],c); process.stdout.write(String(v))' "$cfg" "$1"; }
  local port=$(( ${SMOKE_PORT:-18998} - 1 ))
  CONTAINERS+=("$name")
  docker run -d --name "$name" --network host \
    --read-only --tmpfs /tmp:rw,size=64m --cap-drop ALL --security-opt no-new-privileges \
    --user 10001:10001 --pids-limit 256 --memory 256m \
    -e AGENTHOST_INSTANCE_ID="$(field id)" -e AGENTHOST_INSTANCE_SECRET="$(field secret)" \
    -e AGENTHOST_INSTANCE_KEY="$(field key)" -e STANDIN_PORT="$port" \
    -e AGENTHOST_KEYS_URL="http://127.0.0.1:$(field port)/api/keys/retrieve" "$image" >/dev/null
  wait_status "http://127.0.0.1:$port/readyz" 200 10000 || fail_with_logs "$name" "standin with keys did not become ready"
  local envs; envs="$(curl -s "http://127.0.0.1:$port/env")"
  local k
  for k in SMOKE_API_KEY SMOKE_OTHER; do
    [[ "$envs" == *"\"$k\":\"$(field "sha.$k")\""* ]] || fail_with_logs "$name" "agent did not receive $k with the right value"
  done
  [[ "$envs" != *SMOKE_FOREIGN* ]] || die "a key sealed for another name was injected"
  [[ "$envs" != *AGENTHOST_INSTANCE_SECRET* && "$envs" != *AGENTHOST_INSTANCE_KEY* ]] || die "instance credentials visible to the agent"
  docker logs "$name" 2>&1 | grep -q '"msg":"skipping key".*"key_name":"SMOKE_FOREIGN"' || fail_with_logs "$name" "bad key not logged"
  if docker logs "$name" 2>&1 | grep -qF -e "$(field secret)" -e "$(field key)"; then die "secret material in the logs"; fi
  docker rm -f "$name" >/dev/null
  log "standin keys OK: 2 keys decrypted in the container and passed to the agent, foreign key skipped, credentials stripped"
}

smoke_openclaw() {
  local image="agenthost/openclaw:$OPENCLAW_VERSION" port="${SMOKE_PORT:-18999}"
  local name="agenthost-smoke-openclaw-$$" volume="agenthost-smoke-openclaw-$$" run t0 t_health t_ready mem
  ensure_image "$image" openclaw
  VOLUMES+=("$volume"); CONTAINERS+=("$name")
  docker volume create "$volume" >/dev/null
  for run in first restart; do
    t0=$(ms_now)
    if [[ "$run" == first ]]; then
      start "$name" "$image" "$port" "$volume" \
        -e NODE_OPTIONS=--max-old-space-size=1024 -e OPENCLAW_GATEWAY_TOKEN="smoke-$RANDOM$RANDOM"
    else
      docker start "$name" >/dev/null
    fi
    wait_status "http://127.0.0.1:$port/healthz" 200 120000 || fail_with_logs "$name" "openclaw /healthz did not answer 200 within 120 s"
    t_health=$(( $(ms_now) - t0 ))
    wait_status "http://127.0.0.1:$port/readyz" 200 120000 || fail_with_logs "$name" "openclaw /readyz did not answer 200 within 120 s"
    t_ready=$(( $(ms_now) - t0 ))
    sleep 5 # let post-ready sidecars settle before measuring
    mem="$(mem_usage "$name")"
    log "openclaw ($run start) OK: healthz after ${t_health} ms, readyz after ${t_ready} ms, memory ${mem}"
    if docker logs "$name" 2>&1 | grep -E 'EROFS|read-only file system' >&2; then
      die "openclaw tried to write to the read-only root"
    fi
    docker stop -t 30 "$name" >/dev/null
  done
  local usage
  usage="$(docker run --rm -v "$volume:/data" --entrypoint /usr/bin/du "$image" -sh /data/home 2>/dev/null | cut -f1)"
  log "openclaw state volume after two starts: $usage"
}

target="${1:-standin}"
case "$target" in
  standin) smoke_standin; smoke_standin_keys ;;
  openclaw) smoke_openclaw ;;
  all) smoke_standin; smoke_standin_keys; smoke_openclaw ;;
  *) die "usage: $0 [standin|openclaw|all]" ;;
esac
log "passed ($target)"
