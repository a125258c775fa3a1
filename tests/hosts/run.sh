#!/bin/bash
# The C test suite across test hosts made of network namespaces (scripts/netns-hosts), launched
# through scripts/netns-rsh:
#  1. 3 hosts with 2 slots each: ranks 0-1, 2-3, 4-5 share a host (shared memory inside a host,
#     TCP between hosts; 8 ranks wrap around);
#  2. point-to-point and a few collectives on 2 hosts with one slot each (every pair over TCP,
#     cyclic placement), 3 stripes per peer and tiny frames.
# Needs root; prints SKIP and exits 0 otherwise. The hosts are removed on every exit path.
set -u
prefix=$1
root=$(cd "$(dirname "$0")/../.." && pwd)
export NETNS_PREFIX=${NETNS_PREFIX:-bci} NETNS_BRIDGE=${NETNS_BRIDGE:-bcibr0} NETNS_NET=${NETNS_NET:-10.83.0}
hosts="$root/scripts/netns-hosts"
cleanup() { "$hosts" down >/dev/null 2>&1; }
trap cleanup EXIT
trap 'exit 130' INT TERM
"$hosts" up 3
rc=$?
if [ $rc = 77 ]; then
  echo "SKIP: test hosts need root and network namespaces"
  exit 0
fi
[ $rc = 0 ] || exit 1
rsh="--rsh $root/scripts/netns-rsh"
h=$NETNS_PREFIX
export MPICC="$prefix/bin/mpicc" MPIEXEC="$prefix/bin/mpiexec" BUILD_DIR="${BUILD_DIR:-$root/build/c-tests}"
fails=0
echo "--- 3 hosts x 2 slots"
ALGORITHMS=none MPIEXEC_FLAGS="$rsh -hosts ${h}1:2,${h}2:2,${h}3:2" \
  "$root/tests/run-c-tests" || fails=$((fails + 1))
echo "--- 2 hosts x 1 slot, 3 stripes, tiny frames"
ALGORITHMS=none BATON_TCP_STRIPES=3 BATON_TCP_EAGER_MAX=64 BATON_TCP_CHUNK=4096 MPIEXEC_FLAGS="$rsh -hosts ${h}1,${h}2" \
  "$root/tests/run-c-tests" p2p_basic p2p_order p2p_modes p2p_probe p2p_large_count threads coll_bcast coll_alltoall ||
  fails=$((fails + 1))
exit $fails
