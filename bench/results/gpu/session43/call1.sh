#!/usr/bin/env bash
# Session 43, call 1: the norms policy (--gemm norms: the wgmma kernel only
# for the residual products that take the next layer norm, from a wave of
# its tiles up) and the float8 K/V pool (--kv-dtype float8_e4m3). The
# harness' linear and paged-attention cases (kNorms on both sides of the
# wave; the float8 pool against float64 with the same rounding), the
# bundled model over gRPC with the float8 pool, oasr-bench-gemm's
# residual+norm rows around the wave, the encoder parity (kNorms), then the
# chunk step: cublas / norms alternating, and the float8 pool. Logs in
# /tmp/c1, back as $OUT/call1.tgz; the summary is stdout.
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
step "kernel harness: linear and paged-attention cases"
timeout 150 $B/bin/kernels_backend_ops_gpu_test --gtest_color=no --gtest_filter='*linear*:*paged_attention*' > $O/harness.log 2>&1
echo "rc $?"; grep -E "^\[  (PASSED|FAILED) |^\[  FAILED  \]|error .* > bound" $O/harness.log | head -12
step "bundled model over gRPC, float8 K/V pool"
[ -x $B/bin/oasr-server ] && OASR_SERVER_BINARY=$B/bin/oasr-server OASR_MODEL_DIR=$PWD/$M OASR_SAMPLES_DIR=$PWD/samples \
  timeout 150 $B/bin/model_bundled_gpu_test --gtest_color=no --gtest_filter='*Float8*:*SamplesTranscribed*' > $O/model_bundled_gpu_test.log 2>&1; echo "rc $?"
grep -E "^\[ +(OK|PASSED|FAILED|SKIPPED) |WER|differ" $O/model_bundled_gpu_test.log | tail -10
step "oasr-bench-gemm"
timeout 80 $B/bin/oasr-bench-gemm --rows 4096,8192,16384,32768 --reps 20 > $O/gemm.txt 2>&1
echo "rc $?"; sed -n '/product + norm/,$p' $O/gemm.txt
fx=$(strings $B/bin/encoder_parity_gpu_test | grep -m1 -E '/tests/encoder/golden$')
mkdir -p "$fx"; python3 -B -m tools.reference.make_fixtures --out "$fx" > $O/fixtures.log 2>&1 || echo "fixtures failed"
step "encoder parity"
timeout 60 $B/bin/encoder_parity_gpu_test --gtest_color=no --gtest_filter='*Norms*' > $O/encoder_parity_gpu_test.log 2>&1; echo "rc $?"
grep -E "^\[  (PASSED|FAILED) |^\[  FAILED  \]" $O/encoder_parity_gpu_test.log | tail -6
grep -E "norms vs" $O/encoder_parity_gpu_test.log | sort -t: -k2 | tail -3
for g in "cublas auto" "norms auto" "cublas fp8" "cublas auto" "norms auto" "cublas fp8"; do
  set -- $g
  r=$(left); [ $r -lt 50 ] && { echo "no time for step $g"; continue; }
  step "oasr-bench-step, products $1, K/V $2"
  timeout $(( r < 80 ? r - 10 : 70 )) $B/bin/oasr-bench-step --model-dir $M --device cuda --dtype bfloat16 --gemm $1 \
    --kv-dtype $2 --batches 64,512,1024,2048,8192 --modes graph --reps 10 >> $O/step_$1_$2.txt 2>&1
  grep -E "graph" $O/step_$1_$2.txt | tail -5
done
step end
