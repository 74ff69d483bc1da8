#!/usr/bin/env bash
# Packs binaries built here for a GPU machine that lacks this machine's
# libraries (Abseil, spdlog, fmt, OpenBLAS, soxr...): the binaries plus every
# shared library they resolve outside glibc, libstdc++ and CUDA.
#   tools/gpu/make_bundle.sh BUNDLE_DIR BINARY...
set -euo pipefail
bundle=$1; shift
rm -rf "$bundle"; mkdir -p "$bundle/bin" "$bundle/lib"
for bin in "$@"; do
  cp "$bin" "$bundle/bin/"
  ldd "$bin" | awk '/=> \// {print $3}' | while read -r lib; do
    case "$(basename "$lib")" in
      libc.so*|libm.so*|libpthread.so*|libdl.so*|librt.so*|libgcc_s.so*|libstdc++.so*|ld-linux*) ;;
      libcuda*|libcublas*|libcudnn*|libnvidia*|libnvrtc*) ;;
      *) cp -Ln "$lib" "$bundle/lib/" ;;
    esac
  done
done
du -sh "$bundle"
