#!/usr/bin/env bash
# On the GPU machine, from the repository root: the CUDA engine's checks and
# figures in one call. BUNDLE is a folder from make_bundle.sh (binaries in
# bin/, libraries in lib/), built with the fixture path FIXTURES compiled in
# (the build's tests/encoder/golden). Logs go to $OUT.
#   tools/gpu/run_checks.sh BUNDLE FIXTURES [tests,parity,step,stem,torch,compile,kernels,samples,server]
set -uo pipefail
bundle=$1
fixtures=$2
parts=${3:-tests,parity,step,torch,kernels,samples}
final=${OUT:-/tmp/oasr-gpu-out}
out=/tmp/oasr-gpu-logs  # Everything; $OUT gets the summary and one archive.
mkdir -p "$out" "$final"
trap 'tar -czf "$final/logs.tgz" -C "$out" . ; cp "$out"/*.txt "$final/" 2>/dev/null' EXIT
export LD_LIBRARY_PATH="$bundle/lib:${LD_LIBRARY_PATH:-}"
export PYTHONUNBUFFERED=1
bin=$bundle/bin
has() { [[ ",$parts," == *",$1,"* ]]; }
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm --format=csv,noheader | tee "$out/gpu.txt"
rc=0
step() { echo "== $*"; }

if has tests || has parity; then
  step "fixtures"
  mkdir -p "$fixtures"
  python3 -B -m tools.reference.make_fixtures --out "$fixtures" > "$out/fixtures.log" 2>&1 || { echo "fixtures failed"; tail -5 "$out/fixtures.log"; }
