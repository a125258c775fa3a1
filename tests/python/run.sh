#!/bin/sh
# Builds mpi4py from source against Baton (once, into build/mpi4py-venv), checks that it really
# links Baton's libmpi_abi (not another MPI found on the system), and runs the smoke test under
# mpiexec with 2 and 4 ranks. `run.sh PREFIX build-only` stops after the build (suite.sh uses it).
set -eu
prefix=$1
mode=${2:-smoke}
root=$(cd "$(dirname "$0")/../.." && pwd)
venv=$root/build/mpi4py-venv
version=4.1.2
links_baton() {
  ldd "$venv"/lib/python3*/site-packages/mpi4py/MPI*.so 2>/dev/null | grep -q "$prefix/lib/libmpi_abi"
}
if ! "$venv/bin/python" -c "import mpi4py; assert mpi4py.__version__ == '$version'" 2>/dev/null || ! links_baton; then
  rm -rf "$venv"
  python3 -m venv "$venv"
  # Built from a scratch directory with MPICC only (mpi4py's build may pick up other settings).
  (cd "$(mktemp -d)" && MPICC="$prefix/bin/mpicc" "$venv/bin/pip" install -q --no-cache-dir --no-binary mpi4py "mpi4py==$version")
  links_baton || { echo "FAIL: mpi4py did not link $prefix/lib/libmpi_abi.so.1:"; ldd "$venv"/lib/python3*/site-packages/mpi4py/MPI*.so; exit 1; }
fi
[ "$mode" = build-only ] && exit 0
for n in 2 4; do
  timeout 120 "$prefix/bin/mpiexec" -n $n "$venv/bin/python" "$root/tests/python/mpi4py_smoke.py"
done
