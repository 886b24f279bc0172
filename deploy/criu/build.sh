#!/usr/bin/env bash
# Builds CRIU 4.1.1 and installs it as root, for checkpoint/restore of an agent's container
# (docs/decisions/0049-wake-restores-a-checkpoint-through-runc-and-criu.md).
#
# Why a build: Debian 12's criu 3.17 fails `criu check` on 6.x kernels ("vdso: Unexpected rt vDSO area bounds"),
# and Debian 13's criu 4.1 package needs glibc 2.38. CRIU 4.1.1's source from Debian 13 (trixie) builds with
# Debian 12's own libraries. deploy/criu/*.patch are applied on top, in name order:
#   0001: Linux 6.16+ refuses SO_PASSCRED/SO_PASSSEC on TCP sockets, so 4.1.1 could not dump any process with a
#         TCP socket (criu issue 2705, fixed upstream after 4.1.1).
#   0002: reading another user's rlimits with prlimit() needs CAP_SYS_RESOURCE, which root lacks on some hosts
#         (this one's bounding set drops it) and an agent runs as uid 10001: the dump falls back to /proc/<pid>/limits.
# seccomp-no-io_uring.json (beside this script) is Docker 20.10's default profile with io_uring_setup/enter/register
# refused (ENOSYS): CRIU cannot dump libuv's io_uring instance; refused, libuv falls back to epoll and its threadpool.
#
# Only the upstream source tarball (criu_4.1.1.orig.tar.xz) is fetched, from the Debian mirror, and checked against
# the SHA-256 in trixie's Sources index, which apt verifies against Debian's archive key. The machine's apt sources
# stay as they are: trixie is read through a source list of this script's own (as deploy/install.sh does for
# nats-server).
#
# Safe to run again: it does nothing when the installed criu is this version built with these patches.
# It also assembles $CRIU_PREFIX/lib/agenthost-criu: criu, the shared libraries it loads and their loader, the
# sealer (seal.c, run on the host) and hold-init (hold-init.c, static), for a read-only bind mount into a checkpointable agent's container. A checkpoint
# runs CRIU inside the container's namespaces (so it dumps only processes, not mounts or network), where the
# image's own filesystem has no CRIU: the loader runs it with these libraries, whatever the image's libc.
#
# Settings: CRIU_PREFIX (default /usr/local: the binary goes to $CRIU_PREFIX/sbin/criu, on runc's PATH),
# CRIU_BUILD_DIR (default $AGENTHOST_CACHE/build/criu), AGENTHOST_DEBIAN_MIRROR, CRIU_JOBS (default 2).
source "$(dirname "$0")/../env.sh"

CRIU_VERSION=4.1.1
PREFIX="${CRIU_PREFIX:-/usr/local}"
BUILD_DIR="${CRIU_BUILD_DIR:-$AGENTHOST_CACHE/build/criu}"
MIRROR="${AGENTHOST_DEBIAN_MIRROR:-http://deb.debian.org/debian}"
JOBS="${CRIU_JOBS:-2}"
HERE="$(cd "$(dirname "$0")" && pwd)"
BIN="$PREFIX/sbin/criu"
STAMP="$PREFIX/share/criu-agenthost.stamp"
RT="$PREFIX/lib/agenthost-criu"

[ "$(id -u)" = 0 ] || die "run as root (apt-get, and criu is installed for the engine's runc)"

