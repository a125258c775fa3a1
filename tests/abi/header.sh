#!/bin/sh
# mpi.h must compile as C11 and C++17 with every warning an error, and the library must export
# all 664 MPI_ and 664 PMPI_ functions of the standard ABI.
set -eu
prefix=$1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
printf '#include <mpi.h>\nint main(void) { MPI_Comm c = MPI_COMM_WORLD; (void)c; return MPI_SUCCESS; }\n' > "$tmp/h.c"
cc -std=c11 -Wall -Wextra -Werror -pedantic -I"$prefix/include" -c "$tmp/h.c" -o "$tmp/h.o"
c++ -x c++ -std=c++17 -Wall -Wextra -Werror -pedantic -I"$prefix/include" -c "$tmp/h.c" -o "$tmp/hpp.o"
want=$(grep -v '^#' "$(dirname "$0")/../../abi/functions.tsv" | grep -c .)
got_mpi=$(nm -D --defined-only "$prefix/lib/libmpi_abi.so.1" | grep -c ' T MPI_')
got_pmpi=$(nm -D --defined-only "$prefix/lib/libmpi_abi.so.1" | grep -c ' T PMPI_')
if [ "$got_mpi" != "$want" ] || [ "$got_pmpi" != "$want" ]; then
  echo "FAIL: exported $got_mpi MPI_ and $got_pmpi PMPI_ functions, want $want each"
  exit 1
fi
echo "PASS header: C11 and C++17 clean; $got_mpi MPI_ + $got_pmpi PMPI_ symbols"
