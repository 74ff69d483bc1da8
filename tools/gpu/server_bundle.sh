#!/usr/bin/env bash
# The oasr-server + oasr-client bundle for the gRPC runs on the GPU machine
# (grpc_stage_probe.sh, grpc_capacity.sh, grpc_hold.sh), small enough to
# travel beside the repository in a device call (~8 MB):
#   tools/gpu/server_bundle.sh BUILD_DIR NAME
# writes .devrun/NAME.tar.xz (the folder NAME inside) and keeps an unstripped
# copy in .devrun/NAME-unstripped for reading profiles (google-pprof). The
# build must be configured with -DOASR_WITH_OPENBLAS=OFF (OpenBLAS alone is
# 35 MB; the GPU path does not use it). libssl, libcrypto, libz and libgomp
# are left out: the GPU machine (Ubuntu 24.04) has its own. gperftools'
# libprofiler and libunwind go in NAME/prof (PROFILER=/tmp/NAME/prof/libprofiler.so.0
# there), taken from Debian's packages with apt-get download.
set -euo pipefail
build=$1 name=$2
root=$(cd "$(dirname "$0")/../.." && pwd)
out=$root/.devrun
server=$build/server/oasr-server client=$build/server/oasr-client
if ldd "$server" | grep -q libopenblas; then
  echo "server_bundle: $server links OpenBLAS; configure $build with -DOASR_WITH_OPENBLAS=OFF" >&2
  exit 2
fi
mkdir -p "$out"
rm -rf "${out:?}/$name" "$out/$name-unstripped" "$out/$name.tar.xz"
bash "$root/tools/gpu/make_bundle.sh" "$out/$name" "$server" "$client" > /dev/null
rm -f "$out/$name"/lib/{libssl.so.3,libcrypto.so.3,libz.so.1,libgomp.so.1}
cp -r "$out/$name" "$out/$name-unstripped"
debs=$(mktemp -d)
(cd "$debs" && apt-get download -qq libgoogle-perftools4 libunwind8 > /dev/null 2>&1) || true
mkdir -p "$out/$name/prof"
for deb in "$debs"/*.deb; do
  [ -e "$deb" ] && dpkg -x "$deb" "$debs/x"
done
if [ -e "$debs/x/usr/lib/x86_64-linux-gnu/libprofiler.so.0" ]; then
  cp -L "$debs"/x/usr/lib/x86_64-linux-gnu/{libprofiler.so.0,libunwind.so.8} "$out/$name/prof/"
else
  echo "server_bundle: no gperftools (apt-get download failed): PROFILER will not work" >&2
fi
rm -rf "$debs"
strip --strip-unneeded "$out/$name"/bin/* "$out/$name"/lib/* "$out/$name"/prof/* 2>/dev/null || true
(cd "$out" && XZ_OPT="-9e -T2" tar -cJf "$name.tar.xz" "$name")
rm -rf "${out:?}/$name"
ls -la "$out/$name.tar.xz"
