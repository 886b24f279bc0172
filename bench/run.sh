#!/usr/bin/env bash
# Runs every benchmark after starting what they need (Postgres, NATS, Docker, images). Each reports
# ratios against a baseline measured in the same run; results go to bench/results/*.json.
#   bash bench/run.sh [gateway|instances|swarm|openclaw]   (default: all four)
set -euo pipefail
source "$(dirname "$0")/../deploy/env.sh"
bash "$DEPLOY_DIR/install.sh"
bash "$DEPLOY_DIR/infra.sh"
set -a; source "$AGENTHOST_STATE/infra.env"; set +a
bash "$DEPLOY_DIR/images/build.sh" standin
# The suites' NATS (testkit) runs as a container of this image.
bash "$DEPLOY_DIR/images/build.sh" infra
# The real OpenClaw image, only for its benchmark (the npm tree is cached after the first build).
if [[ " ${*:-openclaw} " == *" openclaw "* ]]; then bash "$DEPLOY_DIR/images/build.sh" openclaw; fi
cd "$REPO_DIR"
for b in "${@:-gateway instances swarm openclaw}"; do
  for name in $b; do
    say "benchmark: $name"
    node "bench/$name/run.ts"
  done
done
