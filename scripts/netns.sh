#!/bin/sh
# Test "hosts" on one machine: network namespaces bh1..bhN, each with a veth
# pair to the bridge bbr0 in the root namespace (where mpiexec runs).
#
#   scripts/netns.sh up N [--ipv6]    hosts bh1..bhN (exactly N: extra ones go)
#   scripts/netns.sh down             remove hosts, bridge and /etc/hosts block
#   scripts/netns.sh link HOST down|up   pull / plug HOST's cable
#   scripts/netns.sh with N [--ipv6] -- CMD [ARGS...]
#                                     up N, run CMD, down on every exit path
#   scripts/netns.sh status
#
# Addresses: bhK = 10.77.0.K/24 (and fd77::K/64 with --ipv6, K written as is,
# so bh10 is fd77::10), the root namespace = 10.77.0.254 (fd77::254) on bbr0,
# named bh0. Inside bhK the veth end is eth0, with a default route via bh0.
# The names are in a marked block of /etc/hosts (IPv6 ones as bhK-v6, so
# that bhK stays IPv4 whatever the resolver prefers).
# To run something on a host: scripts/netns-rsh bhK CMD (sets the host name
# too), or plain `ip netns exec bhK CMD`.
# NETNS_PREFIX (bh), NETNS_BRIDGE (bbr0) and NETNS_NET (10.77.0) rename it
# all, as for scripts/netns-hosts, so that test runs in parallel each have
# hosts of their own (IPv6 then fdXX:Y::K for NETNS_NET=10.XX.Y).
#
# Exit status 77 (skip) when not root or network namespaces are unavailable.
set -eu

P=${NETNS_PREFIX:-bh}
BRIDGE=${NETNS_BRIDGE:-bbr0}
SUBNET=${NETNS_NET:-10.77.0}
octets=${SUBNET#*.}
case ${octets#*.} in
  0) SUBNET6=fd${octets%%.*}: ;;
  *) SUBNET6=fd${octets%%.*}:${octets#*.}: ;;
esac
STATE=/run/baton-netns
HOSTS_FILE=${NETNS_HOSTS_FILE:-/etc/hosts}
MARK_BEGIN="# BEGIN baton-netns test hosts $P"
MARK_END="# END baton-netns test hosts $P"
me=$(basename "$0")

usage() {
  sed -n '2,/^set /s/^# \{0,1\}//p' "$0" >&2
  exit 2
}

skip() {
  echo "$me: SKIP: $*" >&2
  exit 77
}

die() {
  echo "$me: $*" >&2
  exit 1
}

require_netns() {
  [ "$(id -u)" = 0 ] || skip "needs root (network namespaces, veth, bridge)"
  command -v ip >/dev/null 2>&1 || skip "no 'ip' command (iproute2)"
  ip netns list >/dev/null 2>&1 || skip "'ip netns' does not work here"
}

# Serialises concurrent invocations: state changes hold fd 9 on this file.
lock_state() {
  [ -d "$STATE" ] || mkdir -p "$STATE" 2>/dev/null || STATE=${TMPDIR:-/tmp}/baton-netns
  mkdir -p "$STATE"
  exec 9>"$STATE/lock"
  if command -v flock >/dev/null 2>&1; then
    flock 9
  fi
}

unlock_state() {
  exec 9>&-
}

has_ns() {
  [ -e "/run/netns/$1" ] || ip netns list 2>/dev/null | grep -q "^$1\( \|$\)"
}

has_link() {
  ip link show dev "$1" >/dev/null 2>&1
}

# Namespaces named bhK (K a number) are this script's.
our_hosts() {
  ip netns list 2>/dev/null | sed -n "s/^\(${P}[0-9][0-9]*\)\( .*\)\{0,1\}\$/\1/p"
}

host_index() {
  case $1 in
    "$P"[0-9]*) k=${1#"$P"} ;;
    *) return 1 ;;
  esac
  case $k in
    *[!0-9]*) return 1 ;;
  esac
  [ "$k" -ge 1 ] && [ "$k" -le 253 ] || return 1
  echo "$k"
}

# The probe catches a root without CAP_SYS_ADMIN (containers), where
# `ip netns list` works but creating one does not.
probe_netns() {
  p=netnsprobe$$
  if ! ip netns add "$p" 2>/dev/null; then
    skip "cannot create a network namespace (no CAP_SYS_ADMIN?)"
  fi
  ip netns del "$p" 2>/dev/null || true
}

