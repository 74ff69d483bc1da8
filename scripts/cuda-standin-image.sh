#!/usr/bin/env bash
# Makes a stand-in for the Dockerfile's CUDA_IMAGE (NVIDIA's CUDA devel
# image) from the CUDA toolkit installed on this machine, for builders that
# cannot pull NVIDIA's images, and prints its name:
#
#   podman build --target cuda --build-arg CUDA_IMAGE=$(scripts/cuda-standin-image.sh) .
#
# The Dockerfile takes only files from that image (/usr/local/cuda; nothing
# runs in it), so the stand-in holds only toolkit files, laid out as in
# NVIDIA's images (/usr/local/cuda -> /etc/alternatives/cuda ->
# /usr/local/cuda-X.Y, whose include and lib64 link to targets/x86_64-linux),
# and no operating system: a build that needed anything else from the image
# fails with it. Of the toolkit it keeps what the build uses: the compiler
# (bin, nvvm), the headers, and the runtime, cuBLAS and cuBLASLt libraries
# with their static and CMake parts (about 800 MB).
#
# Idempotent: one image per toolkit version (localhost/cuda-standin:<nvcc
# version>-devel), made once (about a minute).
#
# Variables: CUDA_HOME (the toolkit; default /usr/local/cuda),
# CONTAINER_ENGINE (podman or docker; default podman).
set -euo pipefail
cuda=${CUDA_HOME:-/usr/local/cuda}
engine=${CONTAINER_ENGINE:-podman}
[ -x "$cuda/bin/nvcc" ] || { echo "cuda-standin-image: no CUDA toolkit at $cuda (set CUDA_HOME)" >&2; exit 1; }
# "Cuda compilation tools, release 13.0, V13.0.88"
version=$("$cuda/bin/nvcc" --version | sed -n 's/.*release \([0-9.]*\), V\([0-9.]*\).*/\1 \2/p')
release=${version% *}
image=localhost/cuda-standin:${version#* }-devel
if "$engine" image inspect "$image" >/dev/null 2>&1; then
  echo "$image"
  exit 0
fi

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
root=$work/root
home=$root/usr/local/cuda-$release
target=$home/targets/x86_64-linux
mkdir -p "$target/lib" "$root/etc/alternatives"
cp -a "$cuda/bin" "$cuda/nvvm" "$home/"
cp -a "$(readlink -f "$cuda/include")" "$target/include"
lib=$(readlink -f "$cuda/lib64")
for f in "$lib"/libcudart* "$lib"/libcudadevrt.a "$lib"/libculibos.a "$lib"/libcublas.so* \
  "$lib"/libcublasLt.so* "$lib/stubs" "$lib/cmake"; do
  [ -e "$f" ] && cp -a "$f" "$target/lib/"
done
ln -s targets/x86_64-linux/include "$home/include"
ln -s targets/x86_64-linux/lib "$home/lib64"
ln -s "/usr/local/cuda-$release" "$root/etc/alternatives/cuda"
ln -s /etc/alternatives/cuda "$root/usr/local/cuda"

if ! out=$(tar -C "$root" --owner=0 --group=0 --numeric-owner -cf - . | "$engine" import - "$image" 2>&1); then
  echo "$out" >&2
  exit 1
fi
echo "$image"
