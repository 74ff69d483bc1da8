#!/usr/bin/env bash
# On the GPU machine, from a checkout: one load level through gRPC with the
# server's /metrics scraped every 8 s while it runs (the per-stage timings,
# oasr_grpc_stage_*, and the engine's), for locating where a level that does
# not hold loses its time. Shorter than grpc_capacity.sh: no drain, no
# second level; the load generator is stopped after SECONDS + 2 scrapes.
# BUNDLE is a tools/gpu/pack.sh bundle with oasr-server and oasr-client; the
# files go to OUT_DIR (server.log, load.txt, metrics_<t>.txt, timeline.txt,
# threads.txt: CPU per thread group of both processes, tools/gpu/thread_cpu.py).
# Extra arguments go to the server (e.g. --grpc-threads 12); DEVICE, FRONT_END,
# CLIENT_FLAGS (more load generator flags, e.g. "--chunk-ms 250"),
# MAX_ACTIVE, CLIENT_THREADS and CLIENT_CHANNELS override the defaults;
# PROFILER (the path of gperftools' libprofiler.so, which travels with its
# libunwind) samples both processes' CPU into server.prof and client.prof
# (google-pprof --text BINARY PROFILE reads them) at PROFILE_HZ samples a second
# of CPU time (default 250; a long hold wants fewer, e.g. 25). Where
# nvidia-smi exists, GPU use and memory go to gpu.csv every 8 s. A device
# call brings back at most 8 files from $OUT: write OUT_DIR outside $OUT and
# pack it into one archive there (tar -czf $OUT/NAME.tgz -C OUT_DIR .), as
# grpc_hold.sh does.
#   tools/gpu/grpc_stage_probe.sh BUNDLE STREAMS SECONDS OUT_DIR [server flags...]
set -u
bundle=$1 streams=$2 seconds=$3 out=$4; shift 4
mkdir -p "$out"
export LD_LIBRARY_PATH="$bundle/lib:${LD_LIBRARY_PATH:-}"
ulimit -n 65536 2>/dev/null || true
t0=$(date +%s)
port_file=$(mktemp -u /tmp/oasr-probe-XXXXXX.json)
profile() { # NAME: the environment that samples a process into $out/NAME.prof
  [ -n "${PROFILER:-}" ] && echo "LD_PRELOAD=$PROFILER CPUPROFILE=$out/$1.prof CPUPROFILE_FREQUENCY=${PROFILE_HZ:-250}"
}
env $(profile server) "$bundle/bin/oasr-server" --address 127.0.0.1 --port 0 --metrics-port 0 --port-file "$port_file" \
  --model-dir models/en-conformer-ctc --device "${DEVICE:-cuda}" --search greedy --front-end "${FRONT_END:-device}" \
  --max-active-streams "${MAX_ACTIVE:-$((streams * 2))}" --max-waiting-streams 8000 --max-streams-per-peer 0 \
  "$@" > "$out/server.log" 2>&1 &
server=$!
for _ in $(seq 1 600); do [ -s "$port_file" ] && break; sleep 0.2; done
read -r grpc metrics < <(python3 -c "import json,sys; p=json.load(open(sys.argv[1])); print(p['grpc_port'], p['metrics_port'])" "$port_file")
echo "server up after $(( $(date +%s) - t0 )) s" > "$out/timeline.txt"
env $(profile client) "$bundle/bin/oasr-client" --server "127.0.0.1:$grpc" load samples/*.wav --concurrency "$streams" \
  --duration "$seconds" --ramp 4 --min-seconds 5 --max-seconds 20 \
  --threads "${CLIENT_THREADS:-10}" --channels "${CLIENT_CHANNELS:-0}" \
  --report-json "$out/load.json" ${CLIENT_FLAGS:-} > "$out/load.txt" 2>&1 &
client=$!
python3 -B "$(dirname "$0")/thread_cpu.py" --interval 8 --count $(( (seconds + 16) / 8 )) "$server" "$client" > "$out/threads.txt" 2>&1 &
sampler=$!
smi=
if command -v nvidia-smi > /dev/null; then
  nvidia-smi --query-gpu=timestamp,utilization.gpu,memory.used --format=csv -l 8 > "$out/gpu.csv" 2>&1 &
  smi=$!
fi
t=0
while [ "$t" -lt $((seconds + 16)) ]; do
  sleep 8; t=$((t + 8))
  python3 -c "import urllib.request,sys; print(urllib.request.urlopen(sys.argv[1], timeout=3).read().decode())" \
    "http://127.0.0.1:$metrics/metrics" > "$out/metrics_$t.txt" 2>&1
  echo "t=$t s load $(cut -d' ' -f1-3 /proc/loadavg)" >> "$out/timeline.txt"
done
kill "$sampler" 2>/dev/null
[ -n "$smi" ] && kill "$smi" 2>/dev/null
# Streams started near the end run up to --max-seconds past --duration: give
# the client that long to finish and print its report, then stop it.
for _ in $(seq 1 100); do kill -0 "$client" 2>/dev/null || break; sleep 0.25; done
kill -INT "$client" 2>/dev/null; sleep 1; kill -KILL "$client" 2>/dev/null
wait "$client" 2>/dev/null
kill -TERM "$server"; sleep 2; kill -KILL "$server" 2>/dev/null
rm -f "$port_file"
echo "done after $(( $(date +%s) - t0 )) s" >> "$out/timeline.txt"