# What this build is: the version and the patches' contents. The stamp beside the binary says what is installed.
shopt -s nullglob
patches=("$HERE"/*.patch)
want="criu $CRIU_VERSION patches $(cat /dev/null "${patches[@]}" "$HERE/hold-init.c" "$HERE/seal.h" "$HERE/seal.c" "$HERE/streamer.c" | sha256sum | cut -c1-16)"
if [ -x "$RT/hold-init" ] && [ -x "$RT/seal" ] && [ -x "$BIN" ] && [ "$(cat "$STAMP" 2>/dev/null)" = "$want" ] && "$BIN" --version 2>/dev/null | grep -q "Version: $CRIU_VERSION\$"; then
  say "criu $CRIU_VERSION is installed at $BIN (patches unchanged)"
  "$BIN" --version
  exit 0
fi

# Build dependencies, all from Debian 12 (bookworm). No docs (asciidoc/xmlto), no GPU plugins (libdrm).
# libc6-dev: libc.a, for the static hold-init. libssl-dev, libzstd-dev: the sealer (seal.c). libprotobuf-dev: images/google/protobuf/descriptor.proto is a link to its /usr/include copy.
deps=(gcc libc6-dev make pkg-config python3 xz-utils curl patch
  libprotobuf-dev libprotobuf-c-dev protobuf-c-compiler protobuf-compiler python3-protobuf
  libnl-3-dev libnl-route-3-dev libnet1-dev libcap-dev libbsd-dev libgnutls28-dev uuid-dev
  libnftables-dev libaio-dev iptables libssl-dev libzstd-dev)
missing=()
for p in "${deps[@]}"; do dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p"); done
if [ ${#missing[@]} -gt 0 ]; then
  say "apt-get install ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

mkdir -p "$BUILD_DIR"
tarball="$BUILD_DIR/criu_$CRIU_VERSION.orig.tar.xz"
if [ ! -s "$tarball.ok" ]; then
  say "fetching criu $CRIU_VERSION's source (Debian 13's orig tarball) from $MIRROR"
  t="$(mktemp -d)"
  trap 'rm -rf "$t"' EXIT
  mkdir -p "$t/lists/partial"
  echo "deb-src $MIRROR trixie main" >"$t/sources.list"
  trixie=(-o "Dir::Etc::SourceList=$t/sources.list" -o Dir::Etc::SourceParts=/nonexistent -o "Dir::State::Lists=$t/lists" -o APT::Sandbox::User=root)
  apt-get -qq "${trixie[@]}" update
  # The URI and SHA-256 of the orig tarball, from the signed Sources index (apt checked the signature above).
  line="$(apt-get -qq "${trixie[@]}" source --print-uris criu 2>/dev/null | grep "criu_$CRIU_VERSION.orig.tar.xz" || true)"
  [ -n "$line" ] || die "trixie's Sources index has no criu_$CRIU_VERSION.orig.tar.xz"
  uri="$(awk '{print $1}' <<<"$line" | tr -d "'")"
  sha="$(grep -o 'SHA256:[0-9a-f]*' <<<"$line" | cut -d: -f2)"
  [ ${#sha} = 64 ] || die "no SHA-256 for $uri in trixie's Sources index"
  curl -fsSL --retry 3 -o "$tarball.part" "$uri"
  echo "$sha  $tarball.part" | sha256sum -c --quiet - || die "criu_$CRIU_VERSION.orig.tar.xz: SHA-256 mismatch"
  mv "$tarball.part" "$tarball"
  echo "$sha" >"$tarball.ok"
  rm -rf "$t"
  trap - EXIT
fi

# A fresh tree each time the build runs: the patches apply to pristine source.
src="$BUILD_DIR/criu-$CRIU_VERSION"
rm -rf "$src"
tar -C "$BUILD_DIR" -xJf "$tarball"
for p in "${patches[@]}"; do
  say "patch $(basename "$p")"
  patch -d "$src" -p1 --forward --quiet <"$p"
done

say "make criu (-j$JOBS)"
started=$(date +%s)
make -C "$src" -j"$JOBS" criu >"$BUILD_DIR/build.log" 2>&1 || {
  tail -30 "$BUILD_DIR/build.log" >&2
  die "make criu failed (log: $BUILD_DIR/build.log)"
}
say "built in $(($(date +%s) - started)) s"

install -D -m 0755 "$src/criu/criu" "$BIN"

# The runtime for the containers: criu, its libraries (ldd's list, libc included) and the loader, and hold-init.
say "assembling $RT"
rm -rf "$RT.new"
mkdir -p "$RT.new/lib"
cp "$BIN" "$RT.new/criu"
for lib in $(ldd "$BIN" | awk '$3 ~ /^\// {print $3}'); do cp -L "$lib" "$RT.new/lib/"; done
cp -L "$(ldd "$BIN" | awk '/ld-linux/ {print $1}')" "$RT.new/ld.so"
gcc -static -Os -Wall -o "$RT.new/hold-init" "$HERE/hold-init.c"
# The sealer runs on the host (deploy/criu/checkpoint.sh), with the host's libraries.
gcc -O2 -Wall -pthread -o "$RT.new/seal" "$HERE/seal.c" "$HERE/streamer.c" -lcrypto -lzstd
chmod -R go-w "$RT.new"
rm -rf "$RT"
mv "$RT.new" "$RT"
mkdir -p "$(dirname "$STAMP")"
echo "$want" >"$STAMP"
say "installed $BIN"
"$BIN" --version
