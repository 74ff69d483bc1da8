#!/usr/bin/env bash
# Session 41, call 3 (an H200: more than 78 GiB of slots): the whole engine
# at scale with this session's attention kernel and the tensor-core stem by
# default (feed-forward unfused): greedy at 85,000-100,000 streams, then beam
# 10 with both language models. Logs in /tmp/c3, back as $OUT/call3.tgz.
#   bash tools/gpu/pack.sh .devrun/new build-gpu/bench/oasr-bench-gpu   (here)
#   BUDGET=540 OUT=$OUT bash bench/results/gpu/session41/call3.sh        (device call carrying .devrun)
set -u
deadline=$(( $(date +%s) + ${BUDGET:-540} ))
left() { echo $(( deadline - $(date +%s) )); }
O=/tmp/c3; mkdir -p /tmp/nb $O
trap 'tar -czf $OUT/call3.tgz -C $O .' EXIT
tar -xJf .devrun/new/bundle.tar.xz -C /tmp/nb
B=/tmp/nb/bundle; export LD_LIBRARY_PATH=$B/lib; M=models/en-conformer-ctc
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm --format=csv,noheader | tee $O/gpu.txt
mem=$(nvidia-smi --query-gpu=memory.total --format=csv,noheader,nounits | head -1)
step() { echo "== $* ($(date +%T), $(left) s left)"; }
if [ "$mem" -gt 120000 ]; then greedy="85000 90000 95000 100000"; beam="60000 65000"; else greedy="70000"; beam="55000"; fi
run() {  # name streams extra-args...
  local name=$1 n=$2; shift 2
  r=$(left); [ $r -lt 60 ] && { echo "no time for $name $n"; return; }
  step "oasr-bench-gpu $name at $n"
  timeout $(( r < 100 ? r - 5 : 95 )) $B/bin/oasr-bench-gpu --model-dir $M --samples samples --device cuda --warm 4 \
    --run 10 --seconds 20 --front-end device --streams $n "$@" > $O/${name}_$n.txt 2>&1
  echo "rc $?"; grep -v "^ *$" $O/${name}_$n.txt | tail -5
}
for n in $greedy; do run greedy $n --drivers 6 --frontend-threads 2 --decode-threads 6; done
for n in $beam; do
  run beam $n --search beam --token-beam 8 --blank-skip 0.999 --drivers 4 --frontend-threads 2 --decode-threads 10
done
step end
