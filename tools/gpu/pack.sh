#!/usr/bin/env bash
# Packs a GPU bundle (make_bundle.sh) of BINARY... into OUT_DIR/bundle.tar.xz,
# stripped and compressed to fit a device call's transfer budget beside the
# repository. On the GPU machine: tar -xJf OUT_DIR/bundle.tar.xz -C /tmp.
#   tools/gpu/pack.sh OUT_DIR BINARY...
set -euo pipefail
out=$1; shift
here=$(cd "$(dirname "$0")" && pwd)
rm -rf "$out/bundle" "$out/bundle.tar.xz"
mkdir -p "$out"
bash "$here/make_bundle.sh" "$out/bundle" "$@" > /dev/null
strip --strip-unneeded "$out/bundle/bin/"* "$out/bundle/lib/"* 2>/dev/null || true
tar -C "$out" -cf - bundle | xz -9 -T2 > "$out/bundle.tar.xz"
rm -rf "$out/bundle"
du -h "$out/bundle.tar.xz"
