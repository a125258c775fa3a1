#!/bin/bash
# Fault tests with a real MPI job on shared memory:
#  1. a rank SIGKILLed from outside: mpiexec exits with 128+9 within 2 s, prints one line naming
#     rank, pid, host and signal, and leaves no process of the job behind;
#  2. mpiexec itself SIGKILLed: every rank is gone within 2 s;
#  3. the same rank kill with every rank on TCP (BATON_TRANSPORTS=tcp);
#  4. strangers on the ranks' TCP ports (garbage, a wrong handshake, a silent connection):
#     refused and logged, while the job goes on and ends normally;
#  all: nothing new in /dev/shm.
set -u
prefix=$1
build=${BUILD_DIR:-build/fault}
mkdir -p "$build"
here=$(dirname "$0")
"$prefix/bin/mpicc" -o "$build/blocker" "$here/blocker.c" || exit 1
"$prefix/bin/mpicc" -o "$build/tcp_guard" "$here/tcp_guard.c" || exit 1
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }
shm_before=$(ls /dev/shm | sort)

wait_ready() { # file count
  for _ in $(seq 100); do
    [ "$(grep -c '^ready' "$1" 2>/dev/null)" -ge "$2" ] && return 0
    sleep 0.05
  done
  return 1
}

alive() { # pids...
  local n=0
  for p in "$@"; do kill -0 "$p" 2>/dev/null && n=$((n + 1)); done
  echo $n
}

# 1. rank killed (3: over TCP)
out=$(mktemp); err=$(mktemp)
for transports in "" tcp; do
: >"$out"; : >"$err"
env ${transports:+BATON_TRANSPORTS=$transports} "$prefix/bin/mpiexec" -n 4 "$build/blocker" >"$out" 2>"$err" &
mpx=$!
if wait_ready "$out" 4; then
  victim=$(awk '$1=="ready" && $2==2 {print $3}' "$out")
  pids=$(awk '$1=="ready" {print $3}' "$out")
  t0=$(date +%s%N)
  kill -9 "$victim"
  wait $mpx; rc=$?
  t1=$(date +%s%N)
  elapsed_ms=$(( (t1 - t0) / 1000000 ))
  [ "$rc" = 137 ] || fail "mpiexec exited $rc after SIGKILL of rank 2, expected 137"
  [ "$elapsed_ms" -lt 2000 ] || fail "job took ${elapsed_ms} ms to end after a rank died"
  grep -q "rank 2 (pid $victim on .*) was killed by signal 9 (Killed)" "$err" || fail "no clear line naming the rank: $(cat "$err")"
  [ "$(grep -c 'killed by signal' "$err")" = 1 ] || fail "expected exactly one line about the dead rank: $(cat "$err")"
  sleep 0.2
  [ "$(alive $pids)" = 0 ] || fail "processes of the job survive: $(alive $pids) left"
  echo "rank SIGKILL (transports: ${transports:-default}): exit $rc after ${elapsed_ms} ms; $(grep 'killed by signal' "$err")"
else
  fail "job did not start: $(cat "$err")"; kill -9 $mpx 2>/dev/null
fi
done

# 2. mpiexec killed
: >"$out"; : >"$err"
"$prefix/bin/mpiexec" -n 4 "$build/blocker" >"$out" 2>"$err" &
mpx=$!
if wait_ready "$out" 4; then
  pids=$(awk '$1=="ready" {print $3}' "$out")
  kill -9 $mpx
  wait $mpx 2>/dev/null
  for _ in $(seq 40); do [ "$(alive $pids)" = 0 ] && break; sleep 0.05; done
  left=$(alive $pids)
  [ "$left" = 0 ] || { fail "$left ranks survive mpiexec's SIGKILL"; kill -9 $pids 2>/dev/null; }
  echo "mpiexec SIGKILL: ranks left after 2 s: $left"
else
  fail "job did not start: $(cat "$err")"; kill -9 $mpx 2>/dev/null
fi

# 4. strangers on the TCP ports
: >"$out"; : >"$err"
go=$(mktemp -u)
BATON_TRANSPORTS=tcp "$prefix/bin/mpiexec" -n 3 "$build/tcp_guard" "$go" >"$out" 2>"$err" &
mpx=$!
if ! command -v ss >/dev/null; then
  echo "SKIP strangers on TCP ports: ss (iproute2) is not installed"
  touch "$go"; wait $mpx
elif wait_ready "$out" 3; then
  pids=$(awk '$1=="ready" {print $3}' "$out")
  ports=""
  for p in $pids; do
    ports="$ports $(ss -Hltnp 2>/dev/null | grep "pid=$p," | awk '{print $4}' | sed 's/.*://')"
  done
  knocks=0
  for port in $ports; do
    # Garbage, then a well-formed challenge whose proof is wrong, then one that never speaks.
    exec 3<>"/dev/tcp/127.0.0.1/$port" && { head -c 300 /dev/urandom >&3; exec 3>&-; knocks=$((knocks + 1)); }
    exec 3<>"/dev/tcp/127.0.0.1/$port" && { printf 'BATONTC1%032d' 0 >&3; head -c 64 <&3 >/dev/null; head -c 32 /dev/zero >&3; exec 3>&-; }
    exec 4<>"/dev/tcp/127.0.0.1/$port"
  done
  [ "$knocks" -ge 3 ] || fail "found only $knocks TCP ports of the ranks: '$ports'"
  t0=$(date +%s%N)
  touch "$go"
  wait $mpx; rc=$?
  elapsed_ms=$(( ($(date +%s%N) - t0) / 1000000 ))
  exec 4>&-
  [ "$rc" = 0 ] || fail "the job failed after strangers knocked (exit $rc): $(cat "$err")"
  [ "$(grep -c '^done' "$out")" = 3 ] || fail "not every rank finished: $(cat "$out")"
  [ "$elapsed_ms" -lt 3000 ] || fail "a silent stranger stalled the job (${elapsed_ms} ms)"
  grep -q "rejected a connection from 127.0.0.1" "$err" || fail "refusals were not logged: $(cat "$err")"
  echo "strangers on $knocks TCP ports: job exit $rc, $(grep -c 'rejected a connection' "$err") refusals logged, finished ${elapsed_ms} ms after the go"
else
  fail "tcp job did not start: $(cat "$err")"; touch "$go"; kill -9 $mpx 2>/dev/null
fi
rm -f "$go"

[ "$(ls /dev/shm | sort)" = "$shm_before" ] || fail "/dev/shm changed: $(ls /dev/shm)"
rm -f "$out" "$err"
[ $fails = 0 ] && echo "PASS fault tests"
exit $fails
