# The edge's cap on connections per client address: Caddy 2.6 has none (caddy-ratelimit is not in Debian's
# build), so the kernel counts them. A new connection to the edge's ports from an address (an IPv4 address, an
# IPv6 /64) that already holds EDGE_MAX_CONNS_PER_CLIENT is reset at once. One chain per edge (named by its HTTPS
# port), jumped to from INPUT; 0 turns it off. Sourced by start.sh and stop.sh.

edge_limit_chain() { echo "AGENTHOST-EDGE-$EDGE_HTTPS_PORT"; }

edge_limit_off() {
  local chain ipt
  chain="$(edge_limit_chain)"
  for ipt in iptables ip6tables; do
    command -v "$ipt" >/dev/null || continue
    while "$ipt" -w -D INPUT -j "$chain" 2>/dev/null; do :; done
    "$ipt" -w -F "$chain" 2>/dev/null || true
    "$ipt" -w -X "$chain" 2>/dev/null || true
  done
}

edge_limit_on() {
  local chain ipt mask
  chain="$(edge_limit_chain)"
  edge_limit_off
  [ "$EDGE_MAX_CONNS_PER_CLIENT" = 0 ] && return 0
  for ipt in iptables ip6tables; do
    mask=32; [ "$ipt" = ip6tables ] && mask=64
    if ! { "$ipt" -w -N "$chain" &&
      "$ipt" -w -A "$chain" -p tcp --syn -m multiport --dports "$EDGE_HTTPS_PORT,$EDGE_HTTP_PORT" \
        -m connlimit --connlimit-above "$EDGE_MAX_CONNS_PER_CLIENT" --connlimit-mask "$mask" -j REJECT --reject-with tcp-reset &&
      "$ipt" -w -I INPUT -j "$chain"; } 2>/dev/null; then
      # A machine without IPv6 has no ip6tables tables to add to: IPv4 is what must hold.
      [ "$ipt" = ip6tables ] && { echo "edge: no IPv6 connection cap ($ipt refused it)" >&2; continue; }
      die "could not cap connections per client at the edge with $ipt (EDGE_MAX_CONNS_PER_CLIENT=$EDGE_MAX_CONNS_PER_CLIENT); set it to 0 to run without the cap"
    fi
  done
}
