#!/bin/sh
# abi/ is a copy of ../shared/mpi-abi/ (the source of truth when present): they must agree.
set -eu
root=$(cd "$(dirname "$0")/.." && pwd)
shared=$root/../shared/mpi-abi
if [ ! -d "$shared" ]; then
  echo "SKIP abi-data-sync: $shared not present"
  exit 0
fi
for f in constants.tsv functions.tsv types.tsv; do
  cmp -s "$root/abi/$f" "$shared/$f" || { echo "FAIL: abi/$f differs from $shared/$f"; exit 1; }
done
echo "PASS abi-data-sync"
