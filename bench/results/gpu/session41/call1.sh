#!/usr/bin/env bash
# Session 41, call 1 (H200 preferred; an 80 GB H100 gets smaller stream
# counts). In order of value, time-capped at BUDGET seconds:
#  1. the chunk step with the double-buffered, row-coalesced attention kernel
#     (session40/attention_pipelined.patch, built into the bundle) against
#     this tree's kernels library without it (A/B, alternating, same call);
#  2. the bundled model served over gRPC on the GPU (model_bundled_gpu_test);
#  3. the whole engine, greedy, at the edge of what one GPU holds;
#  4. beam 10 with both language models;
#  5. ncu's per-kernel times of one step at B = 2048, both libraries;
#  6. the engine and kernel GPU tests with the time left.
# Logs go to /tmp/c1 and come back as $OUT/call1.tgz; the summary is stdout.
#   bash bench/results/gpu/session41/prepare.sh   (here, first)
#   BUDGET=570 OUT=$OUT bash bench/results/gpu/session41/call1.sh   (device call carrying .devrun)
set -u
deadline=$(( $(date +%s) + ${BUDGET:-570} ))
left() { echo $(( deadline - $(date +%s) )); }
O=/tmp/c1; mkdir -p /tmp/nb /tmp/base $O
trap 'tar -czf $OUT/call1.tgz -C $O .' EXIT
tar -xJf .devrun/new/bundle.tar.xz -C /tmp/nb
xz -dc .devrun/base/liboasr_kernels.so.xz > /tmp/base/liboasr_kernels.so
B=/tmp/nb/bundle; export LD_LIBRARY_PATH=$B/lib; M=models/en-conformer-ctc
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm --format=csv,noheader | tee $O/gpu.txt
mem=$(nvidia-smi --query-gpu=memory.total --format=csv,noheader,nounits | head -1)
step() { echo "== $* ($(date +%T), $(left) s left)"; }
lib() { if [ $1 = base ]; then echo /tmp/base:$B/lib; else echo $B/lib; fi; }
for k in new base new base; do
  step "oasr-bench-step, attention $k"
  LD_LIBRARY_PATH=$(lib $k) timeout 60 $B/bin/oasr-bench-step --model-dir $M --device cuda --dtype bfloat16 \
    --batches 512,2048,8192 --modes graph --reps 10 >> $O/step_$k.txt 2>&1
  grep -E "graph" $O/step_$k.txt | tail -3; tail -3 $O/step_$k.txt | grep -iE "error|undefined"
done
if [ -x $B/bin/model_bundled_gpu_test ]; then  # (a bundle with gRPC is ~3 MB larger)
step "model_bundled_gpu_test (oasr-server on the GPU over gRPC)"
OASR_SERVER_BINARY=$B/bin/oasr-server OASR_MODEL_DIR=$PWD/$M OASR_SAMPLES_DIR=$PWD/samples \
  timeout 120 $B/bin/model_bundled_gpu_test --gtest_color=no > $O/model_bundled_gpu_test.log 2>&1; echo "rc $?"
grep -E "^\[ +(OK|PASSED|FAILED|SKIPPED) " $O/model_bundled_gpu_test.log | tail -8
fi
if [ "$mem" -gt 120000 ]; then greedy="85000 90000 95000"; beam=60000; else greedy="60000 65000"; beam=50000; fi
for n in $greedy; do
  r=$(left); [ $r -lt 200 ] && { echo "no time for greedy $n"; continue; }
  step "oasr-bench-gpu greedy at $n"
  timeout 90 $B/bin/oasr-bench-gpu --model-dir $M --samples samples --device cuda --warm 4 --run 10 \
    --seconds 20 --front-end device --streams $n --drivers 6 --frontend-threads 2 --decode-threads 6 > $O/greedy_$n.txt 2>&1
  echo "rc $?"; grep -v "^ *$" $O/greedy_$n.txt | tail -14
done
r=$(left)
if [ $r -gt 150 ]; then
  step "oasr-bench-gpu beam 10, both LMs, at $beam"
  timeout 100 $B/bin/oasr-bench-gpu --model-dir $M --samples samples --device cuda --warm 4 --run 10 \
    --seconds 20 --front-end device --search beam --token-beam 8 --blank-skip 0.999 --streams $beam \
    --drivers 4 --frontend-threads 2 --decode-threads 10 > $O/beam_$beam.txt 2>&1
  echo "rc $?"; grep -v "^ *$" $O/beam_$beam.txt | tail -14
fi
for k in new base; do
  r=$(left); [ $r -lt 120 ] && { echo "no time for ncu $k"; continue; }
  step "ncu per-kernel times of one step at B = 2048, attention $k"
  LD_LIBRARY_PATH=$(lib $k) timeout 90 ncu --clock-control none --nvtx --nvtx-include "timed/" \
    --metrics gpu__time_duration.sum --csv $B/bin/oasr-bench-step --model-dir $M --device cuda \
    --dtype bfloat16 --batches 2048 --reps 1 --modes eager > $O/ncu_step_$k.csv 2> $O/ncu_step_$k.err
  python3 tools/gpu/ncu_summary.py $O/ncu_step_$k.csv | tee $O/profile_2048_$k.txt | head -14
done
fx=$(strings $B/bin/scheduler_engine_gpu_test | grep -m1 -E '/tests/encoder/golden$')
mkdir -p "$fx"; python3 -B -m tools.reference.make_fixtures --out "$fx" > $O/fixtures.log 2>&1 || echo "fixtures failed"
for t in scheduler_engine_graphs kernels_backend_ops encoder_parity scheduler_cohort_graph kernels encoder_log_mel \
         scheduler_engine; do
  r=$(left); [ $r -lt 40 ] && { echo "no time for $t"; continue; }
  step "${t}_gpu_test"
  timeout $(( r - 20 )) $B/bin/${t}_gpu_test --gtest_color=no > $O/${t}_gpu_test.log 2>&1; echo "rc $?"
  grep -E "^\[  (PASSED|FAILED|SKIPPED) |tests? ran|^\[  FAILED  \]" $O/${t}_gpu_test.log | tail -8
  grep -E -A3 "Failure|Check failed" $O/${t}_gpu_test.log | head -12
done
step end
