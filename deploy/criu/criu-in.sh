# shellcheck shell=bash
# Sourced by deploy/criu/checkpoint.sh and bench/openclaw/checkpoint-probe.sh, which set CRIU_MOUNT (where the
# container sees our CRIU build): the one way CRIU is run against a container.

# CRIU stops a task at the end of its parasite with a hardware breakpoint by default. On some hypervisors the debug
# registers never fire (a PVM guest, kernel 6.18.44): the task runs on and every dump or restore waits in wait4 for
# ever. CRIU_FAULT=130 (FI_NO_BREAKPOINTS, CRIU's own switch, as its test suite uses it) makes CRIU step the parasite's
# last syscalls with PTRACE_SYSCALL instead, which works on every host; a dump costs the same (~0.1 s for a process).
export CRIU_FAULT=130

# CRIU as a process of the container: its cgroups first (what it restores inherits them), then its namespaces. The
# image directory and the container's stdio go in as open descriptors: the container's filesystem has neither.
criu_in() {
  local init=$1 dir=$2; shift 2
  (
    while IFS=: read -r _ ctrl path; do
      d="/sys/fs/cgroup/${ctrl#name=}" # v1: one hierarchy per controller; v2 (empty): unified, or the root
      if [ -z "$ctrl" ]; then d=/sys/fs/cgroup/unified; [ -d "$d" ] || d=/sys/fs/cgroup; fi
      if [ -w "$d$path/cgroup.procs" ]; then echo "$BASHPID" >"$d$path/cgroup.procs"; fi
    done <"/proc/$init/cgroup"
    exec 3<"$dir" 4<"/proc/$init/fd/0" 5>"/proc/$init/fd/1" 6>"/proc/$init/fd/2" </dev/null
    # --no-default-config: CRIU runs in the container's mount namespace, where /etc/criu/default.conf would be the
    # image's to write.
    exec nsenter -t "$init" -m -u -i -n -p -- "$CRIU_MOUNT/ld.so" --library-path "$CRIU_MOUNT/lib" "$CRIU_MOUNT/criu" "$@" --no-default-config -D /proc/self/fd/3
  )
}
