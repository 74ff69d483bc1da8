#!/usr/bin/env bash
# Session 42, call 1: the wgmma GEMM (kernels/wgmma_gemm.cu). Its kernel-
# harness cases first (every linear case, float64 reference), then the
# products side by side with cuBLASLt (oasr-bench-gemm), the encoder parity
# (wgmma against cuBLASLt products), the chunk step with --gemm cublas / fused
# / wgmma alternating, ncu per-kernel times of one step at B = 2048 (fused),
# and the engine tests on the new default with the time left. Logs in
# /tmp/c1, back as $OUT/call1.tgz; the summary is stdout.
#   bash tools/gpu/pack.sh .devrun/new (the binaries below, from a CUDA build)   (here)
#   BUDGET=570 OUT=$OUT bash bench/results/gpu/session42/call1.sh                (device call carrying .devrun)
set -u
deadline=$(( $(date +%s) + ${BUDGET:-570} ))
left() { echo $(( deadline - $(date +%s) )); }
O=/tmp/c1; mkdir -p /tmp/nb $O
trap 'tar -czf $OUT/call1.tgz -C $O .' EXIT
tar -xJf .devrun/new/bundle.tar.xz -C /tmp/nb
B=/tmp/nb/bundle; export LD_LIBRARY_PATH=$B/lib; M=models/en-conformer-ctc
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm --format=csv,noheader | tee $O/gpu.txt
mem=$(nvidia-smi --query-gpu=memory.total --format=csv,noheader,nounits | head -1)
step() { echo "== $* ($(date +%T), $(left) s left)"; }
step "SASS of the wgmma kernel (cuobjdump)"
if command -v cuobjdump > /dev/null; then
  cuobjdump -sass $B/lib/liboasr_kernels.so > $O/kernels.sass 2>&1
  echo "HGMMA $(grep -c HGMMA $O/kernels.sass), UTMALDG $(grep -c UTMALDG $O/kernels.sass), LDL/STL $(grep -cE 'LDL|STL' $O/kernels.sass)"
  gzip -9 $O/kernels.sass
fi
step "kernel harness: linear cases"
timeout 90 $B/bin/kernels_backend_ops_gpu_test --gtest_color=no --gtest_filter='*linear*' > $O/linear_cases.log 2>&1
echo "rc $?"; grep -E "^\[  (PASSED|FAILED) |^\[  FAILED  \]|error .* > bound" $O/linear_cases.log | head -12
step "oasr-bench-gemm"
timeout 120 $B/bin/oasr-bench-gemm --rows 1024,8192,32768,131072 --reps 30 > $O/gemm.txt 2>&1
echo "rc $?"; cat $O/gemm.txt
fx=$(strings $B/bin/encoder_parity_gpu_test | grep -m1 -E '/tests/encoder/golden$')
mkdir -p "$fx"; python3 -B -m tools.reference.make_fixtures --out "$fx" > $O/fixtures.log 2>&1 || echo "fixtures failed"
step "encoder parity"
timeout 90 $B/bin/encoder_parity_gpu_test --gtest_color=no > $O/encoder_parity_gpu_test.log 2>&1; echo "rc $?"
grep -E "^\[  (PASSED|FAILED) |^\[  FAILED  \]" $O/encoder_parity_gpu_test.log | tail -6
grep -E "wgmma vs" $O/encoder_parity_gpu_test.log | sort -t: -k2 | tail -4
for g in cublas fused wgmma cublas fused wgmma; do
  step "oasr-bench-step, products $g"
  timeout 90 $B/bin/oasr-bench-step --model-dir $M --device cuda --dtype bfloat16 --gemm $g \
    --batches 64,512,2048,8192 --modes graph --reps 10 >> $O/step_$g.txt 2>&1
  grep -E "graph" $O/step_$g.txt | tail -4
done
step "ncu per-kernel times of one step at B = 2048 (fused)"
timeout 90 ncu --clock-control none --nvtx --nvtx-include "timed/" --metrics gpu__time_duration.sum --csv \
  $B/bin/oasr-bench-step --model-dir $M --device cuda --dtype bfloat16 --batches 2048 --reps 1 --modes eager --gemm fused \
  > $O/ncu_step_fused.csv 2> $O/ncu_step_fused.err
python3 tools/gpu/ncu_summary.py $O/ncu_step_fused.csv | tee $O/profile_2048_fused.txt | head -16
for t in scheduler_engine_graphs kernels_backend_ops scheduler_engine; do
  r=$(left); [ $r -lt 40 ] && { echo "no time for $t"; continue; }
  step "${t}_gpu_test"
  timeout $(( r - 15 )) $B/bin/${t}_gpu_test --gtest_color=no > $O/${t}_gpu_test.log 2>&1; echo "rc $?"
  grep -E "^\[  (PASSED|FAILED|SKIPPED) |tests? ran|^\[  FAILED  \]" $O/${t}_gpu_test.log | tail -8
  grep -E -A3 "Failure|Check failed" $O/${t}_gpu_test.log | head -12
done
step end
