# The images of the swarm deployment (sourced by build.sh; target `platform`):
#   agenthost/service:<h>          runtime + the built workspace (node_modules included), user 10100
#   agenthost/<service>:<h>        one per service (gateway auth billing-chain provisioner keyvault devchain):
#                                  agenthost/service:<h> with that service's command
#   agenthost/postgres:15          Debian's PostgreSQL 15 (+ the role setup of deploy/pg-roles.sh)
#   agenthost/nats:<version>       Debian's nats-server
#   agenthost/edge:<h>             agenthost/service:<h> with Debian's caddy binary: Caddy and its route keeper in one task
#   agenthost/caddy:<version>      Debian's Caddy package (where the edge's caddy binary comes from)
# <h> is the hash of the inputs, so a code change is a new tag and a swarm update rolls it out.
# The Debian packages are installed with apt-get inside the build (the Debian mirror is the one registry).

PLATFORM_SERVICES=(gateway auth billing-chain provisioner keyvault devchain)

# The workspace as the services run it: sources, manifests and the installed node_modules, no tests.
workspace_files() {
  (cd "$REPO" && git ls-files -co --exclude-standard -- package.json pnpm-workspace.yaml packages services |
    grep -Ev '/(test|bench)/|\.test\.ts$' )
}

build_services() {
  check_common
  once runtime
  local ctx="$BUILD_DIR/service" hash t0 svc main
  hash="$(inputs_hash "$HERE/service/Dockerfile" "=$(image_id "$RUNTIME_IMAGE")" \
    "=$(cd "$REPO" && workspace_files | LC_ALL=C sort | xargs sha256sum | sha256sum)" "=$(cd "$REPO" && cat pnpm-lock.yaml | sha256sum)")"
  SERVICE_TAG="${hash:0:12}"
  if up_to_date "agenthost/service:$SERVICE_TAG" "$hash"; then
    log "services: agenthost/service:$SERVICE_TAG up to date, skipping"
  else
    t0=$(now)
    rm -rf "$ctx"; mkdir -p "$ctx/app"
    (cd "$REPO" && workspace_files | tar -cf - -T - node_modules $(ls -d packages/*/node_modules services/*/node_modules 2>/dev/null)) | tar -C "$ctx/app" -xf -
    cp "$HERE/service/Dockerfile" "$ctx/Dockerfile"
    chmod -R a+rX,go-w "$ctx/app"
    log "services: docker build -> agenthost/service:$SERVICE_TAG"
    docker build -q --label agenthost.image=service --label "agenthost.inputs=$hash" \
      --build-arg "RUNTIME_IMAGE=$RUNTIME_IMAGE" -t "agenthost/service:$SERVICE_TAG" "$ctx" >/dev/null
    rm -rf "$ctx"
    log "services: built in $(elapsed "$t0")"
  fi
  for svc in "${PLATFORM_SERVICES[@]}"; do
    main="services/$svc/src/main.ts"
    [ "$svc" = devchain ] && main="packages/devchain/src/main.ts"
    printf 'FROM agenthost/service:%s\nLABEL agenthost.image=%s agenthost.service=%s\nCMD ["%s"]\n' \
      "$SERVICE_TAG" "$svc" "$svc" "$main" | docker build -q -t "agenthost/$svc:$SERVICE_TAG" -t "agenthost/$svc:latest" - >/dev/null
  done
  # The edge: the route keeper's code and Debian's caddy binary (a static Go binary) in one image.
  printf 'FROM agenthost/caddy:%s AS caddy\nFROM agenthost/service:%s\nCOPY --from=caddy /usr/bin/caddy /usr/bin/caddy\nLABEL agenthost.image=edge agenthost.service=edge\nCMD ["services/edge/src/swarm.ts"]\n' \
    "$CADDY_VERSION" "$SERVICE_TAG" | docker build -q -t "agenthost/edge:$SERVICE_TAG" -t "agenthost/edge:latest" - >/dev/null
  # Earlier builds' tags go (an image a container still uses stays until that container is gone).
  for svc in service edge "${PLATFORM_SERVICES[@]}"; do
    for old in $(docker image ls "agenthost/$svc" --format '{{.Tag}}'); do
      [[ "$old" == "$SERVICE_TAG" || "$old" == latest ]] || docker image rm "agenthost/$svc:$old" >/dev/null 2>&1 || true
    done
  done
  prune_old service
  log "services: agenthost/{$(IFS=,; echo "${PLATFORM_SERVICES[*]}")}:$SERVICE_TAG"
}

# A Debian-package image: build_debian_image <name> <tag> (context: $HERE/<name>, plus extra files).
build_debian_image() {
  local name=$1 tag=$2 hash t0 ctx="$BUILD_DIR/$1"
  shift 2
  hash="$(inputs_hash "$HERE/$name" "$@" "=$(image_id "$BASE_IMAGE")")"
  if up_to_date "agenthost/$name:$tag" "$hash"; then
    log "$name: agenthost/$name:$tag up to date, skipping"
    return
  fi
  t0=$(now)
  rm -rf "$ctx"; cp -r "$HERE/$name" "$ctx"
  [ $# -gt 0 ] && cp "$@" "$ctx/"
  log "$name: docker build -> agenthost/$name:$tag (apt-get from the Debian mirror)"
  docker build -q --label "agenthost.image=$name" --label "agenthost.inputs=$hash" \
    --build-arg "BASE_IMAGE=$BASE_IMAGE" -t "agenthost/$name:$tag" "$ctx" >/dev/null
  rm -rf "$ctx"
  prune_old "$name"
  log "$name: built in $(elapsed "$t0")"
}

# Postgres and NATS: the swarm runs them, and the tests start them as containers (testcontainers).
build_infra() {
  check_common
  once base
  build_debian_image postgres 15 "$REPO/deploy/pg-roles.sh"
  build_debian_image nats 2.10
}

CADDY_VERSION=2.6

build_platform() {
  check_common
  once base
  build_debian_image caddy "$CADDY_VERSION"
  build_services
  once infra
}
