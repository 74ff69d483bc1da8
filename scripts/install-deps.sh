#!/usr/bin/env bash
# Installs the Debian packages oasr needs to build, test and serve.
# Idempotent and quiet when everything is present; run as root or with sudo.
set -euo pipefail

packages=(
  # Build
  build-essential cmake pkg-config git
  # Libraries
  libgrpc++-dev protobuf-compiler-grpc protobuf-compiler libprotobuf-dev grpc-proto
  libabsl-dev libspdlog-dev libfmt-dev libcli11-dev nlohmann-json3-dev
  libopenblas-dev libsoxr-dev libcpp-httplib-dev zlib1g-dev libssl-dev openssl
  # Microphone capture (oasr-client mic)
  portaudio19-dev
  # Tests and benchmarks
  libgtest-dev libgmock-dev libbenchmark-dev
  python3 python3-numpy python3-yaml python3-grpcio python3-grpc-tools python3-protobuf
  python3-torch python3-torchaudio python3-sentencepiece
  # Speech synthesizers: the training pipeline's smoke test and the fbank test
  espeak-ng flite festival festvox-kallpc16k
  # The HTS voice and the engine that makes it many speakers (tools/train/hts.py)
  festvox-us-slt-hts libhtsengine1
  # Speech codecs the training data passes through (tools/train/codecs.py;
  # libspandsp2 for G.722)
  libgsm1 libopus0 libspandsp2
  # Formatting
  clang-format
  # Fuzzing (make fuzz): clang and its libFuzzer
  clang-14 libfuzzer-14-dev
)

missing=()
for p in "${packages[@]}"; do
  # Installed means dpkg says "install ok installed" for it.
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done
[ ${#missing[@]} -eq 0 ] && exit 0

sudo=""
if [ "$(id -u)" -ne 0 ]; then
  command -v sudo >/dev/null || { echo "install-deps: need root or sudo to install: ${missing[*]}" >&2; exit 1; }
  sudo="sudo"
fi
echo "install-deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
# A fresh machine may have no package lists yet.
if ! $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/tmp/oasr-install-deps.log 2>&1; then
  $sudo apt-get update -qq
  $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/tmp/oasr-install-deps.log 2>&1 \
    || { cat /tmp/oasr-install-deps.log >&2; exit 1; }
fi
