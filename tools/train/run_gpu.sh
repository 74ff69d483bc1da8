#!/usr/bin/env bash
# Retrains the bundled English model from scratch on one GPU machine:
# unpack the synthesizers (.debs from fetch_debs.sh), tokenizer, synthesis,
# training, export, held-out evaluation. Every stage is resumable: running the
# same command again with the same WORK skips finished stages and continues
# training from the newest checkpoint, so the job may be split over calls.
#
# Data flow (the default, STORE=feats, the bundled model's recipe): synth.py
# (CPU workers) synthesizes, augments once (speed, reverberation, telephone
# band, noise, level: augment.py) and writes fbank features in shards under
# WORK/data/train; train.py puts them all on the GPU.
#
# STORE=wav: the shards hold clean 16 kHz waveforms instead, and train.py gives
# every batch a fresh augmentation and computes its fbank on the GPU
# (gpu_frontend.py), so each epoch hears every sentence differently. Measured
# on an H200 it trains ~35 % fewer steps in the same time and gave a worse
# model (bench/results/train-h200-run3-online.md).
#
# BACKGROUND_SYNTH_WORKERS=N (default 0, off): while train.py runs,
# synth.py --train-only keeps synthesizing the same plan with N workers at
# nice 10, adding shards only (the evaluation set and synth_summary.json stay
# as the first synthesis wrote them); train.py loads the new shards at every
# epoch boundary (--reload-shards). It ends when train.py returns, or at the
# latest half a minute before the call's CALL_MINUTES; its lines in run.log
# start with "synth-bg: ". It costs 10-20 % of training throughput.
#
#   OUT=/path/to/out tools/train/run_gpu.sh
#
# Settings (environment): WORK (default <repo>/.train_work), DEBS (default
# <repo>/.devdebs; when it holds no .deb the synthesizers on PATH are used),
# SYNTH_MINUTES (4.0), TRAIN_MINUTES (18, total over all calls), CALL_MINUTES
# (9.3: this call stops training in time to export within it), MAX_TRAIN
# (utterances of the synthesis plan, 400000: enough for ~24 min of 16 cores;
# the time budgets end it first), STORE (feats or wav, see above),
# BACKGROUND_SYNTH_WORKERS (synthesis beside training; 0: off, the default),
# VOICES (synth.py --voices; default all), EVAL_PER_VOICE (40), VOCAB (256),
# TRAIN_ARGS (extra train.py flags; default "--threads 8 --ckpt-minutes 4", as
# the bundled model was trained), SYNTH_ARGS (extra synth.py flags), PYTHON
# (python3), STOP_AFTER (synth: end the call once the data is synthesized),
# SKIP_EVAL (1: no PyTorch evaluation after training, when
# tools/train/eval_cpp.py will evaluate the export), INIT (a model directory,
# e.g. models/en-conformer-ctc: training continues from its weights and CMVN,
# train.py --init, with a fresh optimizer and schedule).
#
# Continuing the bundled model (INIT) on the GPU machine: the model directory
# and the synthesizers' .debs do not fit in one call's carry together, so the
# first call synthesizes only (STOP_AFTER=synth, .devdebs carried, the model
# directory moved out of the working tree) and the next calls train (WORK and
# the unpacked synthesizers stay on the warm machine). Keep the model
# directory out of the tree for every call and carry a copy of it as
# .devmodel/ (git-ignored) with INIT=.devmodel/en-conformer-ctc from the
# second call on: then no call needs a change to the tree before it, and
# each can follow the last at once (the machine goes back 30 s after a call
# ends, taking WORK with it).
#
# Results in OUT (every file <= 16 MiB, at most 8 files): run.log,
# model.safetensors.partNN (or model.safetensors), model_meta.tar (config.json,
# units.txt, model.safetensors.sha256, bpe.model, eval.json/.md, summaries).
# The parts are the model directory's file as committed: the C++ loader and
# tools/reference read model.safetensors.partNN in order when the whole file is absent.
set -euo pipefail
export PYTHONUNBUFFERED=1
call_start=$(date +%s)
repo="$(cd "$(dirname "$0")/../.." && pwd)"
cd "$repo"
: "${OUT:?set OUT to the results folder}"
WORK="${WORK:-$repo/.train_work}"
DEBS="${DEBS:-$repo/.devdebs}"
PY="${PYTHON:-python3}"
SYNTH_MINUTES="${SYNTH_MINUTES:-4.0}"
TRAIN_MINUTES="${TRAIN_MINUTES:-18}"
CALL_MINUTES="${CALL_MINUTES:-9.3}"
MAX_TRAIN="${MAX_TRAIN:-400000}"
STORE="${STORE:-feats}"
BACKGROUND_SYNTH_WORKERS="${BACKGROUND_SYNTH_WORKERS:-0}"
TRAIN_ARGS="${TRAIN_ARGS---threads 8 --ckpt-minutes 4}"
EVAL_PER_VOICE="${EVAL_PER_VOICE:-40}"
VOCAB="${VOCAB:-256}"
mkdir -p "$OUT" "$WORK"
exec > >(tee -a "$OUT/run.log") 2>&1
echo "run_gpu: $(date -u +%FT%TZ) repo $(git -C "$repo" rev-parse --short HEAD 2>/dev/null || echo '?') work $WORK"
"$PY" -c 'import torch; print("torch", torch.__version__, "cuda", torch.cuda.is_available(), torch.cuda.get_device_name(0) if torch.cuda.is_available() else "")'

