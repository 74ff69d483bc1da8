#!/usr/bin/env bash
# make container-test: builds the Dockerfile's image with podman or docker
# (whichever can run here) and uses it as a user would, on loopback only:
#   - the image: a non-root user, an entrypoint that pins no flag, a
#     HEALTHCHECK, no build-time settings in its environment;
#   - `run IMAGE` serves the bundled model: SERVING, and samples/ are
#     transcribed through the published port;
#   - flags append to the entrypoint (`--port 6000` is not a duplicate) and
#     OASR_* variables set them; without a model health is NOT_SERVING;
#   - a plain `stop` (10 s timeout) while a stream longer than the grace is
#     open ends in exit code 0, before the timeout;
#   - (podman) deploy/kubernetes/oasr.yaml's Deployment, on loopback under
#     `podman kube play`: SERVING as uid 65534 with a read-only root.
# Skips (exit 0, saying why) where neither engine can build and run images,
# or where no base image can be had. Every wait is bounded.
#
# Variables: CONTAINER_ENGINE (podman|docker; default: the first usable),
# IMAGE (default localhost/oasr:container-test), BUILD_JOBS (default nproc),
# CONTAINER_TOOLS (a folder with containers.conf and make-base-images.sh for
# machines without a registry; default ../shared/tools/container when there).
set -euo pipefail
cd "$(dirname "$0")/.."
IMAGE=${IMAGE:-localhost/oasr:container-test}
RUN_ID=oasr-ct-$$
start=$(date +%s)

skip() {
  echo "container-test: SKIPPED: $*"
  exit 0
}
fail() {
  echo "container-test: FAILED: $*" >&2
  exit 1
}
step() { echo "== container-test [$(($(date +%s) - start)) s] $*"; }

