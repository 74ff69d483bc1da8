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
# make container-test-cuda (--cuda): the GPU image, `--target cuda`,
# checked as far as a machine without a GPU can:
#   - its CUDA toolkit image: CUDA_IMAGE (default: the Dockerfile's, NVIDIA's
#     devel image) where it is present or pullable, else a stand-in made from
#     the CUDA toolkit installed here (scripts/cuda-standin-image.sh);
#   - the image as above, plus the NVIDIA container toolkit's variables;
#   - every library the binaries load is in the image (ldd: none "not
#     found"; libcuda.so.1 would be the host driver's), and the server is a
#     CUDA build (libcudart);
#   - `run IMAGE` serves samples/ through the published port: on cuda:0
#     where nvidia-smi lists a GPU (docker --gpus all, podman's CDI device
#     nvidia.com/gpu=all), else on the CPU after reporting no usable GPU;
#   - without a GPU, `--device cuda` (the Kubernetes GPU variant's setting)
#     is refused at start-up with exit code 2.
# CI (.ci/run) runs it after make container-test. A cold build of the CUDA
# image with the stand-in takes 4-8 min on 2 cores (4.5 idle, 7.5 beside
# other builds), the checks seconds.
# Skips (exit 0, saying why) where neither engine can build and run images,
# or where no base image can be had. Every wait is bounded.
#
# Variables: CONTAINER_ENGINE (podman|docker; default: the first usable),
# IMAGE (default localhost/oasr:container-test, -cuda with --cuda),
# BUILD_JOBS (default nproc), CUDA_IMAGE, CUDA_HOME (the toolkit for the
# stand-in; default /usr/local/cuda), CONTAINER_TOOLS (a folder with
# containers.conf and make-base-images.sh for machines without a registry;
# default ../shared/tools/container when there).
set -euo pipefail
cd "$(dirname "$0")/.."
cuda=false
name=container-test
if [ "${1:-}" = --cuda ]; then
  cuda=true
  name=container-test-cuda
fi
IMAGE=${IMAGE:-localhost/oasr:$name}
RUN_ID=oasr-ct-$$
start=$(date +%s)

skip() {
  echo "$name: SKIPPED: $*"
  exit 0
}
fail() {
  echo "$name: FAILED: $*" >&2
  exit 1
}
step() { echo "== $name [$(($(date +%s) - start)) s] $*"; }

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
  for c in "$RUN_ID" "$RUN_ID-nomodel" "$RUN_ID-client" "$RUN_ID-refused"; do
    remove "$c"
  done
  [ -n "${work:-}" ] && rm -rf "$work"
}
trap cleanup EXIT
work=$(mktemp -d)

build_args=(--build-arg "BUILD_JOBS=${BUILD_JOBS:-$(nproc)}"
  --build-arg "GIT_REVISION=$(git rev-parse --short=12 HEAD 2>/dev/null || echo unknown)")
# Docker's format keeps HEALTHCHECK (podman's default, OCI, drops it).
[ "$engine" = podman ] && build_args+=(--format docker --pull=never)
gpu_args=()
if $cuda; then
  cuda_image=${CUDA_IMAGE:-$(sed -n 's/^ARG CUDA_IMAGE=//p' Dockerfile)}
  if ! E image inspect "$cuda_image" >/dev/null 2>&1 &&
    ! timeout 1200 "$engine" pull -q "$cuda_image" >/dev/null 2>&1; then
    [ -x "${CUDA_HOME:-/usr/local/cuda}/bin/nvcc" ] ||
      skip "$cuda_image is neither present nor pullable, and there is no CUDA toolkit here to stand in for it"
    step "$cuda_image cannot be had: a stand-in from the CUDA toolkit here (scripts/cuda-standin-image.sh)"
    cuda_image=$(CONTAINER_ENGINE=$engine nice -n 10 scripts/cuda-standin-image.sh) ||
      fail "scripts/cuda-standin-image.sh failed"
  fi
  build_args+=(--target cuda --build-arg "CUDA_IMAGE=$cuda_image")
  if command -v nvidia-smi >/dev/null && nvidia-smi -L 2>/dev/null | grep -q '^GPU'; then
    gpu_args=(--gpus all)
    [ "$engine" = podman ] && gpu_args=(--device nvidia.com/gpu=all)
  fi
fi
step "$engine build ${build_args[*]} -t $IMAGE ."
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
if $cuda; then
  for var in NVIDIA_VISIBLE_DEVICES=all NVIDIA_DRIVER_CAPABILITIES=compute,utility; do
    [[ $(inspect '{{json .Config.Env}}') == *\"$var\"* ]] || fail "$var is not in the image's environment"
  done
  step "every library the binaries load is in the image"
  libs=$(E run --rm --entrypoint /usr/bin/ldd "$IMAGE" /usr/local/bin/oasr-server /usr/local/bin/oasr-client) ||
    fail "ldd in the image failed: $libs"
  # libcuda.so.1 comes from the host's driver (the NVIDIA container toolkit).
  missing=$(grep 'not found' <<<"$libs" | grep -v 'libcuda\.so\.1' || true)
  [ -z "$missing" ] || fail "not in the image: $missing"
  grep -q 'libcudart\.so.* => /' <<<"$libs" || fail "oasr-server is not a CUDA build (no libcudart)"
  grep -E 'libcu[a-zA-Z]+\.so' <<<"$libs" | sort -u | sed 's/ (0x.*//'
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

step "run $IMAGE (no arguments${gpu_args:+; ${gpu_args[*]}}) on 127.0.0.1"
E run -d --name "$RUN_ID" "${gpu_args[@]}" -p 127.0.0.1::50051 -p 127.0.0.1::8080 "$IMAGE" >/dev/null
wait_health "$RUN_ID" 50051 120 SERVING
if $cuda; then
  logs=$("$engine" logs "$RUN_ID" 2>&1)
  grep -E 'oasr-server .*CUDA on|inference device' <<<"$logs"
  grep -q 'CUDA on' <<<"$logs" || fail "the server is not a CUDA build"
  device='inference device: cpu (no usable GPU found)'
  [ ${#gpu_args[@]} -gt 0 ] && device='inference device: cuda:0'
  grep -qF "$device" <<<"$logs" || fail "expected '$device'"
fi
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

if $cuda; then
  if [ ${#gpu_args[@]} -eq 0 ]; then
    step "run $IMAGE --device cuda without a GPU: refused"
    code=0
    out=$(timeout 120 "$engine" run --rm --name "$RUN_ID-refused" "$IMAGE" --device cuda 2>&1) || code=$?
    echo "exit code $code: $(grep 'cannot start' <<<"$out" || true)"
    if [ "$code" != 2 ] || ! grep -q 'device: cuda is not present' <<<"$out"; then
      fail "--device cuda without a GPU: exit code $code, $out"
    fi
  fi
  echo "$name: PASSED in $(($(date +%s) - start)) s ($engine, $([ ${#gpu_args[@]} -gt 0 ] && echo on a GPU || echo no GPU))"
  exit 0
fi

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

echo "$name: PASSED in $(($(date +%s) - start)) s ($engine)"
