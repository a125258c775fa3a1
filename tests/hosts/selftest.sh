#!/bin/sh
# Quick self-test of the test-host scripts (a few seconds): scripts/netns.sh
# creates two hosts, they reach each other and the root namespace, names
# resolve, scripts/netns-rsh runs commands there as ssh would, a pulled link
# cuts a host off and plugging it back restores it, and nothing is left
# behind afterwards, also when `with` is stopped by a signal.
# Exit status 0, 1 (failure) or 77 (skipped: not root, no network namespaces).
set -eu

root=$(cd "$(dirname "$0")/../.." && pwd)
netns=$root/scripts/netns.sh
rsh=$root/scripts/netns-rsh

if [ "$(id -u)" != 0 ]; then
  echo "selftest: SKIP: needs root" >&2
  exit 77
fi

# The checks that run while the hosts are up; a failure stops them.
if [ "${1:-}" = --inside ]; then
  fail() {
    echo "selftest: FAIL: $*" >&2
    exit 1
  }
  # ping where there is one; otherwise a TCP connection made by python3
  reach() { # from-ns address
    if command -v ping >/dev/null 2>&1; then
      ip netns exec "$1" ping -c1 -W2 "$2" >/dev/null 2>&1
    elif command -v python3 >/dev/null 2>&1; then
      ip netns exec "$1" python3 -c '
import socket, sys
s = socket.socket()
s.settimeout(2)
try:
    s.connect((sys.argv[1], 9))
except ConnectionRefusedError:
    pass  # a RST came back: the host is reachable
' "$2" >/dev/null 2>&1
    else
      echo "selftest: note: neither ping nor python3; reachability not checked" >&2
      return 0
    fi
  }
  reach bh1 10.77.0.2 || fail "bh1 cannot reach bh2 (10.77.0.2)"
  reach bh2 10.77.0.254 || fail "bh2 cannot reach the root namespace (10.77.0.254)"
  reach bh2 10.77.0.1 || fail "bh2 cannot reach bh1"
  got=$(getent hosts bh2 | awk '{print $1}')
  [ "$got" = 10.77.0.2 ] || fail "bh2 resolves to '$got', not 10.77.0.2"

  got=$("$rsh" -x -o BatchMode=yes bh1 hostname)
  [ "$got" = bh1 ] || fail "netns-rsh bh1 hostname printed '$got'"
  got=$("$rsh" -p 22 root@10.77.0.2 ip -o -4 addr show dev eth0 | grep -o '10\.77\.0\.[0-9]*/24')
  [ "$got" = 10.77.0.2/24 ] || fail "netns-rsh 10.77.0.2 saw address '$got'"
  got=$("$rsh" bh1 echo '"a  b"' c)
  [ "$got" = "a  b c" ] || fail "netns-rsh does not join words into one command line: '$got'"
  got=$(echo through | "$rsh" bh2 cat)
  [ "$got" = through ] || fail "netns-rsh does not pass stdin"
  got=$(echo through | "$rsh" -n bh2 cat)
  [ -z "$got" ] || fail "netns-rsh -n still passes stdin"
  rc=0
  "$rsh" bh2 'exit 7' || rc=$?
  [ $rc = 7 ] || fail "netns-rsh returned $rc for 'exit 7'"
  rc=0
  "$rsh" bh9 true 2>/dev/null || rc=$?
  [ $rc = 255 ] || fail "netns-rsh to a missing host returned $rc, not 255"

  "$netns" link bh2 down
  if reach bh1 10.77.0.2; then
    fail "bh2 still reachable after 'link bh2 down'"
  fi
  "$netns" link bh2 up
  reach bh1 10.77.0.2 || fail "bh2 unreachable after 'link bh2 up'"
  exit 0
fi

left_behind() {
  if ip netns list 2>/dev/null | grep -q '^bh[0-9]'; then
    echo "namespaces: $(ip netns list | tr '\n' ' ')"
  fi
  if ip link show dev bbr0 >/dev/null 2>&1; then
    echo "bridge bbr0"
  fi
  if grep -q 'baton-netns' /etc/hosts 2>/dev/null; then
    echo "/etc/hosts block"
  fi
}

rc=0
"$netns" with 2 -- "$0" --inside || rc=$?
[ $rc = 77 ] && exit 77
if [ $rc != 0 ]; then
  echo "selftest: FAIL: checks on the hosts (status $rc)" >&2
  exit 1
fi
left=$(left_behind)
if [ -n "$left" ]; then
  echo "selftest: FAIL: left behind after 'with': $left" >&2
  exit 1
fi

# A signal to `with` must still take the hosts down.
"$netns" with 1 -- sleep 30 2>/dev/null &
pid=$!
i=0
until ip netns exec bh1 true 2>/dev/null; do
  i=$((i + 1))
  if [ $i -gt 100 ]; then
    echo "selftest: FAIL: host bh1 did not come up" >&2
    kill "$pid" 2>/dev/null || true
    exit 1
  fi
  sleep 0.05
done
kill -TERM "$pid"
rc=0
wait "$pid" || rc=$?
left=$(left_behind)
if [ $rc != 143 ] || [ -n "$left" ]; then
  echo "selftest: FAIL: after SIGTERM 'with' exited $rc (want 143); left behind: ${left:-nothing}" >&2
  exit 1
fi
echo "selftest: ok"