tools=${CONTAINER_TOOLS:-../shared/tools/container}
if [ -z "${CONTAINERS_CONF:-}" ] && [ -f "$tools/containers.conf" ]; then
  export CONTAINERS_CONF=$PWD/$tools/containers.conf
  [[ $tools = /* ]] && CONTAINERS_CONF=$tools/containers.conf
fi

usable() { command -v "$1" >/dev/null 2>&1 && timeout 60 "$1" info >/dev/null 2>&1; }
engine=${CONTAINER_ENGINE:-}
if [ -z "$engine" ]; then
  if usable podman; then
    engine=podman
  elif usable docker; then
    engine=docker
  elif [ -x "$tools/make-base-images.sh" ] && [ "$(id -u)" -eq 0 ]; then
    engine=podman  # The script below installs it.
  else
    skip "neither podman nor docker can run here (podman: $(command -v podman || echo absent)," \
      "docker: $(command -v docker >/dev/null && echo 'no daemon' || echo absent))"
  fi
fi
# podman without systemd logs an error per container with a HEALTHCHECK (no
# timer for periodic checks); `podman healthcheck run` below still runs it.
E() { nice -n 10 "$engine" "$@" 2> >(grep -v 'systemd connection' >&2); }

# Base images: the registry, or built from the Debian mirror where there is none.
bases=$(sed -n 's/^ARG \(BUILD\|RUNTIME\)_IMAGE=//p' Dockerfile)
for base in $bases; do
  if [ "$engine" = podman ] && ! podman image exists "$base" 2>/dev/null &&
    [ -x "$tools/make-base-images.sh" ]; then
    step "building base images with $tools/make-base-images.sh"
    nice -n 10 "$tools/make-base-images.sh" >/dev/null || fail "make-base-images.sh failed"
  fi
  if ! E image inspect "$base" >/dev/null 2>&1 && ! timeout 300 "$engine" pull -q "$base" >/dev/null 2>&1; then
    skip "base image $base is neither present nor pullable (no registry; no $tools/make-base-images.sh)"
  fi
done
# The engine must be able to start a container at all (podman on a host
# whose default OCI runtime cannot run here, without CONTAINERS_CONF naming
# one that can, fails every RUN step).
probe_base=$(echo "$bases" | tail -n 1)
if ! probe=$(timeout 120 "$engine" run --rm "$probe_base" true 2>&1); then
  skip "$engine cannot start a container here (set CONTAINERS_CONF; see ../shared/tools/README.md):" \
    "$(echo "$probe" | tail -n 1)"
fi

# Removes container $1 at once (only this script's, by name).
remove() {
  "$engine" kill "$1" >/dev/null 2>&1 || true
  "$engine" rm -f "$1" >/dev/null 2>&1 || true
}
cleanup() {
  for c in "$RUN_ID" "$RUN_ID-nomodel" "$RUN_ID-client"; do
    remove "$c"
  done
  [ -n "${work:-}" ] && rm -rf "$work"
}
trap cleanup EXIT
work=$(mktemp -d)

step "$engine build -t $IMAGE ."
build_args=(--build-arg "BUILD_JOBS=${BUILD_JOBS:-$(nproc)}"
  --build-arg "GIT_REVISION=$(git rev-parse --short=12 HEAD 2>/dev/null || echo unknown)")
# Docker's format keeps HEALTHCHECK (podman's default, OCI, drops it).
[ "$engine" = podman ] && build_args+=(--format docker --pull=never)
E build -q "${build_args[@]}" -t "$IMAGE" . >"$work/build.log" 2>&1 ||
  { tail -n 40 "$work/build.log"; fail "image build failed"; }

step "image configuration"
inspect() { "$engine" image inspect --format "$1" "$IMAGE"; }
[ "$(inspect '{{.Config.User}}')" = "65534:65534" ] || fail "user is '$(inspect '{{.Config.User}}')'"
[ "$(inspect '{{json .Config.Entrypoint}}')" = '["/usr/local/bin/oasr-server"]' ] ||
  fail "the entrypoint pins flags: $(inspect '{{json .Config.Entrypoint}}')"
[[ $(inspect '{{json .Config.Healthcheck}}') == *oasr-client* ]] || fail "no HEALTHCHECK"
if [[ $(inspect '{{json .Config.Env}}') == *DEBIAN_FRONTEND* ]]; then
  fail "build-time setting in the image's environment: $(inspect '{{json .Config.Env}}')"
fi

# Waits (at most $3 s) until `oasr-client health` in container $1 on port $2
# prints $4.
wait_health() {
  local out=""
  for _ in $(seq 1 "$3"); do
    out=$("$engine" exec "$1" /usr/local/bin/oasr-client --server "127.0.0.1:$2" health 2>&1 || true)
    [ "$out" = "$4" ] && return 0
    sleep 1
  done
  "$engine" logs "$1" 2>&1 | tail -n 20
  fail "$1: health is '$out', not $4"
}

step "run $IMAGE (no arguments) on 127.0.0.1"
E run -d --name "$RUN_ID" -p 127.0.0.1::50051 -p 127.0.0.1::8080 "$IMAGE" >/dev/null
wait_health "$RUN_ID" 50051 120 SERVING
grpc_port=$("$engine" port "$RUN_ID" 50051/tcp | head -n 1 | sed 's/.*://')
[ "$("$engine" exec "$RUN_ID" id -u)" = 65534 ] || fail "the server runs as uid $("$engine" exec "$RUN_ID" id -u)"
if [ "$engine" = podman ]; then
  podman healthcheck run "$RUN_ID" >/dev/null || fail "HEALTHCHECK reports unhealthy"
fi

# The client from the image, on the host's network: through the published port.
client() {
  E run --rm --name "$RUN_ID-client" --network host -v "$PWD/samples:/samples:ro" -v "$work:/work:ro" \
    --entrypoint /usr/local/bin/oasr-client "$IMAGE" --server "127.0.0.1:$grpc_port" "$@"
}
step "health and samples/ through 127.0.0.1:$grpc_port"
[ "$(client health)" = SERVING ] || fail "health through the published port"
wavs=$(cut -f1 samples/transcripts.tsv | tail -n +2 | sed 's|^|/samples/|')
# shellcheck disable=SC2086
client stream --fast --no-interim $wavs >"$work/stream.txt" || fail "streaming samples/ failed"
python3 - samples/transcripts.tsv "$work/stream.txt" <<'PY' || fail "samples/ transcribed badly"
import sys
refs = [l.split("\t")[3].split() for l in open(sys.argv[1]).read().splitlines()[1:]]
hyp = [l.split("] ", 1)[1] for l in open(sys.argv[2]) if l.startswith("[final")]
hyp_words = " ".join(hyp).split()
ref_words = [w for r in refs for w in r]
found = sum(1 for w in set(ref_words) if w in hyp_words)
print(f"samples: {len(ref_words)} reference words, {len(hyp_words)} transcribed, "
      f"{found}/{len(set(ref_words))} distinct reference words found")
sys.exit(0 if found >= 0.8 * len(set(ref_words)) else 1)
PY

step "flags and OASR_* variables: IMAGE --port 6000 --model-dir '' with OASR_LOG_LEVEL=debug"
E run -d --name "$RUN_ID-nomodel" -e OASR_LOG_LEVEL=debug "$IMAGE" --port 6000 --model-dir "" >/dev/null
wait_health "$RUN_ID-nomodel" 6000 60 NOT_SERVING
logs=$("$engine" logs "$RUN_ID-nomodel" 2>&1)
grep -q 'gRPC listening on 0.0.0.0:6000' <<<"$logs" || fail "--port 6000 ignored: $logs"
grep -q '\[debug\]' <<<"$logs" || fail "OASR_LOG_LEVEL ignored: $logs"
remove "$RUN_ID-nomodel"

step "stop (default timeout) with a stream longer than the grace open"
python3 - samples "$work/long.wav" <<'PY'
import glob, sys, wave
frames, params = b"", None
for _ in range(3):
    for f in sorted(glob.glob(sys.argv[1] + "/*.wav")):
        w = wave.open(f)
        params = params or w.getparams()
        frames += w.readframes(w.getnframes())
out = wave.open(sys.argv[2], "wb")
out.setparams(params)
out.writeframes(frames)
PY
chmod a+r "$work/long.wav" && chmod a+rx "$work"
client stream /work/long.wav >"$work/long.txt" 2>&1 &
client_pid=$!
for _ in $(seq 1 30); do
  grep -q '^\[partial' "$work/long.txt" 2>/dev/null && break
  sleep 0.5
done
grep -q '^\[partial' "$work/long.txt" || fail "the long stream did not start: $(cat "$work/long.txt")"
stop_start=$(date +%s%N)
E stop "$RUN_ID" >/dev/null
stop_ms=$((($(date +%s%N) - stop_start) / 1000000))
code=$("$engine" inspect --format '{{.State.ExitCode}}' "$RUN_ID")
wait "$client_pid" || true
"$engine" logs "$RUN_ID" 2>&1 | grep -E 'shutting down|grace period over|shut down' || true
echo "stop took ${stop_ms} ms, exit code $code; the stream's end: $(tail -n 1 "$work/long.txt")"
[ "$code" = 0 ] || fail "exit code $code after a plain stop (137: killed after the timeout)"
grep -qi 'cancelled\|unavailable\|shutting down' "$work/long.txt" || fail "the open stream was not ended by the drain"

if [ "$engine" = podman ]; then
  step "deploy/kubernetes/oasr.yaml's Deployment under podman kube play (a copy on 127.0.0.1)"
  manifest_image=$(sed -n 's/^ *image: *//p' deploy/kubernetes/oasr.yaml | head -n 1)
  podman tag "$IMAGE" "$manifest_image"
  # podman publishes containerPorts on 0.0.0.0: bind them to loopback, on
  # free ports, with one replica.
  python3 - deploy/kubernetes/oasr.yaml "$work/kube.yaml" <<'PY'
import socket, sys, yaml
def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]
docs = [d for d in yaml.safe_load_all(open(sys.argv[1])) if d and d["kind"] == "Deployment"]
docs[0]["spec"]["replicas"] = 1
for c in docs[0]["spec"]["template"]["spec"]["containers"]:
    for p in c.get("ports", []):
        p.update(hostIP="127.0.0.1", hostPort=free_port())
yaml.safe_dump_all(docs, open(sys.argv[2], "w"))
PY
  grep -q 'hostIP: 127.0.0.1' "$work/kube.yaml" || fail "the manifest copy is not bound to loopback"
  kube_down() { podman kube down "$work/kube.yaml" >/dev/null 2>&1 || true; }
  trap 'kube_down; cleanup' EXIT
  nice -n 10 podman kube play "$work/kube.yaml" >"$work/kube.log" 2>&1 ||
    { cat "$work/kube.log"; fail "podman kube play failed"; }
  # Pod <deployment>-pod(-N), container <pod>-<container>.
  kube_ctr=$(podman ps --format '{{.Names}}' | grep -E '^oasr-pod(-[0-9]+)?-oasr$' | head -n 1 || true)
  [ -n "$kube_ctr" ] || fail "no container from the manifest: $(podman ps -a --format '{{.Names}} {{.Status}}')"
  wait_health "$kube_ctr" 50051 120 SERVING
  [ "$(podman exec "$kube_ctr" id -u)" = 65534 ] || fail "the pod runs as uid $(podman exec "$kube_ctr" id -u)"
  [ "$(podman inspect --format '{{.HostConfig.ReadonlyRootfs}}' "$kube_ctr")" = true ] ||
    fail "the pod's root filesystem is writable"
  [ "$(podman inspect --format '{{.HostConfig.CapAdd}} {{len .EffectiveCaps}}' "$kube_ctr")" = "[] 0" ] ||
    fail "the pod keeps capabilities: $(podman inspect --format '{{.EffectiveCaps}}' "$kube_ctr")"
  kube_down
fi

echo "container-test: PASSED in $(($(date +%s) - start)) s ($engine)"
