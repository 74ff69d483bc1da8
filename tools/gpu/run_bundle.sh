#!/usr/bin/env bash
# On the GPU machine: runs every GPU test binary (*_gpu_test) and benchmark
# (oasr-bench-*) of a bundle from make_bundle.sh; logs go to $OUT.
#   tools/gpu/run_bundle.sh BUNDLE_DIR
set -uo pipefail
bundle=$1
out=${OUT:-/tmp/oasr-gpu-out}; mkdir -p "$out"
export LD_LIBRARY_PATH="$bundle/lib:${LD_LIBRARY_PATH:-}"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | tee "$out/gpu.txt"
rc=0
for t in "$bundle"/bin/*_gpu_test; do
  [ -e "$t" ] || continue
  echo "== $(basename "$t")"
  "$t" --gtest_color=no > "$out/$(basename "$t").log" 2>&1 || rc=1
  grep -E "^\[  (PASSED|FAILED|SKIPPED) |tests? ran" "$out/$(basename "$t").log"
done
for b in "$bundle"/bin/oasr-bench-*; do
  [ -e "$b" ] || continue
  echo "== $(basename "$b")"
  "$b" 2>&1 | tee "$out/$(basename "$b").log" | tail -20
done
exit $rc
