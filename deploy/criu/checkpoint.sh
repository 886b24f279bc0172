#!/usr/bin/env bash
# Checkpoint and restore of one agent's processes while its container keeps running (the provisioner's checkpointed
# sleep: services/provisioner/src/docker/checkpoint.ts, docs/decisions/0049-...). Run as root by the provisioner.
#
#   checkpoint.sh check                                   the CRIU runtime is there and the kernel allows a dump
#   checkpoint.sh dump    <init pid> <binding> <sealed>  dump the agent, seal the image into <sealed>
#   checkpoint.sh restore <init pid> <binding> <sealed>  open the image, restore the agent, delete the image
#
# <init pid>: the host pid of the container's PID 1, hold-init (the provisioner checks the container's entrypoint).
#
# The key (32 raw bytes) comes on stdin, never in an argument or a file. <binding> names what the image belongs to
# (instance, container, checkpoint id): it is in every sealed record's AAD, so the image of another instance, another
# container or an older checkpoint does not open. The plaintext image exists only in a root-only tmpfs, for the
# dump's and the seal's time, and for the restore's.
#
# How: the container's PID 1 is hold-init (hold-init.c). SIGUSR1 from here tells it the agent's next end is a
# checkpoint, not the container's; CRIU then runs inside the container's namespaces and cgroups (nsenter), from the
# read-only bind mount of the runtime ($CRIU_MOUNT), so it sees the agent's namespaces as its own and dumps only
# processes. A restore gives the agent its old pids, and the kernel makes it hold-init's child again.
#
# Settings: CRIU_RT (/usr/local/lib/agenthost-criu), CHECKPOINT_WORK (/run/agenthost-checkpoint: mounted as a tmpfs
# when it is not one), CHECK_DUMP_S (10: the bound of the check's test dump).
set -euo pipefail
RT="${CRIU_RT:-/usr/local/lib/agenthost-criu}"
WORK_ROOT="${CHECKPOINT_WORK:-/run/agenthost-checkpoint}"
CRIU_MOUNT=/opt/agenthost-criu

fail() { echo "checkpoint: $*" >&2; exit 1; }
ms() { echo $(($(date +%s%N) / 1000000)); }

# The image's plaintext never reaches a disk: a tmpfs only root can enter.
work_dir() {
  install -d -m 0700 "$WORK_ROOT"
  [ "$(stat -f -c %T "$WORK_ROOT")" = tmpfs ] || mount -t tmpfs -o mode=0700,size=50% agenthost-checkpoint "$WORK_ROOT"
  local d="$WORK_ROOT/$1"
  rm -rf "$d"
  install -d -m 0700 "$d"
  echo "$d"
}

source "$(dirname "${BASH_SOURCE[0]}")/criu-in.sh"

# CRIU's own account of a failure: its error lines, without the image's paths.
criu_errors() { grep -E 'Error|error' "$1" 2>/dev/null | tail -5 | sed 's/^/  /' >&2 || true; }

# A background job and everything under it: criu_in's job is a shell, with nsenter and CRIU below it.
kill_tree() {
  local child
  for child in $(ps -o pid= --ppid "$1" 2>/dev/null); do kill_tree "$child"; done
  kill -KILL "$1" 2>/dev/null || true
}

# The container's hold-init, by its host pid: it must be there, and be an init of a pid namespace of its own.
init_of() {
  [[ $1 =~ ^[0-9]+$ ]] && [ -d "/proc/$1" ] || fail "no process $1 (the container is not running)"
  [ "$(awk '/^NSpid/ {print $NF}' "/proc/$1/status")" = 1 ] || fail "process $1 is not a container's PID 1"
  echo "$1"
}

