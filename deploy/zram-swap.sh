#!/usr/bin/env bash
# Compressed swap in memory (zram) for sleeping agents (docs/decisions/0052-two-sleep-depths.md). A lightly sleeping
# agent's memory is pushed out to swap; zram keeps it compressed in RAM, never on disk, where it would hold the
# agent's keys in the clear. Runs only when the host has no swap at all (an operator's own swap, encrypted or not,
# is left alone: the provisioner judges it) and the kernel has zram. Needs root; otherwise says why and does nothing.
#   SLEEP_ZRAM_SWAP=auto|off   (default auto)
#   SLEEP_ZRAM_MB              the device's size in uncompressed MB (default: half the host's memory, at most 16384)
set -euo pipefail
say() { echo "[zram-swap] $*"; }

[ "${SLEEP_ZRAM_SWAP:-auto}" = off ] && exit 0
if [ "$(awk 'NR > 1' /proc/swaps | wc -l)" -gt 0 ]; then say "the host has swap already: left as it is"; exit 0; fi
if [ "$(id -u)" != 0 ]; then say "not root: no swap set up (sleeping agents are frozen with their memory)"; exit 0; fi
[ -e /sys/block/zram0 ] || modprobe zram num_devices=1 2>/dev/null || true
if [ ! -e /sys/block/zram0 ]; then say "the kernel has no zram: no swap set up (sleeping agents are frozen with their memory)"; exit 0; fi
if [ "$(cat /sys/block/zram0/disksize)" != 0 ]; then say "/dev/zram0 is in use for something else: left as it is"; exit 0; fi

mem_mb=$(awk '/^MemTotal:/ { print int($2 / 1024) }' /proc/meminfo)
size_mb=${SLEEP_ZRAM_MB:-$(( mem_mb / 2 < 16384 ? mem_mb / 2 : 16384 ))}
# The best compressor this kernel offers, of those that are fast enough to wake an agent from.
for alg in zstd lz4 lzo-rle lzo; do
  if grep -qw "$alg" /sys/block/zram0/comp_algorithm; then echo "$alg" >/sys/block/zram0/comp_algorithm 2>/dev/null || true; break; fi
done
# A host that refuses (a container, a locked-down kernel) runs on without: sleeping agents are then only frozen.
if ! { echo "${size_mb}M" >/sys/block/zram0/disksize && mkswap /dev/zram0 >/dev/null && swapon -p 100 /dev/zram0; } 2>/dev/null; then
  say "could not set up /dev/zram0 as swap: sleeping agents are frozen with their memory"
  exit 0
fi
say "zram swap of ${size_mb} MB ($(grep -o '\[[a-z0-9-]*\]' /sys/block/zram0/comp_algorithm | tr -d '[]')) on /dev/zram0"
