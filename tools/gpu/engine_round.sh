#!/usr/bin/env bash
# On the GPU machine, from the repository root: one round of engine work in a
# single device call -- the GPU tests, the chunk step with this bundle's
# kernels against another build's (A/B in the same call), an ncu summary per
# kernel, the whole engine at several stream counts with CPU per thread
# group, and the offline run. BUNDLE is a folder from make_bundle.sh.
# Everything is logged under /tmp/oasr-round and packed into $OUT/round.tgz;
# the summary goes to stdout.
#   tools/gpu/engine_round.sh BUNDLE [PARTS]
# PARTS (comma-separated, default tests,ab,profile,scale,offline):
#   tests    every *_gpu_test of the bundle (tools/gpu/run_checks.sh tests)
#   ab       oasr-bench-step with the bundle's kernels, then with
#            $BASE_KERNELS/liboasr_kernels.so (when set) in its place, or
#            $BASE_BIN/oasr-bench-step (another static build, when set)
#   stem     oasr-bench-stem of this bundle (rows fused, fused-tc, unfused)
#            and of $BASE_BIN (when set); oasr-bench-step with
#            --stem recompute and --stem tensor-cores
#   profile  ncu per-kernel times of one step at B = 512 and 2048
#   scale    oasr-bench-gpu at $STREAMS with $SCALE_ARGS, CPU per thread
#            group sampled every 4 s (tools/gpu/thread_cpu.py)
#   offline  oasr-bench-gpu's offline run ($OFFLINE_ARGS)
set -uo pipefail
bundle=$(cd "$1" && pwd)
parts=${2:-tests,ab,profile,scale,offline}
out=/tmp/oasr-round
final=${OUT:-/tmp/oasr-round-out}
mkdir -p "$out" "$final"
trap 'tar -czf "$final/round.tgz" -C "$out" .' EXIT
export LD_LIBRARY_PATH="$bundle/lib:${LD_LIBRARY_PATH:-}"
export PYTHONUNBUFFERED=1
bin=$bundle/bin
model=models/en-conformer-ctc
has() { [[ ",$parts," == *",$1,"* ]]; }
step() { echo "== $* ($(date +%T))"; }
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm --format=csv,noheader | tee "$out/gpu.txt"
git log -1 --format='commit %h %s' 2>/dev/null | tee "$out/commit.txt"
rc=0

if has tests; then
  # run_checks.sh makes the fixtures the tests were built to read, then runs
  # every *_gpu_test of the bundle.
  fixtures=$(strings "$bin/scheduler_engine_gpu_test" 2>/dev/null | grep -m1 -E '/tests/encoder/golden$' || true)
  OUT=$out/checks bash tools/gpu/run_checks.sh "$bundle" "${fixtures:-/tmp/oasr-golden}" tests || rc=1
fi
if has ab; then
  step "oasr-bench-step, this bundle's kernels"
  "$bin/oasr-bench-step" --model-dir $model --device cuda --dtype bfloat16 --batches 64,512,2048,8192 \
    2>&1 | tee "$out/step_new.txt" | grep -E "graph|eager" | tail -8
  if [ -n "${BASE_KERNELS:-}" ] && [ -f "$BASE_KERNELS/liboasr_kernels.so" ]; then
    step "oasr-bench-step, the kernels of $BASE_KERNELS"
    LD_LIBRARY_PATH="$(cd "$BASE_KERNELS" && pwd):$LD_LIBRARY_PATH" "$bin/oasr-bench-step" --model-dir $model \
      --device cuda --dtype bfloat16 --batches 64,512,2048,8192 2>&1 | tee "$out/step_base.txt" | grep -E "graph|eager" | tail -8
  fi
  if [ -n "${BASE_BIN:-}" ] && [ -x "$BASE_BIN/oasr-bench-step" ]; then
    step "oasr-bench-step of $BASE_BIN"
    "$BASE_BIN/oasr-bench-step" --model-dir $model --device cuda --dtype bfloat16 --batches 64,512,2048,8192 \
      2>&1 | tee "$out/step_base.txt" | grep -E "graph|eager" | tail -8
  fi
fi
if has stem; then
  step "oasr-bench-stem, this bundle"
  "$bin/oasr-bench-stem" 2>&1 | tee "$out/stem_new.txt" | tail -16
  for k in recompute tensor-cores; do
    step "oasr-bench-step --stem $k"
    "$bin/oasr-bench-step" --model-dir $model --device cuda --dtype bfloat16 --batches 512,2048,8192 \
      --modes graph --stem $k 2>&1 | tee "$out/step_stem_$k.txt" | grep -E "graph|stem" | tail -4
  done
  if [ -n "${BASE_BIN:-}" ] && [ -x "$BASE_BIN/oasr-bench-stem" ]; then
    step "oasr-bench-stem of $BASE_BIN"
    "$BASE_BIN/oasr-bench-stem" 2>&1 | tee "$out/stem_base.txt" | tail -12
  fi
fi
if has profile; then
  for b in 512 2048; do
    step "ncu: one bfloat16 step at B = $b"
    timeout 240 ncu --clock-control none --nvtx --nvtx-include "timed/" --metrics gpu__time_duration.sum --csv \
      "$bin/oasr-bench-step" --model-dir $model --device cuda --dtype bfloat16 --batches $b --reps 1 \
      > "$out/ncu_$b.csv" 2> "$out/ncu_$b.err"
    python3 tools/gpu/ncu_summary.py "$out/ncu_$b.csv" | tee "$out/profile_$b.txt" | head -14
  done
fi
if has scale; then
  step "oasr-bench-gpu ${STREAMS:=35000,50000} ${SCALE_ARGS:=}"
  # shellcheck disable=SC2086
  "$bin/oasr-bench-gpu" --model-dir $model --samples samples --device cuda --warm 4 --run 10 --seconds 20 \
    --front-end device --streams "$STREAMS" $SCALE_ARGS > "$out/scale.txt" 2>&1 &
  pid=$!
  sleep 3
  python3 tools/gpu/thread_cpu.py --interval 4 --count 60 $pid > "$out/scale_threads.txt" 2>&1 &
  wait $pid || rc=1
  grep -v "^ *$" "$out/scale.txt"
fi
if has offline; then
  step "oasr-bench-gpu offline ${OFFLINE_ARGS:=--offline-streams 8192 --offline-seconds 20 --drivers 8}"
  # shellcheck disable=SC2086
  "$bin/oasr-bench-gpu" --model-dir $model --samples samples --device cuda --front-end device --streams 0 \
    $OFFLINE_ARGS 2>&1 | tee "$out/offline.txt" | grep -E "offline|per tick|per row"
fi
exit $rc
