#!/bin/bash
# The whole test suite (README's second command runs this through `make test`). Each step
# prints its own result; the last line counts steps: "N passed, N failed".
set -u
prefix=${1:-$(pwd)/install}
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
passed=0
failed=0
failures=()
step() {
  local name=$1
  shift
  echo "=== $name"
  local t0=$SECONDS
  if "$@"; then
    passed=$((passed + 1))
    echo "--- ok $name ($((SECONDS - t0))s)"
  else
    failed=$((failed + 1))
    failures+=("$name")
    echo "--- FAIL $name ($((SECONDS - t0))s)"
  fi
}

build=$root/build/tests
mkdir -p "$build"
mpicc=$prefix/bin/mpicc
mpiexec=$prefix/bin/mpiexec

run_abi_prog() {
  "$mpicc" -Wall -Wextra -Werror -o "$build/$1" "tests/abi/$1.c" && timeout 60 "$mpiexec" -n "$2" "$build/$1"
}

transports_error() {
  "$mpicc" -o "$build/hello" examples/hello.c || return 1
  local err
  err=$(BATON_TRANSPORTS=ucx timeout 30 "$mpiexec" -n 2 "$build/hello" 2>&1)
  [ $? != 0 ] && echo "$err" | grep -q "BATON_TRANSPORTS=ucx names 'ucx', which is not one of: self, shm, tcp" || return 1
  # Shared memory alone cannot reach a rank on another host (two names of this machine are two
  # hosts to the launcher, each with its own proxy and segment).
  err=$(BATON_TRANSPORTS=shm timeout 30 "$mpiexec" -hosts 127.0.0.1,127.0.0.2 -n 2 "$build/hello" 2>&1)
  [ $? != 0 ] && echo "$err" | grep -q "no transport reaches rank"
}

# A bad setting stops MPI_Init (under mpiexec, and in a program started without it) or mpiexec
# itself, with one message naming the variable, the value and what is accepted; BATON_PLACE, a
# hint, only warns (once per host).
settings_error() {
  "$mpicc" -o "$build/hello" examples/hello.c || return 1
  local err
  err=$(BATON_SPIN_US=abc timeout 30 "$mpiexec" -n 2 "$build/hello" 2>&1)
  [ $? != 0 ] && echo "$err" | grep -q "MPI_Init: BATON_SPIN_US=abc is not a whole number of microseconds (0..=1000000)" || return 1
  err=$(BATON_COLL_BARRIER=no_such_algorithm timeout 30 "$build/hello" 2>&1)
  [ $? != 0 ] && echo "$err" | grep -q "BATON_COLL_BARRIER=no_such_algorithm is not one of: auto, dissemination, shm" || return 1
  err=$(BATON_PLACE=blok timeout 30 "$mpiexec" -n 2 "$build/hello" 2>&1)
  [ $? = 0 ] && [ "$(echo "$err" | grep -c "BATON_PLACE=blok is not one of: cyclic, block, off; using cyclic")" = 1 ] || return 1
  err=$(BATON_LAUNCH_FANOUT=0 timeout 30 "$mpiexec" -n 1 "$build/hello" 2>&1)
  [ $? = 2 ] && [ "$err" = "mpiexec: BATON_LAUNCH_FANOUT=0 is not a whole number (1..=256)" ]
}

relocated_install() {
  local dir rc=0
  dir=$(mktemp -d)
  make -s install PREFIX="$dir/baton" >/dev/null || rc=1
  # The wrapper, the rpath (no LD_LIBRARY_PATH) and the pkg-config file all point at the new prefix.
  "$dir/baton/bin/mpicc" -o "$dir/hello" examples/hello.c || rc=1
  env -u LD_LIBRARY_PATH timeout 60 "$dir/baton/bin/mpiexec" -n 3 "$dir/hello" >/dev/null || rc=1
  "$dir/baton/bin/mpicc" -show | grep -q "$dir/baton/include" || rc=1
  PKG_CONFIG_PATH="$dir/baton/lib/pkgconfig" pkg-config --cflags mpi | grep -q "$dir/baton/include" || rc=1
  readelf -d "$dir/hello" | grep -q "$dir/baton/lib" || rc=1
  rm -rf "$dir"
  return $rc
}

