#!/usr/bin/env bash
# Scale agenthost's services on the swarm, each on its own, and wait until the new count serves:
#   deploy/swarm/scale.sh gateway=3 keyvault=2
source "$(dirname "$0")/../env.sh"
exec node "$DEPLOY_DIR/swarm/src/cli.ts" scale "$@"