# A later call on the same warm machine finds the synthesizers unpacked in
# WORK (the .debs need not travel again), for background synthesis.
if compgen -G "$DEBS/*.deb" >/dev/null || [ -f "$WORK/debroot/.unpacked" ]; then
  eval "$(tools/train/unpack_debs.sh "$DEBS" "$WORK/debroot")"
fi
export OASR_SYNTH_TMP="${OASR_SYNTH_TMP:-/dev/shm}"
[ -w "$OASR_SYNTH_TMP" ] || export OASR_SYNTH_TMP="$WORK"
command -v espeak-ng >/dev/null && espeak-ng --version

corpus=tools/train/corpus
if [ ! -f "$WORK/tok/bpe.model" ]; then
  "$PY" -m tools.train.tokenizer --corpus "$corpus" --out "$WORK/tok" --vocab "$VOCAB"
fi
if [ ! -f "$WORK/data/synth_summary.json" ]; then
  "$PY" -m tools.train.synth --corpus "$corpus" --out "$WORK/data" --workers "$(nproc)" \
    --max-train "$MAX_TRAIN" --max-minutes "$SYNTH_MINUTES" --eval-per-voice "$EVAL_PER_VOICE" \
    --store "$STORE" ${VOICES:+--voices "$VOICES"} ${SYNTH_ARGS:-}
fi

if [ "${STOP_AFTER:-}" = synth ]; then
  echo "run_gpu: stopping after synthesis (STOP_AFTER=synth)"
  exit 0
fi

heldout=$("$PY" -c "import json; print(','.join(json.load(open('$WORK/data/synth_summary.json'))['heldout_voices']))")
# Minutes left in this call but $1 (at least half a minute).
minutes_left() {
  "$PY" -c "import time; print(round(max(0.5, $CALL_MINUTES - (time.time() - $call_start) / 60 - $1), 2))"
}
# Leave ~1.2 minutes of this call for data loading slack, export and evaluation.
stop=$(minutes_left 1.2)
bg_synth=
stop_bg_synth() {
  if [ -n "$bg_synth" ]; then
    kill -TERM "$bg_synth" 2>/dev/null || true  # synth.py stops its pool and reports
    # Bounded: a synthesis that has not ended 60 s later is killed, workers
    # first, so that the call never waits on it.
    local i
    for i in $(seq 1 60); do
      kill -0 "$bg_synth" 2>/dev/null || break
      sleep 1
    done
    if kill -0 "$bg_synth" 2>/dev/null; then
      echo "run_gpu: background synthesis did not stop within 60 s; killed"
      pkill -KILL -P "$bg_synth" 2>/dev/null || true
      kill -KILL "$bg_synth" 2>/dev/null || true
    fi
    local rc=0
    wait "$bg_synth" || rc=$?
    # 143: ended by the signal before synth.py had set up its handler.
    echo "run_gpu: background synthesis ended (exit status $rc)"
    bg_synth=
  fi
}
trap stop_bg_synth EXIT
if [ "$BACKGROUND_SYNTH_WORKERS" -gt 0 ]; then
  # Half a minute before the call's end at the latest (train.py's stop counts
  # from after its data loading, so training may end a little after `stop`).
  bg_minutes=$(minutes_left 0.5)
  # shellcheck disable=SC2086
  nice -n 10 "$PY" -m tools.train.synth --train-only --corpus "$corpus" --out "$WORK/data" \
    --workers "$BACKGROUND_SYNTH_WORKERS" --max-train "$MAX_TRAIN" --max-minutes "$bg_minutes" \
    --store "$STORE" ${SYNTH_ARGS:-} > >(sed -u 's/^/synth-bg: /') 2>&1 &
  bg_synth=$!
  echo "run_gpu: background synthesis with $BACKGROUND_SYNTH_WORKERS workers," \
    "for at most $bg_minutes min"
fi
# shellcheck disable=SC2086
"$PY" -m tools.train.train --data "$WORK/data" --tokenizer "$WORK/tok" --work "$WORK/train" \
  --export "$WORK/model" --max-minutes "$TRAIN_MINUTES" --stop-after-minutes "$stop" \
  --eval-data "$WORK/data/eval" --heldout-voices "$heldout" ${INIT:+--init "$INIT"} ${TRAIN_ARGS:-}
stop_bg_synth

if ! "$PY" -c "import json,sys; sys.exit(0 if json.load(open('$WORK/train/train_summary.json'))['finished'] else 1)"; then
  echo "run_gpu: training not finished; run the same command again to continue"
  exit 0
fi
meta="$WORK/model_meta"
mkdir -p "$meta"
[ "${SKIP_EVAL:-}" = 1 ] || "$PY" -m tools.train.evaluate --model "$WORK/model" --eval "$WORK/data/eval" \
  --heldout-voices "$heldout" --out "$meta/eval.json"
cp "$WORK/model/config.json" "$WORK/model/units.txt" "$WORK/tok/bpe.model" \
   "$WORK/train/train_summary.json" "$WORK/data/synth_summary.json" "$meta/"
[ -f "$WORK/model/model.safetensors.sha256" ] && cp "$WORK/model/model.safetensors.sha256" "$meta/"
[ -f "$WORK/data/synth_added.jsonl" ] && cp "$WORK/data/synth_added.jsonl" "$meta/"
tar -C "$meta" -cf "$OUT/model_meta.tar" .
if compgen -G "$WORK/model/model.safetensors.part*" >/dev/null; then
  cp "$WORK"/model/model.safetensors.part* "$OUT/"
else
  cp "$WORK/model/model.safetensors" "$OUT/"
fi
ls -la "$OUT"
echo "run_gpu: done in $(( $(date +%s) - call_start )) s"