case "${1:-}" in
check)
  [ -x "$RT/criu" ] && [ -x "$RT/hold-init" ] && [ -x "$RT/seal" ] && [ -x "$RT/ld.so" ] || fail "no CRIU runtime in $RT (deploy/criu/build.sh)"
  out="$("$RT/ld.so" --library-path "$RT/lib" "$RT/criu" check 2>&1)" || fail "criu check: $(tail -1 <<<"$out")"
  echo "$out"
  # `criu check` passing is not a dump that ends: on a PVM guest kernel (6.18.44) every dump hung at the end of CRIU's
  # parasite, holding the agent stopped, until CRIU stopped using hardware breakpoints (criu-in.sh). So a real dump of
  # a sleeping process, bounded: ~0.1 s where dumps work.
  test_dir="$(mktemp -d)"
  setsid sleep 60 </dev/null >/dev/null 2>&1 &
  probe=$!
  # In a subshell whose stderr is dropped: bash reports a job killed by a signal ("Killed") there.
  dumped="$( (timeout -s KILL "${CHECK_DUMP_S:-10}" "$RT/ld.so" --library-path "$RT/lib" "$RT/criu" dump -t "$probe" -D "$test_dir" \
    -o dump.log --no-default-config >/dev/null 2>&1; echo $?) 2>/dev/null)"
  kill -KILL "$probe" 2>/dev/null || true
  wait "$probe" 2>/dev/null || true
  rm -rf "$test_dir"
  # Only the hang turns checkpointing off: a host process may fail to dump for reasons a container's would not.
  [ "$dumped" != 137 ] || fail "a test dump of a sleeping process did not end within ${CHECK_DUMP_S:-10} s (this kernel does not stop the task after CRIU's parasite)"
  echo "test dump: $([ "$dumped" = 0 ] && echo ok || echo "ended ($dumped)")"
  ;;
