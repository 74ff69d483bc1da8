#!/usr/bin/env bash
# Session 43, call 2: the whole engine at scale with the float8 K/V pool
# (--kv-dtype float8_e4m3: a stream's K/V in half the memory), greedy. On
# an H100 (80 GB, where the bfloat16 pool stopped at 70,000 streams) 80,000+;
# on an H200 100,000+. GEMM is passed as the first argument (auto or
# norms). Logs in /tmp/c2, back as $OUT/call2.tgz.
#   BUDGET=570 OUT=$OUT bash bench/results/gpu/session43/call2.sh GEMM N1 N2 ...
set -u
deadline=$(( $(date +%s) + ${BUDGET:-570} ))
left() { echo $(( deadline - $(date +%s) )); }
O=/tmp/c2; mkdir -p /tmp/nb $O
trap 'tar -czf $OUT/call2.tgz -C $O .' EXIT
[ -d /tmp/nb/bundle ] || tar -xJf .devrun/new/bundle.tar.xz -C /tmp/nb
B=/tmp/nb/bundle; export LD_LIBRARY_PATH=$B/lib; M=models/en-conformer-ctc
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm --format=csv,noheader | tee $O/gpu.txt
step() { echo "== $* ($(date +%T), $(left) s left)"; }
gemm=$1; shift
for n in "$@"; do
  r=$(left); [ $r -lt 70 ] && { echo "no time for $n"; continue; }
  step "oasr-bench-gpu greedy, float8 K/V, gemm $gemm, $n streams"
  timeout $(( r < 110 ? r - 5 : 105 )) $B/bin/oasr-bench-gpu --model-dir $M --samples samples --device cuda --warm 4 \
    --run 10 --seconds 20 --front-end device --streams $n --drivers 6 --frontend-threads 2 \
    --decode-threads 6 --kv-dtype float8_e4m3 --gemm $gemm > $O/greedy_fp8_${gemm}_$n.txt 2>&1
  echo "rc $?"; grep -v "^ *$" $O/greedy_fp8_${gemm}_$n.txt | tail -6
done
step end
