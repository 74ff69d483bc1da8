#!/usr/bin/env bash
# Session 45, call 1: the wgmma kernels' epilogue through shared memory
# (each warp's rows staged, then written, and for += read, 16 bytes a lane
# in whole rows). The harness' linear cases on both kernels, encoder parity
# of the wgmma policies, oasr-bench-gemm, the chunk step under each policy,
# then the engine with the fastest policy beside the default. Logs in
# /tmp/c1, back as $OUT/call1.tgz; the summary is stdout.
#   bash tools/gpu/pack.sh .devrun/s45 build-gpu/tests/kernels/kernels_backend_ops_gpu_test \
#     build-gpu/bench/oasr-bench-gemm build-gpu/tests/encoder/encoder_parity_gpu_test \
#     build-gpu/bench/oasr-bench-step build-gpu/bench/oasr-bench-gpu          (here)
#   BUDGET=570 OUT=$OUT bash bench/results/gpu/session45/call1.sh
set -u
deadline=$(( $(date +%s) + ${BUDGET:-570} ))
left() { echo $(( deadline - $(date +%s) )); }
O=/tmp/c1; mkdir -p /tmp/nb $O
trap 'tar -czf $OUT/call1.tgz -C $O .' EXIT
[ -d /tmp/nb/bundle ] || tar -xJf .devrun/s45/bundle.tar.xz -C /tmp/nb
B=/tmp/nb/bundle; export LD_LIBRARY_PATH=$B/lib; M=models/en-conformer-ctc
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm --format=csv,noheader | tee $O/gpu.txt
mem=$(nvidia-smi --query-gpu=memory.total --format=csv,noheader,nounits | head -1)
step() { echo "== $* ($(date +%T), $(left) s left)"; }
for st in 0 1; do
  step "kernel harness: linear cases, OASR_WGMMA_STATIONARY=$st"
  OASR_WGMMA_STATIONARY=$st timeout 100 $B/bin/kernels_backend_ops_gpu_test --gtest_color=no --gtest_filter='*linear*' > $O/harness_$st.log 2>&1
  echo "rc $?"; grep -E "^\[  (PASSED|FAILED) |^\[  FAILED  \]|error .* > bound" $O/harness_$st.log | head -12
done
fx=$(strings $B/bin/encoder_parity_gpu_test | grep -m1 -E '/tests/encoder/golden$')
mkdir -p "$fx"; python3 -B -m tools.reference.make_fixtures --out "$fx" > $O/fixtures.log 2>&1 || echo "fixtures failed"
for st in 0 1; do
  step "encoder parity: the wgmma policies, OASR_WGMMA_STATIONARY=$st"
  OASR_WGMMA_STATIONARY=$st timeout 90 $B/bin/encoder_parity_gpu_test --gtest_color=no \
    --gtest_filter='*Fused*:*Wgmma*:*Norms*:*Epilogues*' > $O/parity_$st.log 2>&1
  echo "rc $?"; grep -E "^\[  (PASSED|FAILED) |^\[  FAILED  \]" $O/parity_$st.log | head -12
done
step "oasr-bench-gemm"
timeout 90 $B/bin/oasr-bench-gemm --rows 32768,131072 --reps 20 > $O/gemm.txt 2>&1
echo "rc $?"; cat $O/gemm.txt
for g in "cublas" "norms --wgmma-k256 tiled" "epilogues --wgmma-k256 tiled" "norms --wgmma-k256 stationary" "epilogues --wgmma-k256 stationary" "wgmma --wgmma-k256 tiled"; do
  r=$(left); [ $r -lt 200 ] && { echo "no time for step $g"; continue; }
  f=$O/step_$(echo $g | sed 's/ --wgmma-k256 /_/').txt
  step "oasr-bench-step, products $g"
  timeout 60 $B/bin/oasr-bench-step --model-dir $M --device cuda --dtype bfloat16 --gemm $g \
    --batches 512,2048,8192 --modes graph --reps 10 > $f 2>&1
  grep -E "graph" $f | tail -3
done
best=$(for g in norms_tiled epilogues_tiled norms_stationary epilogues_stationary wgmma_tiled; do echo "$(grep -sE '^ +2048 +graph' $O/step_$g.txt | awk '{print $3}') $g"; done | awk 'NF == 2' | sort -n | head -1 | awk '{print $2}')
echo "fastest at B = 2,048: ${best:-none}"
pol=${best%_*}; k256=${best#*_}
if [ "$mem" -gt 120000 ]; then rows="95000 90000"; kv=auto; else rows="84000 80000"; kv=float8_e4m3; fi
for n in $rows; do
  for g in "${pol:-norms} ${k256:-tiled}" "norms tiled"; do
    set -- $g
    r=$(left); [ $r -lt 70 ] && { echo "no time for $n $g"; continue; }
    step "oasr-bench-gpu greedy, --gemm $1 --wgmma-k256 $2, K/V $kv, $n streams"
    nvidia-smi --query-gpu=timestamp,utilization.gpu --format=csv,noheader -lms 200 > $O/util_${n}_$1_$2.txt 2>&1 &
    smi=$!
    timeout $(( r < 100 ? r - 5 : 95 )) $B/bin/oasr-bench-gpu --model-dir $M --samples samples --device cuda --warm 4 \
      --run 10 --seconds 20 --front-end device --streams $n --drivers 6 --frontend-threads 2 \
      --decode-threads 6 --kv-dtype $kv --gemm $1 --wgmma-k256 $2 > $O/greedy_${n}_$1_$2.txt 2>&1
    echo "rc $?"; kill $smi 2>/dev/null; grep -v "^ *$" $O/greedy_${n}_$1_$2.txt | tail -5
    [ "$1 $2" = "norms tiled" ] && break
  done
done
step end