write_hosts_block() { # N ipv6
  [ -w "$HOSTS_FILE" ] || { echo "$me: warning: $HOSTS_FILE not writable; host names will not resolve" >&2; return 0; }
  tmp=$(mktemp)
  sed "/^$MARK_BEGIN\$/,/^$MARK_END\$/d" "$HOSTS_FILE" >"$tmp"
  if [ "$1" -gt 0 ]; then
    {
      echo "$MARK_BEGIN"
      echo "# written by scripts/netns.sh up; scripts/netns.sh down removes the block"
      echo "$SUBNET.254 ${P}0"
      k=1
      while [ "$k" -le "$1" ]; do
        echo "$SUBNET.$k $P$k"
        k=$((k + 1))
      done
      if [ "$2" = 1 ]; then
        echo "${SUBNET6}:254 ${P}0-v6"
        k=1
        while [ "$k" -le "$1" ]; do
          echo "${SUBNET6}:$k $P$k-v6"
          k=$((k + 1))
        done
      fi
      echo "$MARK_END"
    } >>"$tmp"
  fi
  # Rewritten in place, not renamed over: /etc/hosts is often a bind mount.
  cat "$tmp" >"$HOSTS_FILE"
  rm -f "$tmp"
}

bridge_up() { # ipv6
  if ! has_link "$BRIDGE"; then
    ip link add "$BRIDGE" type bridge 2>/dev/null || skip "cannot create a bridge (no bridge support?)"
  fi
  ip addr replace "$SUBNET.254/24" dev "$BRIDGE"
  if [ "$1" = 1 ]; then
    ip -6 addr replace "${SUBNET6}:254/64" dev "$BRIDGE" nodad
  else
    ip -6 addr flush dev "$BRIDGE" scope global 2>/dev/null || true
  fi
  ip link set "$BRIDGE" up
}

# Addresses and routes of host K; also what `link up` restores.
configure_host() { # K ipv6
  h=$P$1
  ip -n "$h" link set lo up
  ip -n "$h" addr replace "$SUBNET.$1/24" dev eth0
  ip -n "$h" link set eth0 up
  ip -n "$h" route replace default via "$SUBNET.254" dev eth0
  if [ "$2" = 1 ]; then
    # nodad: usable at once, without waiting for duplicate address detection
    ip -n "$h" -6 addr replace "${SUBNET6}:$1/64" dev eth0 nodad
    ip -n "$h" -6 route replace default via "${SUBNET6}:254" dev eth0
  else
    ip -n "$h" -6 addr flush dev eth0 scope global 2>/dev/null || true
  fi
}

host_up() { # K ipv6
  h=$P$1
  has_ns "$h" || ip netns add "$h"
  # Both ends of a veth pair vanish together, so a missing root end means
  # the host has no eth0 either (or a stale one from a killed run: dropped).
  if ! has_link "v$h"; then
    ip -n "$h" link del eth0 2>/dev/null || true
    ip link add "v$h" type veth peer name eth0 netns "$h" ||
      skip "cannot create a veth pair"
  fi
  ip link set "v$h" master "$BRIDGE"
  ip link set "v$h" up
  configure_host "$1" "$2"
}

# Processes still inside a namespace keep it alive after `ip netns del`;
# a test host must not outlive its test, so they are ended first.
kill_host_procs() {
  pids=$(ip netns pids "$1" 2>/dev/null || true)
  [ -n "$pids" ] || return 0
  # shellcheck disable=SC2086 # a list of pids
  kill -TERM $pids 2>/dev/null || true
  i=0
  while [ $i -lt 20 ]; do
    pids=$(ip netns pids "$1" 2>/dev/null || true)
    [ -n "$pids" ] || return 0
    sleep 0.1
    i=$((i + 1))
  done
  # shellcheck disable=SC2086
  kill -KILL $pids 2>/dev/null || true
}

host_down() { # name
  kill_host_procs "$1"
  ip link del "v$1" 2>/dev/null || true
  ip netns del "$1" 2>/dev/null || true
}

cmd_up() { # N [--ipv6]
  n=${1:-}
  case $n in
    '' | *[!0-9]*) die "up: want a number of hosts, got '$n'" ;;
  esac
  if [ "$n" -lt 1 ] || [ "$n" -gt 253 ]; then
    die "up: 1..253 hosts, got $n"
  fi
  v6=0
  [ "${2:-}" = --ipv6 ] && v6=1
  if [ $v6 = 1 ] && [ "$(cat /proc/sys/net/ipv6/conf/all/disable_ipv6 2>/dev/null || echo 1)" != 0 ]; then
    skip "IPv6 is disabled on this machine"
  fi
  require_netns
  lock_state
  probe_netns
  bridge_up $v6
  k=1
  while [ "$k" -le "$n" ]; do
    host_up "$k" $v6
    k=$((k + 1))
  done
  for h in $(our_hosts); do
    i=$(host_index "$h") || continue
    [ "$i" -le "$n" ] || host_down "$h"
  done
  echo $v6 >"$STATE/ipv6.$P"
  write_hosts_block "$n" $v6
  unlock_state
  echo "$me: hosts ${P}1..$P$n up ($SUBNET.1-$n, root namespace $SUBNET.254 on $BRIDGE)" >&2
}

