#!/usr/bin/env bash
# Session 47, call 1: the stem as an implicit GEMM (kernels::StemKernel::
# kImplicitGemm: stage 1 written once as the NHWC activation, stage 2 on the
# wgmma kernel with its patch tiles gathered by the copy engine's im2col
# mode). Its harness cases and encoder parity, oasr-bench-stem for the three
# fused stems, the chunk step with the tensor cores' stem and the implicit
# one, and the step with the staged norm out off and on (session 46's
# switch, timed alone). Logs in /tmp/c1, back as $OUT/call1.tgz; the summary
# is stdout.
#   bash tools/gpu/pack.sh .devrun/s47 build-gpu/tests/kernels/kernels_backend_ops_gpu_test \
#     build-gpu/tests/encoder/encoder_parity_gpu_test build-gpu/bench/oasr-bench-stem \
#     build-gpu/bench/oasr-bench-step                            (here, OASR_WITH_OPENBLAS=OFF)
#   BUDGET=520 OUT=$OUT bash bench/results/gpu/session47/call1.sh
set -u
deadline=$(( $(date +%s) + ${BUDGET:-520} ))
left() { echo $(( deadline - $(date +%s) )); }
O=/tmp/c1; mkdir -p /tmp/nb $O
trap 'tar -czf $OUT/call1.tgz -C $O .' EXIT
[ -d /tmp/nb/bundle ] || tar -xJf .devrun/s47/bundle.tar.xz -C /tmp/nb
B=/tmp/nb/bundle; export LD_LIBRARY_PATH=$B/lib; M=models/en-conformer-ctc
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm --format=csv,noheader | tee $O/gpu.txt
step() { echo "== $* ($(date +%T), $(left) s left)"; }
fx=$(strings $B/bin/encoder_parity_gpu_test | grep -m1 -E '/tests/encoder/golden$')
mkdir -p "$fx"; python3 -B -m tools.reference.make_fixtures --out "$fx" > $O/fixtures.log 2>&1 &
fixtures=$!
step "kernel harness: the fused stem cases 40-47 (implicit GEMM 40-46)"
timeout 100 $B/bin/kernels_backend_ops_gpu_test --gtest_color=no \
  --gtest_filter='*conv2d_stem_4?' > $O/harness_stem.log 2>&1
hrc=$?; echo "rc $hrc"; grep -E "^\[  (PASSED|FAILED) |^\[  FAILED  \]|^\[       OK|error|bound|not" $O/harness_stem.log | head -30
wait $fixtures || echo "fixtures failed"
# A hang (the copies never complete a stage) ends the implicit rows here.
hung=0; [ $hrc -eq 124 ] && { hung=1; echo "implicit GEMM hung: its other rows skipped"; }
[ $hung -eq 0 ] && step "encoder parity: implicit-gemm stem vs tensor cores, tensor cores vs recompute"
[ $hung -eq 0 ] && timeout 80 $B/bin/encoder_parity_gpu_test --gtest_color=no \
  --gtest_filter='*ImplicitGemm*:*TensorCoreStem*' > $O/parity.log 2>&1
echo "rc $?"; grep -E "^\[  (PASSED|FAILED) |^\[  FAILED  \]|max diff|diff" $O/parity.log | head -20
[ $hung -eq 0 ] && step "oasr-bench-stem"
[ $hung -eq 0 ] && timeout 60 $B/bin/oasr-bench-stem --batches 512,2048,8192 --reps 20 > $O/stem.txt 2>&1
echo "rc $?"; cat $O/stem.txt
for st in tensor-cores implicit-gemm tensor-cores implicit-gemm; do
  r=$(left); [ $r -lt 45 ] && { echo "no time for step $st"; continue; }
  [ $hung -eq 1 ] && [ $st = implicit-gemm ] && continue
  step "oasr-bench-step, stem $st"
  timeout 45 $B/bin/oasr-bench-step --model-dir $M --device cuda --dtype bfloat16 \
    --batches 2048,8192 --modes graph --reps 10 --stem $st >> $O/step_$st.txt 2>&1
  echo "rc $?"; grep -E "graph" $O/step_$st.txt | tail -2
done
for v in 0 1 0 1; do
  r=$(left); [ $r -lt 45 ] && { echo "no time for staged norm out $v"; continue; }
  step "oasr-bench-step, staged norm out $v"
  OASR_WGMMA_STAGED_NORM_OUT=$v timeout 45 $B/bin/oasr-bench-step --model-dir $M --device cuda \
    --dtype bfloat16 --batches 2048,8192 --modes graph --reps 10 >> $O/step_staged$v.txt 2>&1
  echo "rc $?"; grep -E "graph" $O/step_staged$v.txt | tail -2
done
step end
