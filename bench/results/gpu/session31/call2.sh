#!/usr/bin/env bash
# Batched CUDA attention rescoring: the rescorer's packed segments, the engine's finals rescored together (eager, graphed), the bench with batches.
set -u
cd .devrun && tar -xJf b9.tar.xz && cd ..
B=.devrun/b9
export LD_LIBRARY_PATH=$B/lib
R=$OUT/r; mkdir -p $R
fixtures=$(strings $B/bin/scheduler_rescoring_gpu_test | grep -m1 -E '/tests/encoder/golden$')
mkdir -p "$fixtures"; python3 -B -m tools.reference.make_fixtures --out "$fixtures" > $R/fixtures.log 2>&1
gtest() { t=$B/bin/$1; echo "== $1"; timeout $2 $t --gtest_color=no > $R/$1.log 2>&1; echo "rc=$?"; grep -E "^\[  (PASSED|FAILED) |^\[  FAILED  \]|Failure" $R/$1.log | head -12; }
gtest encoder_attention_rescorer_gpu_test 60
gtest scheduler_rescoring_gpu_test 120
tar -czf $OUT/r.tgz -C $OUT r
python3 -B -m bench.make_rescoring_model /tmp/rm > $R/make_model.log 2>&1
timeout 90 $B/bin/oasr-bench-rescoring --model-dir /tmp/rm --device cuda --seconds 2,5,10,30 --batch 1,4,16 > $R/bench_cuda_batch.txt 2>&1; cat $R/bench_cuda_batch.txt
tar -czf $OUT/r.tgz -C $OUT r
