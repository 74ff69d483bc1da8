#!/usr/bin/env bash
# Session 42, call 3: after call 1, the harness' linear cases again (a
# cuBLASLt swish case's bound widened: its product is rounded before swish)
# and oasr-bench-gemm with its checks waiting for the device between copies
# and ops (call 1's "rel diff" column raced). Logs back as $OUT/call3.tgz.
#   bash tools/gpu/pack.sh .devrun/new build-gpu/tests/kernels/kernels_backend_ops_gpu_test build-gpu/bench/oasr-bench-gemm
#   OUT=$OUT bash bench/results/gpu/session42/call3.sh
set -u
O=/tmp/c3; mkdir -p /tmp/nb $O
trap 'tar -czf $OUT/call3.tgz -C $O .' EXIT
tar -xJf .devrun/new/bundle.tar.xz -C /tmp/nb
B=/tmp/nb/bundle; export LD_LIBRARY_PATH=$B/lib
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | tee $O/gpu.txt
timeout 120 $B/bin/kernels_backend_ops_gpu_test --gtest_color=no --gtest_filter='*linear*' > $O/linear_cases.log 2>&1
echo "rc $?"; grep -E "^\[  (PASSED|FAILED) |^\[  FAILED  \]|error .* > bound" $O/linear_cases.log | head -12
timeout 150 $B/bin/oasr-bench-gemm --rows 8192,32768,131072 --reps 30 > $O/gemm.txt 2>&1
echo "rc $?"; cat $O/gemm.txt
