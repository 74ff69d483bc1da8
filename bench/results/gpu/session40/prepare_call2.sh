#!/usr/bin/env bash
# On the development machine, from the repository root: the two libraries
# call2.sh compares. BUILD (default build-gpu) must be a configured CUDA build
# (docs/gpu.md, "Checking on a GPU"). Leaves the working tree as it found it.
#   bash bench/results/gpu/session40/prepare_call2.sh
set -euo pipefail
build=${BUILD:-build-gpu}
patch=bench/results/gpu/session40/attention_pipelined.patch
targets="cache_gpu_test encoder_attention_rescorer_gpu_test encoder_log_mel_gpu_test encoder_parity_gpu_test
  kernels_backend_ops_gpu_test kernels_gpu_test scheduler_cohort_decode_gpu_test scheduler_cohort_graph_gpu_test
  scheduler_engine_gpu_test scheduler_engine_graphs_gpu_test scheduler_rescoring_gpu_test oasr-bench-gpu
  oasr-bench-step oasr-bench-stem oasr-bench-logmel oasr-bench-kernels oasr-transcribe"
# The base: this tree's kernels library as it is.
cmake --build "$build" -j "$(nproc)" --target $targets
mkdir -p .devrun/base
strip --strip-unneeded -o /tmp/oasr_base_kernels.so "$build/kernels/liboasr_kernels.so"
xz -9 -T2 -c /tmp/oasr_base_kernels.so > .devrun/base/liboasr_kernels.so.xz
# The new: the same tree with the patch, bundled whole.
git apply "$patch"
trap 'git apply -R "$patch"; cmake --build "$build" -j "$(nproc)" --target $targets > /dev/null' EXIT
cmake --build "$build" -j "$(nproc)" --target $targets
bash tools/gpu/pack.sh .devrun/new "$build"/tests/*/*_gpu_test "$build"/bench/oasr-bench-{gpu,step,stem,logmel,kernels} \
  "$build"/scheduler/oasr-transcribe
