#!/bin/bash
# Dynamic processes across separately started jobs: two `mpiexec -n 2` runs at the same time,
# a server job (server.c: opens a port, accepts, exchanges, disconnects, 3 rounds) and a client
# job (client.c: connects, exchanges, disconnects), the port found
#  1. through the name service (MPI_Publish_name / MPI_Lookup_name), the client started first so
#     that it has to retry its lookup while the server starts; BATON_NAME_DIR is a fresh
#     directory for the whole script;
#  2. in a file the server writes (no name service);
#  3. then the name is gone: a lookup in a new job gives MPI_ERR_NAME, and so does one under
#     another BATON_NAME_DIR while a server has it published (names live in that directory;
#     Baton's mpiexec only).
# Every job must exit 0 and print its PASS line; no process of the jobs may be left. Each job
# runs under `timeout` and in its own session, and every session started here is killed on exit.
# Environment: MPICC, MPIEXEC (default: this checkout's install/bin), MPIEXEC_FLAGS (extra
# launcher flags), BUILD_DIR (default build/dpm), CFLAGS, JOB_TIMEOUT (seconds, default 60).
# Open MPI 4.1.4 needs a running ompi-server for anything across two mpiruns:
#   ompi-server --no-daemonize -r /tmp/uri &
#   MPICC=mpicc.openmpi MPIEXEC=mpiexec.openmpi \
#     MPIEXEC_FLAGS="--oversubscribe --ompi-server file:/tmp/uri" tests/dpm/run.sh
set -u
root=$(cd "$(dirname "$0")/../.." && pwd)
mpicc=${MPICC:-$root/install/bin/mpicc}
mpiexec=${MPIEXEC:-$root/install/bin/mpiexec}
read -r -a flags <<<"${MPIEXEC_FLAGS:-}"
read -r -a cflags <<<"${CFLAGS:-}"
build=${BUILD_DIR:-$root/build/dpm}
job_timeout=${JOB_TIMEOUT:-60}
mkdir -p "$build"
tmp=$(mktemp -d)
export BATON_NAME_DIR="$tmp/names"
mkdir -p "$BATON_NAME_DIR"

sessions=()
cleanup() {
  for s in "${sessions[@]}"; do
    kill -KILL -- "-$s" 2>/dev/null
  done
  rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

for prog in server client; do
  # ${arr[@]+...}: an empty array under set -u
  "$mpicc" -std=c11 -Wall -Wextra -Werror -O2 -g -I "$root/tests/c" ${cflags[@]+"${cflags[@]}"} \
    -o "$build/dpm_$prog" "$root/tests/dpm/$prog.c" || exit 1
done

fails=0
fail() {
  echo "FAIL: $*"
  fails=$((fails + 1))
}

# start LOG ARGS...: a job in its own session (its pid is the session's id); sets $job.
# $job_env, when set, is one NAME=VALUE for the job's environment.
job_env=
start() {
  local log=$1
  shift
  setsid env ${job_env:+"$job_env"} timeout "$job_timeout" "$mpiexec" ${flags[@]+"${flags[@]}"} -n 2 "$@" \
    >"$log" 2>&1 </dev/null &
  job=$!
  sessions+=("$job")
}

# finish PID LOG NAME: the job must exit 0 with its PASS line and leave nothing behind.
finish() {
  local pid=$1 log=$2 name=$3 rc
  wait "$pid"
  rc=$?
  if [ "$rc" != 0 ] || ! grep -q "^PASS $name" "$log"; then
    fail "$name: exit status $rc$([ "$rc" = 124 ] && echo " (timeout after ${job_timeout}s)")"
    sed 's/^/    | /' "$log" | tail -30
  fi
  for _ in $(seq 50); do
    pgrep -s "$pid" >/dev/null || return 0
    sleep 0.1
  done
  fail "$name: processes of the job still run 5 s after it ended: $(pgrep -s "$pid" | tr '\n' ' ')"
  kill -KILL -- "-$pid" 2>/dev/null
}

service="dpm-run-$$-$RANDOM"

echo "--- 1. name service, client started first"
start "$tmp/client1.log" "$build/dpm_client" name "$service" 3 2
client=$job
sleep 1
start "$tmp/server1.log" "$build/dpm_server" name "$service" 3 2
server=$job
finish "$client" "$tmp/client1.log" dpm_client
finish "$server" "$tmp/server1.log" dpm_server

echo "--- 2. port in a file"
portfile="$tmp/port"
start "$tmp/server2.log" "$build/dpm_server" file "$portfile" 3 2
server=$job
start "$tmp/client2.log" "$build/dpm_client" file "$portfile" 3 2
client=$job
finish "$client" "$tmp/client2.log" dpm_client
finish "$server" "$tmp/server2.log" dpm_server

echo "--- 3. unpublished name, and names under another BATON_NAME_DIR"
start "$tmp/absent1.log" "$build/dpm_client" absent "$service" 0 2
finish "$job" "$tmp/absent1.log" dpm_client
# A server publishes a new name in BATON_NAME_DIR; a lookup under another directory must not see
# it. BATON_NAME_DIR means nothing to another MPI's launcher.
if "$mpiexec" --version 2>/dev/null | grep -q Baton; then
  service2="$service-2"
  start "$tmp/server3.log" "$build/dpm_server" name "$service2" 1 2
  server=$job
  other="$tmp/other-names"
  mkdir -p "$other"
  job_env="BATON_NAME_DIR=$other"
  start "$tmp/absent2.log" "$build/dpm_client" absent "$service2" 0 2
  job_env=
  finish "$job" "$tmp/absent2.log" dpm_client
  # then connect for real, so the server ends
  start "$tmp/client3.log" "$build/dpm_client" name "$service2" 1 2
  client=$job
  finish "$client" "$tmp/client3.log" dpm_client
  finish "$server" "$tmp/server3.log" dpm_server
else
  echo "(not Baton's mpiexec: the BATON_NAME_DIR check is skipped)"
fi

if [ "$fails" = 0 ]; then
  echo "PASS tests/dpm/run.sh"
else
  echo "tests/dpm/run.sh: $fails failure(s)"
fi
[ "$fails" = 0 ]
