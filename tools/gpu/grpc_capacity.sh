#!/usr/bin/env bash
# On the GPU machine, from a checkout: the whole server through gRPC on
# loopback, real-time streams from `oasr-client load` on the same box, at
# increasing concurrency (scripts/load_runs.py capacity: stops at the first
# level whose chunk p99 passes 200 ms or where a stream fails). BUNDLE is a
# tools/gpu/pack.sh bundle holding oasr-server and oasr-client. Extra
# arguments go to load_runs.py (e.g. --server-flag=--num-threads=8); MAX_ACTIVE,
# CLIENT_THREADS, CLIENT_CHANNELS and CLIENTS (load generator processes, each
# with the threads and channels given) override the defaults below.
#   tools/gpu/grpc_capacity.sh BUNDLE LEVELS SECONDS OUT.json [load_runs flags...]
set -euo pipefail
bundle=$1 levels=$2 seconds=$3 out=$4; shift 4
export LD_LIBRARY_PATH="$bundle/lib:${LD_LIBRARY_PATH:-}"
ulimit -n 65536 2>/dev/null || true
# Server: the GPU, greedy search, fbank in the forward, room for every
# stream; 16 cores shared with the load generator.
exec python3 -B scripts/load_runs.py --bin "$bundle/bin" --start-timeout 300 --out "$out" \
  --server-flag=--device=cuda --server-flag=--search=greedy --server-flag=--front-end=device \
  --server-flag=--max-active-streams=${MAX_ACTIVE:-40000} --server-flag=--max-waiting-streams=8000 \
  --server-flag=--max-streams-per-peer=0 \
  --client-flag=--threads=${CLIENT_THREADS:-10} --client-flag=--channels=${CLIENT_CHANNELS:-0} \
  "$@" capacity --levels "$levels" --seconds "$seconds" --clients "${CLIENTS:-1}"
