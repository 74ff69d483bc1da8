#!/usr/bin/env bash
# oasr-bench-server (configured by bench/server.cmake): starts oasr-server on
# 127.0.0.1 with a model and runs `oasr-client load` at rising concurrency,
# real-time streams with interim results, until the p95 chunk latency passes
# the target. Prints one row per level and the largest level under the
# target. Environment: OASR_BENCH_MODEL (model directory; default the bundled
# models/*/ with a config.json, else the reference's random small model,
# written on demand), OASR_BENCH_SECONDS (per level, default 10),
# OASR_BENCH_LEVELS (default "1 2 4 8 16 32 64 128 192 256"), OASR_BENCH_TARGET_MS
# (default 300), OASR_BENCH_THREADS (encoder threads, default 1).
# Flags: --model-dir DIR (as OASR_BENCH_MODEL), --help.
set -euo pipefail

usage() {
  cat <<USAGE
oasr-bench-server: how many concurrent real-time streams a local oasr-server
holds with p95 chunk latency under the target, at rising concurrency.

Usage: oasr-bench-server [--model-dir DIR] [--help]
  --model-dir DIR  model to serve (default: OASR_BENCH_MODEL, else the bundled
                   models/*/ with a config.json, else the reference's random
                   small model, written on demand)
  --help           this text
Environment: OASR_BENCH_SECONDS (per level, default 10), OASR_BENCH_LEVELS
(default "1 2 4 8 16 32 64 128 192 256"), OASR_BENCH_TARGET_MS (default 300),
OASR_BENCH_THREADS (encoder threads, default 1).
USAGE
}
while [ $# -gt 0 ]; do
  case "$1" in
    -h|--help) usage; exit 0 ;;
    --model-dir) [ $# -ge 2 ] || { echo "--model-dir needs a directory" >&2; exit 2; }
                 OASR_BENCH_MODEL=$2; shift 2 ;;
    --model-dir=*) OASR_BENCH_MODEL=${1#--model-dir=}; shift ;;
    *) echo "unknown argument: $1 (try --help)" >&2; exit 2 ;;
  esac
done

SERVER=@OASR_BENCH_SERVER_BINARY@
CLIENT=@OASR_BENCH_CLIENT_BINARY@
SOURCE_DIR=@OASR_BENCH_SOURCE_DIR@
FIXTURE_MODEL=@OASR_BENCH_FIXTURE_MODEL@
SECONDS_PER_LEVEL=${OASR_BENCH_SECONDS:-10}
LEVELS=${OASR_BENCH_LEVELS:-"1 2 4 8 16 32 64 128 192 256"}
TARGET_MS=${OASR_BENCH_TARGET_MS:-300}
THREADS=${OASR_BENCH_THREADS:-1}

work=$(mktemp -d /tmp/oasr-bench-server-XXXXXX)
server_pid=""
cleanup() {
  if [ -n "$server_pid" ]; then kill -TERM "$server_pid" 2>/dev/null || true; wait "$server_pid" 2>/dev/null || true; fi
  rm -rf "$work"
}
trap cleanup EXIT

model=${OASR_BENCH_MODEL:-}
if [ -z "$model" ]; then
  for dir in "$SOURCE_DIR"/models/*/; do
    if [ -f "$dir/config.json" ] && [ -f "$dir/units.txt" ]; then model=${dir%/}; break; fi
  done
fi
if [ -z "$model" ]; then
  model=$FIXTURE_MODEL
  if [ ! -f "$model/config.json" ]; then
    echo "no bundled model: writing the reference's random small model" >&2
    (cd "$SOURCE_DIR" && /usr/bin/python3 -B -m tools.reference.make_fixtures --out "$work/golden" >/dev/null)
    model=$work/golden/small_ln/model
  fi
fi

# 5 s of speech-like audio (two tones under an envelope, noise), 16 kHz mono.
/usr/bin/python3 - "$work/audio.wav" <<'PY'
import math, random, struct, sys, wave
random.seed(1)
rate, seconds = 16000, 5.0
with wave.open(sys.argv[1], "wb") as w:
    w.setnchannels(1); w.setsampwidth(2); w.setframerate(rate)
    frames = bytearray()
    for i in range(int(rate * seconds)):
        t = i / rate
        env = 0.5 + 0.5 * math.sin(2 * math.pi * 0.9 * t)
        x = 6000 * env * (math.sin(2 * math.pi * 440 * t) + 0.5 * math.sin(2 * math.pi * 1250 * t))
        frames += struct.pack("<h", max(-32768, min(32767, int(x + random.gauss(0, 200)))))
    w.writeframes(bytes(frames))
PY

"$SERVER" --address 127.0.0.1 --port 0 --metrics-port -1 --port-file "$work/ports.json" \
  --model-dir "$model" --num-threads "$THREADS" --max-active-streams 256 --log-level warn \
  >"$work/server.log" 2>&1 &
server_pid=$!
for _ in $(seq 1 300); do [ -f "$work/ports.json" ] && break; sleep 0.1; done
[ -f "$work/ports.json" ] || { echo "oasr-server did not start:" >&2; cat "$work/server.log" >&2; exit 1; }
port=$(sed -E 's/.*"grpc_port":([0-9]+).*/\1/' "$work/ports.json")

echo "oasr-bench-server: model $model, $(nproc) CPUs, encoder threads $THREADS"
echo "real-time 5 s streams, 100 ms messages, interim results; ${SECONDS_PER_LEVEL} s per level; target p95 chunk latency < ${TARGET_MS} ms"
printf "%-8s %-8s %-8s %-10s %-10s %-10s %-12s\n" concur ok failed p50_ms p95_ms p99_ms final_p95_ms
best=0
for level in $LEVELS; do
  "$CLIENT" --server "127.0.0.1:$port" load "$work/audio.wav" --concurrency "$level" \
    --duration "$SECONDS_PER_LEVEL" --report-json "$work/report.json" >"$work/load.txt" 2>&1 || true
  [ -f "$work/report.json" ] || { echo "oasr-client load failed:" >&2; cat "$work/load.txt" >&2; break; }
  read -r ok failed p50 p95 p99 final95 < <(/usr/bin/python3 - "$work/report.json" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
c, f = r["chunk_latency"], r["final_latency"]
print(r["streams"] - r["failed_streams"], r["failed_streams"], round(c["p50_ms"], 1),
      round(c["p95_ms"], 1), round(c["p99_ms"], 1), round(f["p95_ms"], 1))
PY
)
  rm -f "$work/report.json"
  printf "%-8s %-8s %-8s %-10s %-10s %-10s %-12s\n" "$level" "$ok" "$failed" "$p50" "$p95" "$p99" "$final95"
  if [ "$failed" != "0" ] || awk "BEGIN{exit !($p95 >= $TARGET_MS)}"; then break; fi
  best=$level
done
echo "held: $best concurrent real-time streams with p95 chunk latency < ${TARGET_MS} ms"
