#!/usr/bin/env bash
# Runs the libFuzzer targets of tests/fuzz (built by `make fuzz` into
# FUZZ_DIR) for FUZZ_SECONDS each, FUZZ_JOBS at a time (default: one per
# core, at most 2), from their committed seeds (tests/fuzz/corpus/<target>)
# plus what earlier runs found (FUZZ_DIR/corpus/<target>). A crash, a
# sanitizer report, a leak, a timeout (an input running past FUZZ_TIMEOUT s)
# or running out of memory (FUZZ_RSS_MB) fails the run; the input is kept as
# FUZZ_DIR/artifacts/<target>-crash-... (or -leak-, -timeout-, -oom-) and
# replays with
#   FUZZ_DIR/tests/fuzz/fuzz_<target> FUZZ_DIR/artifacts/<target>-crash-...
# Usage: scripts/fuzz.sh [target ...]   (default: every target)
set -uo pipefail
cd "$(dirname "$0")/.."

dir=${FUZZ_DIR:-build-fuzz}
seconds=${FUZZ_SECONDS:-60}
timeout=${FUZZ_TIMEOUT:-25}
rss_mb=${FUZZ_RSS_MB:-2048}
cores=$(nproc)
jobs=${FUZZ_JOBS:-$(( cores < 2 ? 1 : 2 ))}
targets=("$@")
if [ ${#targets[@]} -eq 0 ]; then
  targets=($(ls tests/fuzz/corpus))
fi
for t in "${targets[@]}"; do
  [ -x "$dir/tests/fuzz/fuzz_$t" ] || { echo "fuzz: $dir/tests/fuzz/fuzz_$t is not built (make fuzz builds it)" >&2; exit 2; }
done
mkdir -p "$dir/artifacts"

# One target; its libFuzzer output goes to artifacts/<target>.log, its exit
# status to artifacts/<target>.rc.
run_one() {
  local t=$1
  mkdir -p "$dir/corpus/$t"
  # Leaks are checked after every input that allocates more than it frees.
  ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1} \
  UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1} \
    "$dir/tests/fuzz/fuzz_$t" -max_total_time="$seconds" -timeout="$timeout" \
    -rss_limit_mb="$rss_mb" -print_final_stats=1 -artifact_prefix="$dir/artifacts/$t-" \
    "$dir/corpus/$t" "tests/fuzz/corpus/$t" >"$dir/artifacts/$t.log" 2>&1
  echo $? >"$dir/artifacts/$t.rc"
}

start=$(date +%s)
echo "== fuzz: ${#targets[@]} targets, ${seconds} s each, ${jobs} at a time"
running=0
for t in "${targets[@]}"; do
  if [ $running -ge "$jobs" ]; then
    wait -n
    running=$(( running - 1 ))
  fi
  run_one "$t" &
  running=$(( running + 1 ))
done
wait

failed=()
for t in "${targets[@]}"; do
  log="$dir/artifacts/$t.log"
  rc=$(cat "$dir/artifacts/$t.rc" 2>/dev/null || echo 1)
  # libFuzzer's last status line (execs, cov:, ft:) and its final count.
  echo "fuzz_$t: rc $rc; $(grep -E '^#[0-9]+' "$log" | tail -1 | cut -c1-110);" \
       "$(grep -E '^stat::number_of_executed_units' "$log" | tr -s ' ')"
  if [ "$rc" != 0 ]; then
    failed+=("$t")
    echo "-- fuzz_$t failed; the end of $log:" >&2
    tail -60 "$log" >&2
  fi
done
echo "== fuzz: done after $(( $(date +%s) - start )) s"
if [ ${#failed[@]} -ne 0 ]; then
  echo "fuzz: FAILED: ${failed[*]}" >&2
  exit 1
fi
echo "fuzz: every target ran ${seconds} s without a crash, leak or timeout"