step "rust unit and integration tests" cargo test --release --workspace -q
# Mutated and random frame streams through the TCP receive path (bounded; prints its seed).
step "fuzz the TCP frame decoder (20 s)" cargo run --release -q -p baton-transport --example fuzz_tcp -- 20
step "rustfmt" cargo fmt --all -- --check
step "clippy" cargo clippy --release --workspace --all-targets -q -- -D warnings
step "abi data matches shared/" tests/abi-data-sync.sh
# Layering: no crate's top-level modules import each other in a circle.
step "no module import cycles" tests/arch/module-cycles.py
step "mpi.h and exported symbols" tests/abi/header.sh "$prefix"
step "profiling interface" run_abi_prog profiling 2
step "unsupported functions" run_abi_prog unsupported 1
step "install elsewhere (make install PREFIX=...)" relocated_install
step "C test suite" env MPICC="$mpicc" MPIEXEC="$mpiexec" BUILD_DIR="$root/build/c-tests" tests/run-c-tests
# The fallback paths: no single-copy reads (data streamed through the rings), tiny rings that
# fill constantly, a tiny eager limit (almost everything by rendezvous).
step "C point-to-point suite, streamed rendezvous and tiny rings" env BATON_CMA=0 BATON_SHM_RING_SIZE=8192 BATON_SHM_EAGER_MAX=64 \
  MPICC="$mpicc" MPIEXEC="$mpiexec" BUILD_DIR="$root/build/c-tests" tests/run-c-tests p2p_basic p2p_order p2p_modes p2p_probe p2p_complete p2p_express p2p_coop threads coll_basic
# Cooperative copies from 64 KiB on: messages of 64 KiB-1 MiB shared in one or a few chunks.
step "C point-to-point suite, cooperative copies from 64 KiB" env BATON_COOP_MIN=64k ALGORITHMS=none \
  MPICC="$mpicc" MPIEXEC="$mpiexec" BUILD_DIR="$root/build/c-tests" tests/run-c-tests p2p_basic p2p_modes p2p_coop coll_bcast coll_reduce
# Every rank pair over TCP (loopback), then with tiny frames and three bulk lanes per peer: data
# frames split by the kernel, streamed rendezvous for almost everything.
# Known race (issue 25's item 18 follow-up): over TCP, dpm_reconnect_split hangs about once in 20
# runs, one member of a merged communicator spanning two jobs finishing an allgather that the
# others still wait in; until it is found, its failures are reported as xfail here.
step "C test suite over TCP (BATON_TRANSPORTS=tcp)" env BATON_TRANSPORTS=tcp ALGORITHMS=none XFAIL=dpm_reconnect_split \
  MPICC="$mpicc" MPIEXEC="$mpiexec" BUILD_DIR="$root/build/c-tests" tests/run-c-tests
step "C point-to-point suite over TCP, tiny frames, 3 stripes" env ALGORITHMS=none BATON_TRANSPORTS=tcp BATON_TCP_EAGER_MAX=64 \
  BATON_TCP_CHUNK=4096 BATON_TCP_STRIPES=3 MPICC="$mpicc" MPIEXEC="$mpiexec" BUILD_DIR="$root/build/c-tests" \
  tests/run-c-tests p2p_basic p2p_order p2p_bursts p2p_modes p2p_probe p2p_complete p2p_large_count threads coll_basic coll_bcast coll_alltoall
