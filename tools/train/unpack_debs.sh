#!/usr/bin/env bash
# Unpacks the .debs fetch_debs.sh downloaded into a folder (never into /) and
# prints the environment that makes the synthesizers run from there.
#
#   eval "$(tools/train/unpack_debs.sh DEBS_DIR ROOT)"
#
# After the eval, espeak-ng, flite, festival and text2wave are on PATH.
set -euo pipefail

debs="$1"
root="$2"
mkdir -p "$root"
if [ ! -f "$root/.unpacked" ]; then
  for d in "$debs"/*.deb; do dpkg-deb -x "$d" "$root" 2>/dev/null || dpkg -x "$d" "$root"; done
  touch "$root/.unpacked"
fi
lib="$root/usr/lib/x86_64-linux-gnu"
echo "export PATH=\"$root/usr/bin:\$PATH\""
echo "export LD_LIBRARY_PATH=\"$lib:$lib/pulseaudio:$root/lib/x86_64-linux-gnu:\${LD_LIBRARY_PATH:-}\""
echo "export ESPEAK_DATA_PATH=\"$lib/espeak-ng-data\""
# festival finds its Scheme library and voices through --libdir and
# --datadir; synth.py passes both from this variable.
echo "export OASR_FESTIVAL_LIBDIR=\"$root/usr/share/festival\""
