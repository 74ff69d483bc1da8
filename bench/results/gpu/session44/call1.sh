#!/usr/bin/env bash
# Session 44, call 1: the weight-stationary wgmma kernel (k <= 256). The
# harness' linear cases (the new kernel on every k <= 256 wgmma case), the
# encoder parity of the wgmma policies, oasr-bench-gemm (cuBLASLt, the
# weight-stationary kernel and the 128 x 256 tiles side by side), the chunk
# step under each --gemm policy (and fused on the tiles), then the engine
# with the fastest policy, cohorts filling a captured width or padded. Logs in /tmp/c1, back as
# $OUT/call1.tgz; the summary is stdout.
#   bash tools/gpu/pack.sh .devrun/new build-gpu/tests/kernels/kernels_backend_ops_gpu_test \
#     build-gpu/bench/oasr-bench-gemm build-gpu/tests/encoder/encoder_parity_gpu_test \
#     build-gpu/bench/oasr-bench-step build-gpu/bench/oasr-bench-gpu          (here)
#   BUDGET=570 OUT=$OUT bash bench/results/gpu/session44/call1.sh
set -u
deadline=$(( $(date +%s) + ${BUDGET:-570} ))
left() { echo $(( deadline - $(date +%s) )); }
O=/tmp/c1; mkdir -p /tmp/nb $O
trap 'tar -czf $OUT/call1.tgz -C $O .' EXIT
[ -d /tmp/nb/bundle ] || tar -xJf .devrun/new/bundle.tar.xz -C /tmp/nb
B=/tmp/nb/bundle; export LD_LIBRARY_PATH=$B/lib; M=models/en-conformer-ctc
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm --format=csv,noheader | tee $O/gpu.txt
mem=$(nvidia-smi --query-gpu=memory.total --format=csv,noheader,nounits | head -1)
step() { echo "== $* ($(date +%T), $(left) s left)"; }
step "kernel harness: linear cases, weight-stationary for k <= 256"
OASR_WGMMA_STATIONARY=1 timeout 150 $B/bin/kernels_backend_ops_gpu_test --gtest_color=no --gtest_filter='*linear*' > $O/harness.log 2>&1
echo "rc $?"; grep -E "^\[  (PASSED|FAILED) |^\[  FAILED  \]|error .* > bound" $O/harness.log | head -12
step "oasr-bench-gemm"
timeout 90 $B/bin/oasr-bench-gemm --rows 8192,32768,131072 --reps 30 > $O/gemm.txt 2>&1
echo "rc $?"; cat $O/gemm.txt
step "encoder parity: the wgmma policies, weight-stationary for k <= 256"
OASR_WGMMA_STATIONARY=1 timeout 90 $B/bin/encoder_parity_gpu_test --gtest_color=no \
  --gtest_filter='*Fused*:*Wgmma*:*Norms*' > $O/parity.log 2>&1
echo "rc $?"; grep -E "^\[  (PASSED|FAILED) |^\[  FAILED  \]|max" $O/parity.log | head -12
for g in "cublas" "norms --wgmma-k256 tiled" "norms --wgmma-k256 stationary" "epilogues --wgmma-k256 stationary" "fused --wgmma-k256 stationary" "fused --wgmma-k256 tiled"; do
  r=$(left); [ $r -lt 200 ] && { echo "no time for step $g"; continue; }
  f=$O/step_$(echo $g | sed 's/ --wgmma-k256 /_/').txt
  step "oasr-bench-step, products $g"
  timeout 60 $B/bin/oasr-bench-step --model-dir $M --device cuda --dtype bfloat16 --gemm $g \
    --batches 512,2048,8192 --modes graph --reps 10 > $f 2>&1
  grep -E "graph" $f | tail -3
done
best=$(for g in norms_tiled norms_stationary epilogues_stationary fused_stationary; do echo "$(grep -sE '^ +2048 +graph' $O/step_$g.txt | awk '{print $3}') $g"; done | awk 'NF == 2' | sort -n | head -1 | awk '{print $2}')
echo "fastest at B = 2,048: ${best:-none}"
pol=${best%_*}; k256=${best#*_}
# The engine: the fastest policy, cohorts filling a captured width (the
# default) and, for the first N, padded to the ladder as before.
if [ "$mem" -gt 120000 ]; then rows="90000:256 90000:0"; kv=auto; else rows="80000:256 80000:0"; kv=float8_e4m3; fi
for nf in $rows; do
  n=${nf%:*}; fill=${nf#*:}
  r=$(left); [ $r -lt 80 ] && { echo "no time for $n fill $fill"; continue; }
  step "oasr-bench-gpu greedy, --gemm ${best:-norms}, K/V $kv, $n streams, fill from $fill"
  # NVML's utilisation (the share of each 200 ms with a kernel running) beside it.
  nvidia-smi --query-gpu=timestamp,utilization.gpu --format=csv,noheader -lms 200 > $O/util_${n}_$fill.txt 2>&1 &
  smi=$!
  timeout $(( r < 110 ? r - 5 : 105 )) $B/bin/oasr-bench-gpu --model-dir $M --samples samples --device cuda --warm 4 \
    --run 10 --seconds 20 --front-end device --streams $n --drivers 6 --frontend-threads 2 \
    --decode-threads 6 --kv-dtype $kv --gemm ${pol:-norms} --wgmma-k256 ${k256:-default} --fill-widths-from $fill > $O/greedy_${best}_${n}_$fill.txt 2>&1
  echo "rc $?"; kill $smi 2>/dev/null; grep -v "^ *$" $O/greedy_${best}_${n}_$fill.txt | tail -6
  awk -F', ' '{gsub(/ %/,"",$2); if (NR > 25 && NR <= 75) {s += $2; c++}} END {if (c) printf "NVML utilisation %.1f %% (mean of %d samples, 5-15 s in)\n", s / c, c}' $O/util_${n}_$fill.txt
done
step end
