#!/usr/bin/env bash
# The rescorer's linears in bfloat16 / float16 on CUDA: tests and the bench.
set -u
cd .devrun && tar -xJf b10.tar.xz && cd ..
B=.devrun/b10
export LD_LIBRARY_PATH=$B/lib
R=$OUT/r; mkdir -p $R
fixtures=$(strings $B/bin/scheduler_rescoring_gpu_test | grep -m1 -E '/tests/encoder/golden$')
mkdir -p "$fixtures"; python3 -B -m tools.reference.make_fixtures --out "$fixtures" > $R/fixtures.log 2>&1
gtest() { t=$B/bin/$1; echo "== $1"; timeout $2 $t --gtest_color=no > $R/$1.log 2>&1; echo "rc=$?"; grep -E "^\[  (PASSED|FAILED) |^\[  FAILED  \]|Failure|Expected|Which is|hypothesis" $R/$1.log | head -16; }
gtest encoder_attention_rescorer_gpu_test 60
gtest scheduler_rescoring_gpu_test 60
tar -czf $OUT/r.tgz -C $OUT r
python3 -B -m bench.make_rescoring_model /tmp/rm > $R/make_model.log 2>&1
for dt in bfloat16 float32; do timeout 40 $B/bin/oasr-bench-rescoring --model-dir /tmp/rm --device cuda --seconds 2,10,30 --batch 1,16 --dtype $dt > $R/bench_$dt.txt 2>&1; cat $R/bench_$dt.txt; done
tar -czf $OUT/r.tgz -C $OUT r
