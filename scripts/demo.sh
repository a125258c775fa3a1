#!/bin/sh
# README's first command (`make demo`): compile an example with Baton's mpicc, run it on 4 ranks
# with Baton's mpiexec, then a short ping-pong benchmark from the suite on 2 ranks.
set -eu
prefix=$1
root=$(cd "$(dirname "$0")/.." && pwd)
mkdir -p "$root/build/demo"
echo "+ mpicc -o build/demo/hello examples/hello.c"
"$prefix/bin/mpicc" -o "$root/build/demo/hello" "$root/examples/hello.c"
echo "+ mpiexec -n 4 build/demo/hello"
"$prefix/bin/mpiexec" -n 4 "$root/build/demo/hello"
echo "+ mpiexec -n 2 mpibench pingpong (one-way latency and bandwidth, median of repeated runs)"
"$prefix/bin/mpicc" -O2 -o "$root/build/demo/mpibench" "$root"/bench/src/*.c -lm
"$prefix/bin/mpiexec" -n 2 "$root/build/demo/mpibench" pingpong --sizes 8,1024,65536,1048576,4194304 |
  python3 -c '
import json, sys
print("%10s %12s %12s" % ("bytes", "median us", "MB/s"))
for line in sys.stdin:
    if line.startswith("{"):
        r = json.loads(line)
        print("%10d %12.3f %12.0f" % (r["size"], r["median_us"], r["size"] / r["median_us"] if r["median_us"] else 0))
'
echo "For Baton beside MPICH and Open MPI: bench/run --quick (see docs/PERFORMANCE.md)"