dump)
  [ $# = 4 ] || fail "usage: checkpoint.sh dump <init pid> <binding> <sealed dir>"
  init="$(init_of "$2")" binding=$3 sealed=$4
  agent="$(ps -o pid= --ppid "$init" | head -1 | tr -d ' ')"
  [ -n "$agent" ] || fail "no agent process under hold-init (already checkpointed?)"
  vpid="$(awk '/^NSpid/ {print $NF}' "/proc/$agent/status")"
  work="$(work_dir "$(basename "$sealed")")"
  trap 'rm -rf "$work"' EXIT
  t0=$(ms)
  kill -USR1 "$init" # hold-init: the agent's next end is a checkpoint
  # Every inotify watch is dumped by its path, found by scanning where an agent's watches are (--force-irmap,
  # --irmap-scan-path): a handle alone does not reopen at the restore, since CRIU, run in the container's own
  # namespaces, records no mounts. OpenClaw watches its config on /data, and once it has run a turn its plugins'
  # skills under /opt (the image's overlayfs, whose handles do not open at all without nfs_export). A watched file's
  # path is not in the kernel's cache after a light sleep reclaimed the container's memory, so the scan is forced.
  if ! criu_in "$init" "$work" dump -t "$vpid" -o dump.log --tcp-established --network-lock nftables --file-locks --ext-unix-sk \
    --force-irmap --irmap-scan-path /data --irmap-scan-path /opt; then
    kill -USR2 "$init" # a failed dump leaves the agent running: its end is the container's again
    criu_errors "$work/dump.log"
    fail "criu dump failed"
  fi
  rm -f "$work/dump.log"
  t1=$(ms)
  # Sealed beside its place and moved there whole: an image at <sealed> is always complete.
  rm -rf "$sealed" "$sealed.new"
  install -d -m 0700 "$sealed.new"
  "$RT/seal" seal - "$binding" "$work" "$sealed.new" || { rm -rf "$sealed.new"; fail "sealing the image failed"; }
  mv "$sealed.new" "$sealed"
  # What the provisioner logs: the image's size and where the time went.
  echo "image_mb=$(du -sm "$sealed" | cut -f1) dump_ms=$((t1 - t0)) seal_ms=$(($(ms) - t1))"
  ;;
restore)
  [ $# = 4 ] || fail "usage: checkpoint.sh restore <init pid> <binding> <sealed dir>"
  init="$(init_of "$2")" binding=$3 sealed=$4
  [ -d "$sealed" ] || fail "no checkpoint image"
  [ -z "$(ps -o pid= --ppid "$init")" ] || fail "the agent is running: nothing to restore"
  work="$(work_dir "$(basename "$sealed")")"
  pager=
  trap '[ -n "$pager" ] && kill_tree "$pager"; rm -rf "$work"' EXIT
  trap 'exit 143' TERM # the provisioner's bound: the EXIT trap still ends the page server and drops the plaintext
  t0=$(ms)
  # The key comes once on stdin and is handed on through pipes only (base64: a shell variable holds no NUL). The
  # inventory is opened first, so that another binding's image is refused as such, before any plaintext is written.
  key="$(base64 -w0)"
  printf '%s' "$key" | base64 -d | "$RT/seal" cat - "$binding" "$sealed" inventory.img >/dev/null 2>&1 ||
    fail "the image does not open under this binding (another instance's, container's or checkpoint's, or altered)"
  printf '%s' "$key" | base64 -d | "$RT/seal" open - "$binding" "$sealed" "$work" >/dev/null ||
    fail "a part of the image does not open (altered or cut short)"
  key=
  # The container's stdio pipes (the engine's log pipes and the provisioner's stdin) are handed back to the agent.
  inherit=()
  for fd in 0 1 2; do
    what="$(readlink "/proc/$init/fd/$fd")"
    if [[ $what == pipe:* ]]; then inherit+=(--inherit-fd "fd[$((fd + 4))]:$what"); fi
  done
  t1=$(ms)
  # Lazy pages (docs/decisions/0049-...): CRIU restores the processes without their memory, registered with
  # userfaultfd, and its page server installs the pages (UFFDIO_COPY) as the agent touches them and then all the
  # rest. Writing them through the restored task's own addresses instead costs a page fault each, which some guests
  # charge 20 µs for (bench/openclaw/page-touch.c): 600 MB took 3-4 s there, against ~1 s this way. The wake waits
  # until every page is in: an agent answering meanwhile faults its pages in one at a time, which took longer here
  # (docs/decisions/0049-...), and one left with pages missing would fault or read zeros once its page server ended.
  # Its errors are in lazy.log; its stderr would carry only the shell's report of a killed page server (its whole
  # command, which the provisioner would log instead of the reason).
  criu_in "$init" "$work" lazy-pages -o lazy.log 2>/dev/null &
  pager=$!
  until [ -S "$work/lazy-pages.socket" ]; do
    kill -0 "$pager" 2>/dev/null || { criu_errors "$work/lazy.log"; pager=; fail "the page server did not start"; }
    sleep 0.005
  done
  # From here the agent's end is held, not the container's: an agent that dies while its memory comes in (a page server
  # that failed leaves it pages that fault or read as zeros) leaves its container for the boot that replaces it.
  kill -USR1 "$init"
  if ! criu_in "$init" "$work" restore -o restore.log --lazy-pages --tcp-close --file-locks --ext-unix-sk --restore-detached "${inherit[@]}"; then
    criu_errors "$work/restore.log"
    fail "criu restore failed"
  fi
  t2=$(ms)
  paged=0
  wait "$pager" || paged=$?
  pager=
  if [ "$paged" != 0 ]; then
    criu_errors "$work/lazy.log"
    # The agent must not run on with pages missing: it is ended (nothing to end when the container went).
    nsenter -t "$init" -p -- kill -KILL -1 2>/dev/null || true
    fail "the page server failed ($paged): the agent's memory is not whole, so it was ended"
  fi
  kill -USR2 "$init" # its end is the container's again
  [ -n "$(ps -o pid= --ppid "$init")" ] || fail "the agent ended while its memory came in"
  rm -rf "$sealed"
  echo "open_ms=$((t1 - t0)) restore_ms=$((t2 - t1)) pages_ms=$(($(ms) - t2))"
  ;;
*)
  fail "usage: checkpoint.sh check | dump <init pid> <binding> <sealed dir> | restore <init pid> <binding> <sealed dir>"
  ;;
esac
