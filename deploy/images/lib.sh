# Sourced by build.sh: prerequisite checks and the helpers every image's build uses. Reads build.sh's settings
# (CACHE, FORCE, the image names) and its log/die.
# ---------------------------------------------------------------- prerequisites

need_cmd() {
  command -v "$1" >/dev/null 2>&1 || die "'$1' is required but not installed ($2)"
}

check_docker() {
  need_cmd docker "apt-get install docker.io"
  docker info >/dev/null 2>&1 || die "the Docker engine is not reachable (is dockerd running? are you root?)"
}

check_common() {
  check_docker
  need_cmd tar "apt-get install tar"
  need_cmd sha256sum "apt-get install coreutils"
}

# npm run by a given node binary (so that lifecycle scripts and engine checks see that node).
run_npm() {
  local node="$1"; shift
  local npm_path npm_cli
  npm_path="$(command -v npm)" || die "'npm' is required (apt-get install npm)"
  npm_cli="$(readlink -f "$npm_path")"
  if [[ "$npm_cli" == *.js ]]; then
    PATH="$(dirname "$node"):$PATH" "$node" "$npm_cli" "$@"
  else
    PATH="$(dirname "$node"):$PATH" npm "$@"
  fi
}

# ---------------------------------------------------------------- helpers

image_exists() { docker image inspect "$1" >/dev/null 2>&1; }
image_id() { docker image inspect -f '{{.Id}}' "$1"; }
image_inputs() { docker image inspect -f '{{ index .Config.Labels "agenthost.inputs" }}' "$1" 2>/dev/null || true; }

# Hash of build inputs: arguments are files/dirs (content) or literal strings prefixed with '='.
inputs_hash() {
  local item
  {
    for item in "$@"; do
      if [[ "$item" == =* ]]; then
        printf 'lit:%s\n' "${item#=}"
      elif [[ -d "$item" ]]; then
        (cd "$item" && find . -type f -print0 | LC_ALL=C sort -z | xargs -0 sha256sum)
      else
        sha256sum <"$item"
      fi
    done
  } | sha256sum | cut -c1-32
}

# Drop our own superseded images (untagged by a rebuild, not used by any container).
prune_old() { docker image prune -f --filter "label=agenthost.image=$1" >/dev/null 2>&1 || true; }

up_to_date() { # image inputs-hash
  [[ "$FORCE" != 1 ]] && image_exists "$1" && [[ "$(image_inputs "$1")" == "$2" ]]
}

debian_mirror() {
  if [[ -n "${AGENTHOST_DEBIAN_MIRROR:-}" ]]; then echo "$AGENTHOST_DEBIAN_MIRROR"; return; fi
  local uri=""
  if [[ -r /etc/apt/sources.list.d/debian.sources ]]; then
    # deb822: first stanza whose Suites name the plain suite (not -security/-updates).
    uri="$(awk -v suite="$DEBIAN_SUITE" '
      BEGIN { RS=""; FS="\n" }
      {
        uris=""; ok=0; deb=0
        for (i = 1; i <= NF; i++) {
          if ($i ~ /^URIs:/)   { sub(/^URIs:[ \t]*/, "", $i); split($i, u, /[ \t]+/); uris=u[1] }
          if ($i ~ /^Types:/ && $i ~ /(^|[ \t])deb([ \t]|$)/) deb=1
          if ($i ~ /^Suites:/) { n = split($i, s, /[ \t]+/); for (j = 2; j <= n; j++) if (s[j] == suite) ok=1 }
        }
        if (deb && ok && uris != "") { print uris; exit }
      }' /etc/apt/sources.list.d/debian.sources)"
  fi
  if [[ -z "$uri" && -r /etc/apt/sources.list ]]; then
    uri="$(awk -v suite="$DEBIAN_SUITE" '
      $1 == "deb" {
        i = 2; if ($i ~ /^\[/) { while ($i !~ /\]$/) i++; i++ }
        if ($(i+1) == suite) { print $i; exit }
      }' /etc/apt/sources.list)"
  fi
  case "$uri" in
    http://*|https://*|file:/*) echo "${uri%/}" ;;
    *) echo "http://deb.debian.org/debian" ;;
  esac
}

umount_below() { # unmount anything debootstrap left mounted under $1
  local dir="$1" m
  [[ -d "$dir" ]] || return 0
  while read -r m; do
    umount -l "$m" 2>/dev/null || true
  done < <(awk -v d="$dir/" 'index($2, d) == 1 { print $2 }' /proc/mounts | sort -r)
}