cmd_down() {
  require_netns
  lock_state
  for h in $(our_hosts); do
    host_down "$h"
  done
  # a veth whose namespace was deleted by hand
  for l in $(ip -o link show 2>/dev/null | sed -n "s/^[0-9]*: \(v${P}[0-9][0-9]*\)[@:].*/\1/p"); do
    ip link del "$l" 2>/dev/null || true
  done
  if has_link "$BRIDGE"; then
    ip link del "$BRIDGE"
  fi
  write_hosts_block 0 0
  rm -f "$STATE/ipv6.$P"
  unlock_state
}

# The host's end stays configured: software on it sees a dead network
# (time-outs, unreachable peers), as with a pulled cable or a dead switch port.
cmd_link() { # HOST down|up
  k=$(host_index "${1:-}") || die "link: want a host ${P}K, got '${1:-}'"
  case ${2:-} in
    up | down) ;;
    *) die "link: want 'down' or 'up', got '${2:-}'" ;;
  esac
  require_netns
  lock_state
  has_link "v$P$k" || die "link: host $P$k is not up"
  ip link set "v$P$k" "$2"
  if [ "$2" = up ]; then
    configure_host "$k" "$(cat "$STATE/ipv6.$P" 2>/dev/null || echo 0)"
  fi
  unlock_state
}

cmd_status() {
  require_netns
  echo "bridge $BRIDGE: $(ip -br addr show dev "$BRIDGE" 2>/dev/null || echo absent)"
  for h in $(our_hosts); do
    echo "$h: $(ip -n "$h" -br addr show dev eth0 2>/dev/null || echo 'no eth0'); root end $(ip -br link show dev "v$h" 2>/dev/null | awk '{print $2}')"
  done
}

child=
got_signal=

forward() { # signal number
  got_signal=$1
  # The command runs as an asynchronous list, where SIGINT is ignored: TERM
  # is what reaches it.
  if [ -n "$child" ]; then
    kill -TERM "$child" 2>/dev/null || true
  fi
}

cleanup() {
  rc=$?
  trap - EXIT INT TERM HUP
  if [ -n "$got_signal" ]; then
    rc=$((128 + got_signal))
  fi
  "$0" down || echo "$me: warning: 'down' failed; run '$0 down' by hand" >&2
  exit $rc
}

cmd_with() { # N [--ipv6] -- CMD...
  n=${1:-}
  [ $# -ge 1 ] && shift
  v6=
  if [ "${1:-}" = --ipv6 ]; then
    v6=--ipv6
    shift
  fi
  [ "${1:-}" = -- ] && shift
  [ $# -ge 1 ] || die "with: want a command after '--'"
  require_netns
  # Hosts are one machine-wide resource: a second `with` waits for the first
  # to finish (fd 8 is held for the whole run, not passed to the command).
  mkdir -p "$STATE" 2>/dev/null || STATE=${TMPDIR:-/tmp}/baton-netns
  mkdir -p "$STATE"
  exec 8>"$STATE/session.$P.lock"
  if command -v flock >/dev/null 2>&1; then
    flock 8
  fi
  trap cleanup EXIT
  trap 'forward 2' INT
  trap 'forward 15' TERM
  trap 'forward 1' HUP
  rc=0
  "$0" up "$n" ${v6:+"$v6"} || rc=$?
  if [ $rc != 0 ]; then
    trap - EXIT
    "$0" down >/dev/null 2>&1 || true
    exit $rc
  fi
  # Run in the background so that a signal to this script can be forwarded;
  # stdin is handed over explicitly (an asynchronous list would get /dev/null).
  # A signal that came while the hosts were being set up ends the run before the command.
  [ -z "$got_signal" ] || exit 1
  exec 3<&0
  "$@" <&3 3<&- 8>&- &
  child=$!
  # ... or just before `child` was known: forward it now.
  [ -z "$got_signal" ] || kill -TERM "$child" 2>/dev/null || true
  while :; do
    rc=0
    wait "$child" || rc=$?
    # wait returns early when a trapped signal arrives; the child may live on
    kill -0 "$child" 2>/dev/null || break
  done
  child=
  exit $rc
}

[ $# -ge 1 ] || usage
cmd=$1
shift
case $cmd in
  up) cmd_up "$@" ;;
  down) cmd_down ;;
  link) cmd_link "$@" ;;
  with) cmd_with "$@" ;;
  status) cmd_status ;;
  -h | --help | help) usage ;;
  *) usage ;;
esac
