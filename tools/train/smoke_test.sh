#!/usr/bin/env bash
# The whole training pipeline at a tiny scale on the CPU (under half a minute
# on 2 cores): run_gpu.sh with 4 voices (one held out), ~200 utterances stored
# as waveforms, a 2-layer d=32 model, 30 steps with online augmentation and
# the batched fbank on the CPU, export (split into 50 KiB parts to exercise
# joining), evaluation of the exported model directory. Training uses one
# thread: its many small tensor operations ran 10-20 times slower with two
# threads whenever anything else used a core (30 steps: 43 s against 2 s).
# The background synthesis beside training runs with one worker; the first
# synthesis has already finished the 200-utterance plan, so it adds nothing
# (test_smoke.py adds a shard with synth.py --train-only itself).
#
#   tools/train/smoke_test.sh [DIR]     (default: a fresh temporary folder)
set -euo pipefail
repo="$(cd "$(dirname "$0")/../.." && pwd)"
dir="${1:-$(mktemp -d /tmp/oasr_train_smoke.XXXXXX)}"
export OUT="$dir/out" WORK="$dir/work"
export PYTHON="${PYTHON:-/usr/bin/python3}"
export VOICES="espeak:en-us,flite:slt,festival:kal_diphone,espeak:en-029"
export MAX_TRAIN=200 SYNTH_MINUTES=2 EVAL_PER_VOICE=3 VOCAB=128 CALL_MINUTES=10
export BACKGROUND_SYNTH_WORKERS=1 STORE=wav
export TRAIN_ARGS="--num-blocks 2 --output-size 32 --linear-units 64 --max-steps 30 \
  --batch-frames 2000 --device cpu --threads 1 --warmup-steps 10 --lr 2e-3 \
  --max-file-mib 0.05 --log-every 10 --ckpt-minutes 100"
"$repo/tools/train/run_gpu.sh"
echo "smoke_test: results in $OUT"
