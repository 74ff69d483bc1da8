#!/usr/bin/env bash
# Session 40, call 2 (written for the H100 of call 1; it did not run: the
# session's device time went on machines that could not be started). The
# chunk step with the double-buffered, row-coalesced attention kernel
# (attention_pipelined.patch beside this file) against a kernels library of
# the same tree without it (A/B, alternating), ncu's per-kernel times of one
# step at B = 2048 for both, then the beam search with both language models
# at 60,000 streams (the word LM's memory of Extend). Everything lands in
# $OUT/call2.tgz; the summary goes to stdout.
#
# To run it: bash bench/results/gpu/session40/prepare_call2.sh here (it
# builds both libraries from the current tree into .devrun), then a device
# call of `OUT=$OUT bash bench/results/gpu/session40/call2.sh` carrying .devrun.
set -u
mkdir -p /tmp/nb /tmp/base /tmp/c2 && tar -xJf .devrun/new/bundle.tar.xz -C /tmp/nb
xz -dc .devrun/base/liboasr_kernels.so.xz > /tmp/base/liboasr_kernels.so
trap 'tar -czf $OUT/call2.tgz -C /tmp/c2 .' EXIT
B=/tmp/nb/bundle; export LD_LIBRARY_PATH=$B/lib; M=models/en-conformer-ctc; O=/tmp/c2
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm --format=csv,noheader | tee $O/gpu.txt
lib() { if [ $1 = base ]; then echo /tmp/base:$B/lib; else echo $B/lib; fi; }
for k in new base new base; do
  echo "== oasr-bench-step, attention $k ($(date +%T))"
  LD_LIBRARY_PATH=$(lib $k) timeout 60 $B/bin/oasr-bench-step --model-dir $M --device cuda --dtype bfloat16 \
    --batches 512,2048,8192 --modes graph --reps 10 >> $O/step_$k.txt 2>&1
  grep -E "graph" $O/step_$k.txt | tail -3; tail -2 $O/step_$k.txt | grep -iE "error|undefined" 
done
for k in new base; do
  echo "== ncu per-kernel times of one step at B = 2048, attention $k ($(date +%T))"
  LD_LIBRARY_PATH=$(lib $k) timeout 100 ncu --clock-control none --nvtx --nvtx-include "timed/" \
    --metrics gpu__time_duration.sum --csv $B/bin/oasr-bench-step --model-dir $M --device cuda \
    --dtype bfloat16 --batches 2048 --reps 1 --modes eager > $O/ncu_step_$k.csv 2> $O/ncu_step_$k.err
  python3 tools/gpu/ncu_summary.py $O/ncu_step_$k.csv | tee $O/profile_2048_$k.txt | head -12
done
echo "== beam with both LMs at ${BEAM:-60000} ($(date +%T))"
timeout ${BEAM_TIMEOUT:-170} $B/bin/oasr-bench-gpu --model-dir $M --samples samples --device cuda --warm 4 --run 10 \
  --seconds 20 --front-end device --search beam --token-beam 8 --blank-skip 0.999 --streams ${BEAM:-60000} \
  --drivers 4 --frontend-threads 2 --decode-threads 10 > $O/beam.txt 2>&1
echo "rc $?"; grep -v "^ *$" $O/beam.txt | tail -8
echo "== end $(date +%T)"
