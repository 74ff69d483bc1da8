#!/usr/bin/env bash
# Session 41, call 4: the bundled model served by oasr-server on the GPU over
# gRPC (model_bundled_gpu_test: the samples' transcripts and WER, and the same
# transcripts as a CPU server), with this session's defaults.
#   bash tools/gpu/pack.sh .devrun/new build-gpu/tests/model/model_bundled_gpu_test build-gpu/server/oasr-server
#   OUT=$OUT bash bench/results/gpu/session41/call4.sh   (device call carrying .devrun)
set -u
mkdir -p /tmp/nb && tar -xJf .devrun/new/bundle.tar.xz -C /tmp/nb
B=/tmp/nb/bundle; export LD_LIBRARY_PATH=$B/lib
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | tee $OUT/gpu.txt
OASR_SERVER_BINARY=$B/bin/oasr-server OASR_MODEL_DIR=$PWD/models/en-conformer-ctc OASR_SAMPLES_DIR=$PWD/samples \
  timeout 240 $B/bin/model_bundled_gpu_test --gtest_color=no > $OUT/model_bundled_gpu_test.log 2>&1; echo "rc $?"
grep -E "^\[ +(OK|PASSED|FAILED|SKIPPED) |WER|wer" $OUT/model_bundled_gpu_test.log | tail -12
