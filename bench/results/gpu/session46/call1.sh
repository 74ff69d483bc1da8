#!/usr/bin/env bash
# Session 46, call 1: the wgmma tiles' += epilogue with y's old rows
# prefetched into L2 before the products (OASR_WGMMA_L2_PREFETCH), and the
# float32 residual products' 16-bit out through the staging rows and bulk
# copies (OASR_WGMMA_STAGED_NORM_OUT); both on by default in this build.
# The harness' linear cases on both kernels, encoder parity of the wgmma
# policies, oasr-bench-gemm and the chunk step with each switch off and on.
# Logs in /tmp/c1, back as $OUT/call1.tgz; the summary is stdout.
#   bash tools/gpu/pack.sh .devrun/s46 build-gpu/tests/kernels/kernels_backend_ops_gpu_test \
#     build-gpu/bench/oasr-bench-gemm build-gpu/tests/encoder/encoder_parity_gpu_test \
#     build-gpu/bench/oasr-bench-step                                          (here)
#   BUDGET=300 OUT=$OUT bash bench/results/gpu/session46/call1.sh
set -u
deadline=$(( $(date +%s) + ${BUDGET:-300} ))
left() { echo $(( deadline - $(date +%s) )); }
O=/tmp/c1; mkdir -p /tmp/nb $O
trap 'tar -czf $OUT/call1.tgz -C $O .' EXIT
[ -d /tmp/nb/bundle ] || tar -xJf .devrun/s46/bundle.tar.xz -C /tmp/nb
B=/tmp/nb/bundle; export LD_LIBRARY_PATH=$B/lib; M=models/en-conformer-ctc
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm --format=csv,noheader | tee $O/gpu.txt
step() { echo "== $* ($(date +%T), $(left) s left)"; }
fx=$(strings $B/bin/encoder_parity_gpu_test | grep -m1 -E '/tests/encoder/golden$')
mkdir -p "$fx"; python3 -B -m tools.reference.make_fixtures --out "$fx" > $O/fixtures.log 2>&1 &
fixtures=$!
for st in 1 0; do
  step "kernel harness: linear cases, OASR_WGMMA_STATIONARY=$st"
  OASR_WGMMA_STATIONARY=$st timeout 60 $B/bin/kernels_backend_ops_gpu_test --gtest_color=no --gtest_filter='*linear*' > $O/harness_$st.log 2>&1
  echo "rc $?"; grep -E "^\[  (PASSED|FAILED) |^\[  FAILED  \]|error .* > bound" $O/harness_$st.log | head -12
done
wait $fixtures || echo "fixtures failed"
step "encoder parity: the wgmma policies"
timeout 60 $B/bin/encoder_parity_gpu_test --gtest_color=no \
  --gtest_filter='*Fused*:*Wgmma*:*Norms*:*Epilogues*' > $O/parity.log 2>&1
echo "rc $?"; grep -E "^\[  (PASSED|FAILED) |^\[  FAILED  \]" $O/parity.log | head -12
for v in "1 1" "0 1" "1 0" "0 0"; do
  set -- $v
  r=$(left); [ $r -lt 40 ] && { echo "no time for gemm $v"; continue; }
  step "oasr-bench-gemm, L2 prefetch $1, staged norm out $2"
  OASR_WGMMA_L2_PREFETCH=$1 OASR_WGMMA_STAGED_NORM_OUT=$2 timeout 30 $B/bin/oasr-bench-gemm \
    --rows 32768 --reps 20 > $O/gemm_$1$2.txt 2>&1
  echo "rc $?"; grep -E "\+=" $O/gemm_$1$2.txt | head -8
done
for v in "1 1" "0 0" "1 1" "0 0"; do
  set -- $v
  r=$(left); [ $r -lt 30 ] && { echo "no time for step $v"; continue; }
  step "oasr-bench-step, L2 prefetch $1, staged norm out $2"
  OASR_WGMMA_L2_PREFETCH=$1 OASR_WGMMA_STAGED_NORM_OUT=$2 timeout 40 $B/bin/oasr-bench-step \
    --model-dir $M --device cuda --dtype bfloat16 --batches 2048,8192 --modes graph --reps 10 \
    >> $O/step_$1$2.txt 2>&1
  grep -E "graph" $O/step_$1$2.txt | tail -2
done
step end
