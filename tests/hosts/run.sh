#!/bin/bash
# The C test suite across test hosts made of network namespaces (scripts/netns-hosts), launched
# through scripts/netns-rsh:
#  1. 3 hosts with 2 slots each: ranks 0-1, 2-3, 4-5 share a host (shared memory inside a host,
#     TCP between hosts; 8 ranks wrap around);
#  2. point-to-point and a few collectives on 2 hosts with one slot each (every pair over TCP,
#     cyclic placement), 3 stripes per peer and tiny frames, over IPv6 only (BATON_TCP_IF and the
#     launcher's -iface fd83::/64);
#  3. (dpm) MPI_Comm_spawn across the 3 hosts (tests/hosts/dpm_spawn_hosts.c): both parents on
#     host 1, children placed on free slots, by the info keys "host" (one host or a list) and
#     "map_by", each checked through MPI_Get_processor_name; p2p, a collective and disconnect
#     over each intercommunicator; the time MPI_Comm_spawn takes for 1 and 4 children;
#  4. faults while ranks talk over TCP: a rank on another host SIGKILLed (the job ends within
#     2 s naming rank and host), a host's link taken down (ends within the heartbeat bound,
#     BATON_HEARTBEAT_TIMEOUT=2 here, naming the host); no process of the job left behind;
#  5. (progress, only when PARTS names it) asynchronous progress with BATON_PROGRESS=thread on 2
#     hosts with one slot each: progress_p2p's 16 MiB message and rma_passive_progress's epochs
#     over TCP between hosts while both ranks compute, progress_coll's 4 ranks two per host.
# Without root (no namespaces), parts 1 and 5 run on "hosts" that are other names of this machine
# (127.0.0.1-3: a proxy, a segment and TCP between them all the same) and the rest is skipped
# (the spawn test needs hosts with names of their own).
# The namespaces are removed on every exit path.
# PARTS (default "suite p2p dpm faults"; "progress" as well or alone) selects parts.
set -u
prefix=$1
root=$(cd "$(dirname "$0")/../.." && pwd)
export NETNS_PREFIX=${NETNS_PREFIX:-bci} NETNS_BRIDGE=${NETNS_BRIDGE:-bcibr0} NETNS_NET=${NETNS_NET:-10.83.0}
hosts="$root/scripts/netns-hosts"
cleanup() { "$hosts" down >/dev/null 2>&1; }
trap cleanup EXIT
trap 'exit 130' INT TERM
"$hosts" up 3 --ipv6
rc=$?
export MPICC="$prefix/bin/mpicc" MPIEXEC="$prefix/bin/mpiexec" BUILD_DIR="${BUILD_DIR:-$root/build/c-tests}"
fails=0
parts=${PARTS:-suite p2p dpm faults}
has() { case " $parts " in *" $1 "*) return 0 ;; esac; return 1; }
# Asynchronous progress between hosts, one rank per host (progress_coll's 4 ranks wrap around):
# the same filters on namespace hosts and on names of this machine.
progress_part() {
  ALGORITHMS=none BATON_PROGRESS=thread MPIEXEC_FLAGS="$1 -hosts $2,$3" \
    "$root/tests/run-c-tests" progress_ rma_passive_progress
}
if [ $rc = 77 ]; then
  echo "SKIP namespace hosts (need root); the suite and the progress part on names of this machine instead"
  fails=0
  if has suite; then
    ALGORITHMS=none MPIEXEC_FLAGS="-hosts 127.0.0.1:2,127.0.0.2:2,127.0.0.3:2" \
      "$root/tests/run-c-tests" || fails=$((fails + 1))
  fi
  if has progress; then
    progress_part "" 127.0.0.1 127.0.0.2 || fails=$((fails + 1))
  fi
  exit $fails
fi
[ $rc = 0 ] || exit 1
rsh="--rsh $root/scripts/netns-rsh"
h=$NETNS_PREFIX
if has suite; then
echo "--- 3 hosts x 2 slots"
ALGORITHMS=none MPIEXEC_FLAGS="$rsh -hosts ${h}1:2,${h}2:2,${h}3:2" \
  "$root/tests/run-c-tests" || fails=$((fails + 1))
