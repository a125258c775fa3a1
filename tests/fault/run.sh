#!/bin/bash
# Fault tests with a real MPI job on shared memory:
#  1. a rank SIGKILLed from outside: mpiexec exits with 128+9 within 2 s, prints one line naming
#     rank, pid, host and signal, and leaves no process of the job behind;
#  2. mpiexec itself SIGKILLed: every rank is gone within 2 s;
#  both: nothing new in /dev/shm.
set -u
prefix=$1
build=${BUILD_DIR:-build/fault}
mkdir -p "$build"
"$prefix/bin/mpicc" -o "$build/blocker" "$(dirname "$0")/blocker.c" || exit 1
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

# 1. rank killed
out=$(mktemp); err=$(mktemp)
"$prefix/bin/mpiexec" -n 4 "$build/blocker" >"$out" 2>"$err" &
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
  echo "rank SIGKILL: exit $rc after ${elapsed_ms} ms; $(grep 'killed by signal' "$err")"
else
  fail "job did not start: $(cat "$err")"; kill -9 $mpx 2>/dev/null
fi

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

[ "$(ls /dev/shm | sort)" = "$shm_before" ] || fail "/dev/shm changed: $(ls /dev/shm)"
rm -f "$out" "$err"
[ $fails = 0 ] && echo "PASS fault tests"
exit $fails
