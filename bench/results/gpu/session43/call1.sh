#!/usr/bin/env bash
# Session 43, call 1: the norms policy (--gemm norms: the wgmma kernel only
# for the residual products that take the next layer norm, from a wave of
# its tiles up; cuBLASLt and the norm passes below and for the rest). The
# harness' linear cases (the new kNorms ones on both sides of the wave),
# oasr-bench-gemm's residual+norm rows around the wave (where the fusion
# starts to pay), the encoder parity (kNorms against cuBLASLt), then the
# chunk step with --gemm cublas / norms alternating. Logs in /tmp/c1, back
# as $OUT/call1.tgz; the summary is stdout.
#   bash tools/gpu/pack.sh .devrun/new (the binaries below, from a CUDA build)   (here)
#   BUDGET=570 OUT=$OUT bash bench/results/gpu/session43/call1.sh                (device call carrying .devrun)
set -u
deadline=$(( $(date +%s) + ${BUDGET:-570} ))
left() { echo $(( deadline - $(date +%s) )); }
O=/tmp/c1; mkdir -p /tmp/nb $O
trap 'tar -czf $OUT/call1.tgz -C $O .' EXIT
tar -xJf .devrun/new/bundle.tar.xz -C /tmp/nb
B=/tmp/nb/bundle; export LD_LIBRARY_PATH=$B/lib; M=models/en-conformer-ctc
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm --format=csv,noheader | tee $O/gpu.txt
step() { echo "== $* ($(date +%T), $(left) s left)"; }
step "kernel harness: linear cases"
timeout 120 $B/bin/kernels_backend_ops_gpu_test --gtest_color=no --gtest_filter='*linear*' > $O/linear_cases.log 2>&1
echo "rc $?"; grep -E "^\[  (PASSED|FAILED) |^\[  FAILED  \]|error .* > bound" $O/linear_cases.log | head -12
step "oasr-bench-gemm"
timeout 100 $B/bin/oasr-bench-gemm --rows 4096,8192,16384,32768 --reps 20 > $O/gemm.txt 2>&1
echo "rc $?"; sed -n '/product + norm/,$p' $O/gemm.txt
fx=$(strings $B/bin/encoder_parity_gpu_test | grep -m1 -E '/tests/encoder/golden$')
mkdir -p "$fx"; python3 -B -m tools.reference.make_fixtures --out "$fx" > $O/fixtures.log 2>&1 || echo "fixtures failed"
step "encoder parity"
timeout 90 $B/bin/encoder_parity_gpu_test --gtest_color=no --gtest_filter='*Norms*:*Fused*' > $O/encoder_parity_gpu_test.log 2>&1; echo "rc $?"
grep -E "^\[  (PASSED|FAILED) |^\[  FAILED  \]" $O/encoder_parity_gpu_test.log | tail -6
grep -E "norms vs" $O/encoder_parity_gpu_test.log | sort -t: -k2 | tail -3
for g in cublas norms cublas norms; do
  r=$(left); [ $r -lt 50 ] && { echo "no time for step $g"; continue; }
  step "oasr-bench-step, products $g"
  timeout $(( r < 110 ? r - 10 : 100 )) $B/bin/oasr-bench-step --model-dir $M --device cuda --dtype bfloat16 --gemm $g \
    --batches 64,512,1024,2048,4096,8192 --modes graph --reps 10 >> $O/step_$g.txt 2>&1
  grep -E "graph" $O/step_$g.txt | tail -6
done
step end