fi
if has tests; then
  # model_bundled_gpu_test starts the bundle's oasr-server on this checkout's model and samples.
  export OASR_SERVER_BINARY=$bin/oasr-server OASR_MODEL_DIR=$PWD/models/en-conformer-ctc OASR_SAMPLES_DIR=$PWD/samples
  for t in "$bin"/*_gpu_test; do
    step "$(basename "$t")"
    log=$out/$(basename "$t").log
    if ! timeout 600 "$t" --gtest_color=no > "$log" 2>&1; then
      rc=1
      grep -E -A4 "Failure|Check failed|Aborted" "$log" | head -30
    fi
    grep -E "^\[  (PASSED|FAILED|SKIPPED) |tests? ran|^\[  FAILED  \].*\(|parity \]" "$log" | head -60
  done
fi
if has parity; then
  python3 bench/encoder_torch.py write-model /tmp/wenet_model > /dev/null 2>&1
  for m in models/en-conformer-ctc /tmp/wenet_model; do
    name=$(basename "$m")
    dir=/tmp/parity_$name
    step "parity $name"
    if [ "$name" = en-conformer-ctc ]; then wav="--wav samples/03_flite_slt.wav"; else wav=""; fi
    python3 tools/gpu/parity.py prepare "$m" "$dir" $wav --left 4 || rc=1
    for spec in cpu:float32 cuda:float32 cuda:bfloat16 cuda:float16; do
      dev=${spec%%:*}; dt=${spec##*:}
      "$bin/oasr-encode" --model-dir "$m" --feats "$dir/feats.npy" --out "$dir/oasr_${dev}_${dt}.npy" \
        --device "$dev" --dtype "$dt" --num-left-chunks 4 --threads 8 || rc=1
    done
    python3 tools/gpu/parity.py compare "$dir" | tee "$out/parity_$name.txt" || rc=1
  done
fi
if has step; then
  [ -d /tmp/wenet_model ] || python3 bench/encoder_torch.py write-model /tmp/wenet_model > /dev/null 2>&1
  for m in models/en-conformer-ctc /tmp/wenet_model; do
    step "oasr-bench-step $(basename "$m")"
    "$bin/oasr-bench-step" --model-dir "$m" --device cuda --dtype bfloat16 2>&1 | tee -a "$final/step.txt"
  done
fi
if has stem; then
  step "the subsampling stem: oasr-bench-stem (fused, im2col) and cuDNN through torch"
  "$bin/oasr-bench-stem" 2>&1 | tee -a "$final/stem.txt"
  timeout 300 python3 bench/gpu/stem_torch.py 2>&1 | grep -v -i warn | tee -a "$final/stem.txt"
fi
if has memcheck; then
  step "compute-sanitizer memcheck: one bfloat16 step at B = 512"
  compute-sanitizer --tool memcheck --print-limit 5 "$bin/oasr-bench-step" --model-dir models/en-conformer-ctc \
    --device cuda --dtype bfloat16 --batches 512 --reps 1 --history 16 2>&1 | tail -40
fi
if has profile; then
  step "ncu: one bfloat16 step at B = 512 and 2048, bundled geometry"
  for b in 512 2048; do
    ncu --clock-control none --nvtx --nvtx-include "timed/" --metrics gpu__time_duration.sum --csv \
      "$bin/oasr-bench-step" --model-dir models/en-conformer-ctc --device cuda --dtype bfloat16 \
      --batches $b --reps 1 > "$out/ncu_$b.csv" 2> "$out/ncu_$b.err"
    python3 tools/gpu/ncu_summary.py "$out/ncu_$b.csv" | tee "$out/profile_$b.txt"
  done
  cuobjdump -sass "$bundle/lib/liboasr_kernels.so" | grep -E "Function : |HMMA" | grep -B1 HMMA | grep Function | head -20
fi
if has server; then
  step "oasr-server on cuda: the samples over gRPC"
  rm -f /tmp/ports.json
  "$bin/oasr-server" --device cuda --address 127.0.0.1 --port 0 --metrics-port -1 \
    --port-file /tmp/ports.json --model-dir models/en-conformer-ctc > "$out/server.log" 2>&1 &
  spid=$!
  for i in $(seq 1 120); do [ -s /tmp/ports.json ] && break; sleep 0.5; done
  port=$(python3 -c "import json; print(json.load(open('/tmp/ports.json'))['grpc_port'])")
  "$bin/oasr-client" --server 127.0.0.1:$port info | tee -a "$final/server_samples.txt"
  for f in samples/*.wav; do
    echo "== $f" >> "$final/server_samples.txt"
    "$bin/oasr-client" --server 127.0.0.1:$port stream --fast --no-interim "$f" 2>&1 | grep -i final | tail -3 | tee -a "$final/server_samples.txt"
  done
  kill $spid; wait $spid
  grep -E "engine on|computes on|pool" "$out/server.log" | head -5 | tee -a "$final/server_samples.txt"
fi
if has torch || has compile; then
  for m in models/en-conformer-ctc /tmp/wenet_model; do
    step "torch $(basename "$m") eager"
    timeout 120 python3 bench/gpu/torch_step.py --model-dir "$m" --modes eager 2>&1 | grep -v Warning | tee -a "$final/torch_step.txt"
  done
  if has compile; then
    for m in models/en-conformer-ctc /tmp/wenet_model; do
      step "torch $(basename "$m") compile"
      timeout 200 python3 bench/gpu/torch_step.py --model-dir "$m" --modes compile --batches 64,512,2048,8192 \
        2>&1 | grep -v -i warn | tee -a "$final/torch_step.txt"
    done
  fi
fi
if has kernels; then
  step "oasr-bench-kernels"
  "$bin/oasr-bench-kernels" --no-cpu --reps 20 > "$out/kernels.txt" 2>&1
  tail -45 "$out/kernels.txt"
fi
if has samples; then
  step "samples on cuda (bfloat16 and float32)"
  for dt in bfloat16 float32; do
    "$bin/oasr-transcribe" --model-dir models/en-conformer-ctc --device cuda --dtype "$dt" samples/*.wav \
      > "$out/samples_cuda_$dt.tsv" 2> "$out/samples_cuda_$dt.err" || rc=1
    cat "$out/samples_cuda_$dt.tsv"
  done
fi
exit $rc
