#!/usr/bin/env bash
# A capacity hold at one load level (10 minutes is longer than one device
# call), in two calls made back to back (the machine is given back after 30 s
# idle, so the second must follow at once), or in one:
#   start:   tools/gpu/grpc_hold.sh start BUNDLE_TAR STREAMS SECONDS [server flags...]
#            unpacks the bundle (tools/gpu/make_bundle.sh, tar.xz) into
#            /tmp, starts grpc_stage_probe.sh in a session of its own
#            (setsid: it outlives the call) writing to /tmp/oasr-hold, and
#            returns after WAIT seconds (default SECONDS - 20), printing the
#            timeline so far;
#   collect: tools/gpu/grpc_hold.sh collect OUT_DIR
#            waits (up to 300 s) for the probe to end, then packs what it
#            wrote into OUT_DIR/hold.tgz (metrics scrapes thinned to five);
#   once:    tools/gpu/grpc_hold.sh once BUNDLE_TAR STREAMS SECONDS OUT_DIR [server flags...]
#            both in one call: the hold is then limited by the call (600 s
#            with the server's start and the collection: SECONDS <= 545).
# The two-call form needs the second call within the machine's 30 s idle
# release; in practice the turn between two calls is often longer, and the
# machine that answers the second call is then a fresh one (collect says so
# and exits 3 at once). Prefer `once` unless the calls are scripted.
# Run from the repository root there (samples/, models/ and the tools are
# read in place). CLIENT_THREADS, CLIENT_CHANNELS, CLIENT_FLAGS, PROFILER,
# PROFILE_HZ and the rest of grpc_stage_probe.sh's settings pass through.
set -u
hold=/tmp/oasr-hold
start() { # BUNDLE_TAR STREAMS SECONDS [server flags...]
    tar_file=$1 streams=$2 seconds=$3; shift 3
    rm -rf "$hold"; mkdir -p "$hold"
    tar -xJf "$tar_file" -C /tmp
    bundle=/tmp/$(tar -tJf "$tar_file" | head -1 | cut -d/ -f1)
    {
      nproc; free -g
      nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv 2>&1
      date -u +%FT%TZ
    } > "$hold/box.txt"
    [ -d "$bundle/prof" ] && export LD_LIBRARY_PATH="$bundle/prof:${LD_LIBRARY_PATH:-}"
    setsid nohup "$(dirname "$0")/grpc_stage_probe.sh" "$bundle" "$streams" "$seconds" "$hold/run" "$@" \
      > "$hold/probe.log" 2>&1 < /dev/null &
    sleep "${WAIT:-$((seconds - 20))}"
    cat "$hold/box.txt"; tail -3 "$hold/run/timeline.txt" 2>/dev/null; tail -8 "$hold/run/threads.txt" 2>/dev/null
}
collect() { # OUT_DIR
    out=$1
    # A machine given back between the calls is a fresh one: nothing to wait for.
    [ -d "$hold/run" ] || { echo "collect: no hold on this machine (it was given back between the calls)"; exit 3; }
    for _ in $(seq 1 150); do grep -q "^done" "$hold/run/timeline.txt" 2>/dev/null && break; sleep 2; done
    tail -3 "$hold/run/timeline.txt"; tail -5 "$hold/probe.log"
    grep -E "chunk|final|send|cpu|verdict|failed|lost|streams" "$hold/run/load.txt" | head -20
    # Keep five metrics scrapes: the first, the last and three between.
    mapfile -t scrapes < <(ls "$hold/run"/metrics_*.txt 2>/dev/null | sort -t_ -k2 -n)
    n=${#scrapes[@]}
    for i in "${!scrapes[@]}"; do
      case $i in 0|$((n / 4))|$((n / 2))|$((3 * n / 4))|$((n - 1))) ;; *) rm -f "${scrapes[$i]}";; esac
    done
    mkdir -p "$out"; tar -czf "$out/hold.tgz" -C "$hold" .
    ls -la "$out/hold.tgz"
}
case "${1:-}" in
  start) shift; start "$@";;
  collect) collect "$2";;
  once)
    out=$5
    set -- "$2" "$3" "$4" "${@:6}"
    WAIT=${WAIT:-$3} start "$@"
    collect "$out";;
  *)
    sed -n '2,27p' "$0"; exit 2;;
esac
