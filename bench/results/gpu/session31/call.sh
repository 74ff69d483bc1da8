#!/usr/bin/env bash
# CUDA attention rescoring (rescorer parity, paged segment memory in the engine, eager and graphed), the GPU engine tests rerun, the rescoring bench.
set -u
cd .devrun && tar -xJf b8.tar.xz && cd ..
B=.devrun/b8
export LD_LIBRARY_PATH=$B/lib
R=$OUT/r; mkdir -p $R
fixtures=$(strings $B/bin/scheduler_engine_gpu_test | grep -m1 -E '/tests/encoder/golden$')
mkdir -p "$fixtures"; python3 -B -m tools.reference.make_fixtures --out "$fixtures" > $R/fixtures.log 2>&1
t0=$(date +%s)
gtest() { t=$B/bin/$1; echo "== $1"; timeout $2 $t --gtest_color=no > $R/$1.log 2>&1; echo "rc=$? $(( $(date +%s) - t0 )) s"; grep -E "^\[  (PASSED|FAILED) |^\[  FAILED  \]|Failure" $R/$1.log | head -12; }
gtest encoder_attention_rescorer_gpu_test 60
gtest scheduler_rescoring_gpu_test 120
tar -czf $OUT/r.tgz -C $OUT r
python3 -B -m bench.make_rescoring_model /tmp/rm > $R/make_model.log 2>&1
echo "== bench"; timeout 60 $B/bin/oasr-bench-rescoring --model-dir /tmp/rm --device cuda --seconds 2,5,10,30 > $R/bench_cuda.txt 2>&1; cat $R/bench_cuda.txt
timeout 40 $B/bin/oasr-bench-rescoring --model-dir /tmp/rm --device cpu --threads 1 --seconds 2,5,10 --reps 5 > $R/bench_cpu.txt 2>&1; cat $R/bench_cpu.txt
nproc > $R/cpu.txt; grep -m1 "model name" /proc/cpuinfo >> $R/cpu.txt
tar -czf $OUT/r.tgz -C $OUT r
gtest scheduler_engine_graphs_gpu_test 120
gtest scheduler_cohort_graph_gpu_test 60
gtest encoder_log_mel_gpu_test 60
gtest cache_gpu_test 60
gtest scheduler_engine_gpu_test 120
tar -czf $OUT/r.tgz -C $OUT r
