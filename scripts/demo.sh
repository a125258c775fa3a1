#!/bin/sh
# README's first command (`make demo`): compile an example with Baton's mpicc, run it on 4 ranks
# with Baton's mpiexec, then a short ping-pong benchmark.
set -eu
prefix=$1
root=$(cd "$(dirname "$0")/.." && pwd)
mkdir -p "$root/build"
echo "+ $prefix/bin/mpicc -o build/hello examples/hello.c"
"$prefix/bin/mpicc" -o "$root/build/hello" "$root/examples/hello.c"
echo "+ $prefix/bin/mpiexec -n 4 build/hello"
"$prefix/bin/mpiexec" -n 4 "$root/build/hello"
echo "+ ping-pong latency and bandwidth between 2 ranks (bench/src/pingpong.c)"
if [ -f "$root/bench/src/pingpong.c" ]; then
  "$prefix/bin/mpicc" -O2 -o "$root/build/pingpong" "$root/bench/src/pingpong.c" ${BENCH_CFLAGS:-} -lm
  "$prefix/bin/mpiexec" -n 2 "$root/build/pingpong" ${DEMO_BENCH_ARGS:---quick}
fi