fi
if has p2p; then
echo "--- 2 hosts x 1 slot, 3 stripes, tiny frames, IPv6, reno"
octets=${NETNS_NET#*.}
ALGORITHMS=none BATON_TCP_CONGESTION=reno BATON_TCP_IF="fd${octets%%.*}::/64" BATON_TCP_STRIPES=3 BATON_TCP_EAGER_MAX=64 BATON_TCP_CHUNK=4096 MPIEXEC_FLAGS="$rsh -iface fd${octets%%.*}::/64 -hosts ${h}1,${h}2" \
  "$root/tests/run-c-tests" p2p_basic p2p_order p2p_modes p2p_probe p2p_large_count threads coll_bcast coll_alltoall ||
  fails=$((fails + 1))
fi
if has progress; then
  echo "--- asynchronous progress, 2 hosts x 1 slot, BATON_PROGRESS=thread"
  progress_part "$rsh" "${h}1" "${h}2" || fails=$((fails + 1))
fi
if has dpm; then
  echo "--- MPI_Comm_spawn across 3 hosts"
  mkdir -p "$BUILD_DIR"
  if "$prefix/bin/mpicc" -o "$BUILD_DIR/dpm_spawn_hosts" "$root/tests/hosts/dpm_spawn_hosts.c"; then
    "$prefix/bin/mpiexec" --timeout 120 $rsh -hosts "${h}1:2,${h}2:2,${h}3:2" -n 2 \
      "$BUILD_DIR/dpm_spawn_hosts" "${h}1" "${h}2" "${h}3" || fails=$((fails + 1))
  else
    fails=$((fails + 1))
  fi
fi
has faults || exit $fails

echo "--- faults across hosts"
"$prefix/bin/mpicc" -o "$BUILD_DIR/blocker" "$root/tests/fault/blocker.c" || exit 1
out=$(mktemp)
err=$(mktemp)
wait_ready() {
  for _ in $(seq 200); do
    [ "$(grep -c '^ready' "$out")" -ge "$1" ] && return 0
    sleep 0.05
  done
  return 1
}
fault() { # name expected-pattern bound-ms action...
  local name=$1 pattern=$2 bound=$3
  shift 3
  : >"$out"
  : >"$err"
  BATON_HEARTBEAT_TIMEOUT=2 "$prefix/bin/mpiexec" --timeout 60 $rsh -hosts "${h}1:2,${h}2:2" -n 4 "$BUILD_DIR/blocker" >"$out" 2>"$err" &
  local mpx=$!
  if ! wait_ready 4; then
    echo "FAIL $name: job did not start: $(cat "$err")"
    kill -9 $mpx 2>/dev/null
    fails=$((fails + 1))
    return
  fi
  local pids t0 rc ms left
  pids=$(awk '$1=="ready" {print $3}' "$out")
  t0=$(date +%s%N)
  "$@"
  wait $mpx
  rc=$?
  ms=$((($(date +%s%N) - t0) / 1000000))
  # A cut-off host cleans up by itself (its proxy notices the silence too): give it a moment.
  for _ in $(seq 60); do
    left=0
    for p in $pids; do kill -0 "$p" 2>/dev/null && left=$((left + 1)); done
    [ $left = 0 ] && break
    sleep 0.05
  done
  if [ "$rc" = 0 ] || [ "$ms" -gt "$bound" ] || [ "$left" != 0 ] || ! grep -Eq "$pattern" "$err"; then
    echo "FAIL $name: exit $rc after $ms ms (bound $bound), $left processes left; stderr: $(cat "$err")"
    kill -9 $pids 2>/dev/null
    fails=$((fails + 1))
  else
    echo "ok $name: exit $rc after $ms ms: $(grep -E "$pattern" "$err" | head -1)"
  fi
}
kill_rank() { kill -9 "$(awk -v r="$1" '$1=="ready" && $2==r {print $3}' "$out")"; }
fault "rank on another host SIGKILLed" "rank 3 \\(pid [0-9]+ on ${h}2\\) was killed by signal 9" 2000 kill_rank 3
fault "link of a host taken down" "lost contact with host ${h}2" 5000 ip -n "${h}2" link set eth0 down
ip -n "${h}2" link set eth0 up
rm -f "$out" "$err"
exit $fails
