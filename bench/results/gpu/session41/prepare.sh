#!/usr/bin/env bash
# On the development machine, from the repository root: the two kernels
# libraries call1.sh compares (this tree as it is, and this tree with
# ../session40/attention_pipelined.patch) and one bundle of every GPU test,
# the benches, oasr-server and oasr-transcribe built with the patch. BUILD
# (default build-gpu) must be a CUDA build configured with -DOASR_WITH_GRPC=ON
# and -DOASR_WITH_OPENBLAS=OFF (docs/gpu.md, "Checking on a GPU"). Leaves the
# working tree as it found it. Written for b04811d (the patch has since
# landed). The working tree plus .devrun must stay under the device call's
# 64 MiB: the bundle that ran left out gRPC (oasr-server and
# model_bundled_gpu_test with their libraries, ~3 MB) and the system's
# libssl, libcrypto, libz and libgomp.
#   bash bench/results/gpu/session41/prepare.sh
set -euo pipefail
build=${BUILD:-build-gpu}
patch=bench/results/gpu/session40/attention_pipelined.patch
targets="cache_gpu_test encoder_attention_rescorer_gpu_test encoder_log_mel_gpu_test encoder_parity_gpu_test
  kernels_backend_ops_gpu_test kernels_gpu_test scheduler_cohort_decode_gpu_test scheduler_cohort_graph_gpu_test
  scheduler_engine_gpu_test scheduler_engine_graphs_gpu_test scheduler_rescoring_gpu_test model_bundled_gpu_test
  oasr-server oasr-bench-gpu oasr-bench-step oasr-bench-stem oasr-bench-logmel oasr-bench-kernels oasr-transcribe"
cmake --build "$build" -j "$(nproc)" --target $targets
mkdir -p .devrun/base
strip --strip-unneeded -o /tmp/oasr_base_kernels.so "$build/kernels/liboasr_kernels.so"
xz -9 -T2 -c /tmp/oasr_base_kernels.so > .devrun/base/liboasr_kernels.so.xz
git apply "$patch"
trap 'git apply -R "$patch"; cmake --build "$build" -j "$(nproc)" --target $targets > /dev/null' EXIT
cmake --build "$build" -j "$(nproc)" --target $targets
t=$build/tests
bash tools/gpu/pack.sh .devrun/new "$t"/encoder/encoder_{log_mel,parity}_gpu_test "$t"/kernels/kernels{,_backend_ops}_gpu_test \
  "$t"/scheduler/scheduler_{cohort_graph,engine,engine_graphs}_gpu_test "$build"/bench/oasr-bench-{gpu,step}
