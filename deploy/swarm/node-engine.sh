#!/usr/bin/env bash
# Run around a swarm node's Docker engine (two-node.sh does; on a real node, a systemd drop-in: docs/deploy/swarm.md):
#
#   node-engine.sh before-start <data-root> [<exec-root>]   # before dockerd starts (exec-root: /var/run/docker)
#   node-engine.sh after-stop <data-root>     # after dockerd stopped cleanly (not after a crash)
#
# Why: an engine that crashed (or a machine that lost power) keeps, in its network store, the swarm-scoped instance
# bridge and its endpoints. At the next start the bridge driver brings them back, host ports included, while the
# swarm does not know them: every task of that network is then refused with "network <id> exists" or "port is
# already allocated", for good (moby#37087, open since 2018). A clean stop removes them. So a start that follows
# anything but a clean stop begins with an empty network store: the engine makes its own networks again, the swarm
# its networks, and the provisioner the node's config-only network (it prepares every node that comes back). The dead
# engine's container network namespaces, pinned by mounts under its exec-root when only the engine died (a reboot
# empties /run), would then be nobody's: they are unmounted with it.
set -euo pipefail
root=${2:?usage: node-engine.sh before-start|after-stop <data-root> [<exec-root>]}
exec_root=${3:-/var/run/docker}
marker="$root/agenthost-engine-running"
store="$root/network/files/local-kv.db"
case "$1" in
  before-start)
    mkdir -p "$root"
    if [ -e "$marker" ] && [ -e "$store" ]; then
      # Kept once, for a look afterwards: the store is a few hundred KB.
      mv -f "$store" "$store.unclean"
      echo "node-engine: the engine did not stop cleanly last time: its network store is set aside ($store.unclean)"
      for ns in "$exec_root"/netns/*; do
        [ -e "$ns" ] || continue
        umount "$ns" 2>/dev/null || true
        rm -f "$ns"
      done
    fi
    touch "$marker"
    ;;
  after-stop) rm -f "$marker" ;;
  *) echo "usage: node-engine.sh before-start|after-stop <data-root> [<exec-root>]" >&2; exit 2 ;;
esac
