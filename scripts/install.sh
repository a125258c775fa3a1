#!/bin/sh
# Installs a built Baton into PREFIX: include/mpi.h, lib/libmpi_abi.so.1 (+ libmpi_abi.so and
# libmpi.so links), bin/{mpicc,mpicxx,mpiexec,mpirun}, lib/pkgconfig/{mpi,baton}.pc.
# Usage: scripts/install.sh TARGET_DIR PREFIX
set -eu
target=$1
prefix=$2
root=$(cd "$(dirname "$0")/.." && pwd)
mkdir -p "$prefix/include" "$prefix/lib/pkgconfig" "$prefix/bin"
prefix=$(cd "$prefix" && pwd)
"$target/baton-gen-header" "$prefix/include/mpi.h"
install -m 0755 "$target/libmpi_abi.so" "$prefix/lib/libmpi_abi.so.1"
ln -sf libmpi_abi.so.1 "$prefix/lib/libmpi_abi.so"
ln -sf libmpi_abi.so.1 "$prefix/lib/libmpi.so"
install -m 0755 "$target/mpiexec" "$prefix/bin/mpiexec"
ln -sf mpiexec "$prefix/bin/mpirun"
version=$(sed -n 's/^version = "\(.*\)"/\1/p' "$root/Cargo.toml" | head -1)
for name in mpicc mpicxx; do
  sed "s/@BATON_VERSION@/$version/" "$root/scripts/mpicc.in" > "$prefix/bin/$name.tmp"
  chmod 0755 "$prefix/bin/$name.tmp"
  mv "$prefix/bin/$name.tmp" "$prefix/bin/$name"
done
for name in mpi baton; do
  cat > "$prefix/lib/pkgconfig/$name.pc" <<PC
prefix=$prefix
libdir=\${prefix}/lib
includedir=\${prefix}/include

Name: $name
Description: Baton, an MPI implementation (MPI 5.0 standard ABI)
Version: $version
Cflags: -I\${includedir}
Libs: -L\${libdir} -Wl,-rpath,\${libdir} -lmpi_abi
PC
done
echo "installed Baton into $prefix"
