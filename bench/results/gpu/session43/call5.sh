#!/usr/bin/env bash
# Session 43, call 5 (not run: no device time was left): the engine tests
# on the GPU with kAuto = kNorms (the
# new default), graphed and eager, and the harness' linear cases again.
# Logs back in $OUT.
#   bash tools/gpu/pack.sh .devrun/new build-gpu/tests/scheduler/scheduler_engine_graphs_gpu_test \
#     build-gpu/tests/scheduler/scheduler_engine_gpu_test build-gpu/tests/kernels/kernels_backend_ops_gpu_test
#   BUDGET=400 OUT=$OUT bash bench/results/gpu/session43/call5.sh
set -u
deadline=$(( $(date +%s) + ${BUDGET:-400} ))
left() { echo $(( deadline - $(date +%s) )); }
rm -rf /tmp/nb; mkdir -p /tmp/nb; tar -xJf .devrun/new/bundle.tar.xz -C /tmp/nb
B=/tmp/nb/bundle; export LD_LIBRARY_PATH=$B/lib
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | tee $OUT/gpu.txt
for t in scheduler_engine_graphs scheduler_engine; do
  r=$(left); [ $r -lt 40 ] && { echo "no time for $t"; continue; }
  echo "== ${t}_gpu_test ($r s left)"
  timeout $(( r - 30 )) $B/bin/${t}_gpu_test --gtest_color=no > $OUT/${t}_gpu_test.log 2>&1; echo "rc $?"
  grep -E "^\[  (PASSED|FAILED|SKIPPED) |tests? ran|^\[  FAILED  \]" $OUT/${t}_gpu_test.log | tail -6
done
r=$(left); [ $r -gt 40 ] && { timeout $(( r - 10 )) $B/bin/kernels_backend_ops_gpu_test --gtest_color=no --gtest_filter='*linear*' > $OUT/linear.log 2>&1; echo "linear rc $?"; grep -E "^\[  (PASSED|FAILED)" $OUT/linear.log; }
