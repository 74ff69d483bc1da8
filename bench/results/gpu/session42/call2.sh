#!/usr/bin/env bash
# Session 42, call 2: the whole engine at scale with the wgmma products
# (swish and the layer norms in their epilogues, --gemm fused)
# against cuBLASLt's (--gemm cublas) at the edge, greedy; on an H200 85,000+
# streams, on an H100 70,000 (its memory's limit). Logs in /tmp/c2, back as
# $OUT/call2.tgz.
#   bash tools/gpu/pack.sh .devrun/new build-gpu/bench/oasr-bench-gpu ...   (here)
#   BUDGET=480 OUT=$OUT bash bench/results/gpu/session42/call2.sh           (device call carrying .devrun)
set -u
deadline=$(( $(date +%s) + ${BUDGET:-480} ))
left() { echo $(( deadline - $(date +%s) )); }
O=/tmp/c2; mkdir -p /tmp/nb $O
trap 'tar -czf $OUT/call2.tgz -C $O .' EXIT
tar -xJf .devrun/new/bundle.tar.xz -C /tmp/nb
B=/tmp/nb/bundle; export LD_LIBRARY_PATH=$B/lib; M=models/en-conformer-ctc
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm --format=csv,noheader | tee $O/gpu.txt
mem=$(nvidia-smi --query-gpu=memory.total --format=csv,noheader,nounits | head -1)
step() { echo "== $* ($(date +%T), $(left) s left)"; }
run() {  # name streams extra-args...
  local name=$1 n=$2; shift 2
  r=$(left); [ $r -lt 60 ] && { echo "no time for $name $n"; return; }
  step "oasr-bench-gpu $name at $n"
  timeout $(( r < 100 ? r - 5 : 95 )) $B/bin/oasr-bench-gpu --model-dir $M --samples samples --device cuda --warm 4 \
    --run 10 --seconds 20 --front-end device --streams $n "$@" > $O/${name}_$n.txt 2>&1
  echo "rc $?"; grep -v "^ *$" $O/${name}_$n.txt | tail -5
}
g="--drivers 6 --frontend-threads 2 --decode-threads 6"
if [ "$mem" -gt 120000 ]; then
  run greedy_fused 90000 $g --gemm fused
  run greedy_cublas 90000 $g --gemm cublas
  run greedy_fused 95000 $g --gemm fused
  run greedy_fused 100000 $g --gemm fused
  run beam_fused 65000 --gemm fused --search beam --token-beam 8 --blank-skip 0.999 --drivers 4 --frontend-threads 2 --decode-threads 10
else
  run greedy_fused 70000 $g --gemm fused
  run greedy_cublas 70000 $g --gemm cublas
  run beam_fused 65000 --gemm fused --search beam --token-beam 8 --blank-skip 0.999 --drivers 4 --frontend-threads 2 --decode-threads 10
fi
step end
