#!/usr/bin/env bash
# Deploy (or update, rolling) agenthost on the swarm this machine manages: builds the platform images, then
# creates or updates the stack through the Engine API. Replica counts may be given: gateway=2 auth=2 ...
# Settings: see the top of deploy/swarm/src/cli.ts and README "Run across machines".
source "$(dirname "$0")/../env.sh"
bash "$DEPLOY_DIR/install.sh"
bash "$DEPLOY_DIR/images/build.sh" platform
exec node "$DEPLOY_DIR/swarm/src/cli.ts" up "$@"