# Asynchronous progress: progress_p2p and progress_coll force BATON_PROGRESS=thread in their
# headers, so the suite steps above already run them over shared memory and over TCP. With the
# setting in the environment, rma_passive_progress also demands that its passive epochs end while
# the target computes; and the point-to-point, collective and one-sided tests run with a progress
# thread beside every rank (a thread on a borrowed core: these machines have 2), over shared
# memory and over TCP.
progress_suite() {
  local rc=0 tests="p2p_ coll_ rma_ threads intercomm_p2p"
  env BATON_PROGRESS=thread ALGORITHMS=none MPICC="$mpicc" MPIEXEC="$mpiexec" BUILD_DIR="$root/build/c-tests" \
    tests/run-c-tests $tests || rc=1
  env BATON_PROGRESS=thread BATON_TRANSPORTS=tcp ALGORITHMS=none MPICC="$mpicc" MPIEXEC="$mpiexec" \
    BUILD_DIR="$root/build/c-tests" tests/run-c-tests $tests || rc=1
  return $rc
}
step "C point-to-point, collective and one-sided suites with a progress thread (BATON_PROGRESS=thread), shm and TCP" progress_suite
# Several hosts (network namespaces as root; skipped otherwise): the scripts that make them, then
# the suite across 3 hosts.
test_hosts_selftest() {
  tests/hosts/selftest.sh
  local rc=$?
  [ $rc = 77 ] && echo "SKIP: test hosts need root" && return 0
  return $rc
}
step "test hosts: netns.sh and netns-rsh self-test" test_hosts_selftest
step "C test suite across namespace hosts (shm inside, TCP between)" env BUILD_DIR="$root/build/c-tests" XFAIL=dpm_reconnect_split \
  tests/hosts/run.sh "$prefix"
# The progress tests with one rank per host, every message of progress_p2p and rma_passive_progress
# over TCP between namespaces (without root: between two names of this machine).
step "asynchronous progress across namespace hosts (1 rank per host, BATON_PROGRESS=thread)" \
  env PARTS=progress BUILD_DIR="$root/build/c-tests" tests/hosts/run.sh "$prefix"
# Also one connection per peer (no bulk lane): large messages' data shares lane 0.
step "TCP over IPv6 (BATON_TCP_IF=::1), no bulk lane (BATON_TCP_STRIPES=0)" env BATON_TRANSPORTS=tcp BATON_TCP_IF=::1 \
  BATON_TCP_STRIPES=0 ALGORITHMS=none MPICC="$mpicc" \
  MPIEXEC="$mpiexec" BUILD_DIR="$root/build/c-tests" tests/run-c-tests p2p_basic p2p_order coll_allreduce
step "BATON_TRANSPORTS: a missing transport, or none reaching a rank: clear error" transports_error
step "a bad setting: clear error at MPI_Init or from mpiexec" settings_error
# Two separate mpiexec runs meeting through the name service and through a port in a file; then
# 1000 spawn/disconnect and 1000 accept/connect cycles with leak checks (fds, RSS, segments).
step "dynamic processes between two mpiexec runs" env MPICC="$mpicc" MPIEXEC="$mpiexec" tests/dpm/run.sh
step "1000 spawn and 1000 accept/connect cycles, no leaks" env DPM_CYCLES=1000 TIMEOUT_SCALE=10 \
  MPICC="$mpicc" MPIEXEC="$mpiexec" BUILD_DIR="$root/build/c-tests" tests/run-c-tests dpm_spawn_cycles dpm_port_cycles
step "fault tests (rank and mpiexec SIGKILL)" env BUILD_DIR="$root/build/fault" tests/fault/run.sh "$prefix"
step "mpi4py 4.1.2 built against Baton (smoke test, 2 and 4 ranks)" tests/python/run.sh "$prefix"
step "mpi4py 4.1.2's own test suite (1, 2 and 3 ranks; exclusions in tests/python/mpi4py-excluded.txt)" tests/python/suite.sh "$prefix"
if [ -x bench/ci-smoke ]; then
  step "benchmark smoke run (Baton)" env BENCH_MPI=baton bench/ci-smoke
fi
leftover=$(ls /dev/shm 2>/dev/null | grep -i baton || true)
step "no shared-memory leftovers" test -z "$leftover"

echo
if [ "$failed" -gt 0 ]; then
  echo "failed steps: ${failures[*]}"
fi
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
