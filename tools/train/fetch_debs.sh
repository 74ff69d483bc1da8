#!/usr/bin/env bash
# Downloads (on a Debian 12 machine with apt) the .deb closure of the speech
# synthesizers and codecs the training data is made with, for a GPU machine that has no
# package manager and no network. Base libraries every Ubuntu/Debian system
# already has (libc6, libstdc++6, ...) are left out: unpacked copies of those
# would shadow the host's own and break its programs.
#
#   tools/train/fetch_debs.sh [DEST]      (default: <repo>/.devdebs, git-ignored)
#
# The GPU side unpacks them with tools/train/unpack_debs.sh.
set -euo pipefail

here="$(cd "$(dirname "$0")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
dest="${1:-$repo/.devdebs}"

# The synthesizers and every English voice Debian 12 packages for them.
roots=(espeak-ng espeak-ng-data flite festival festlex-cmu festlex-poslex
       festvox-kallpc16k festvox-kdlpc16k festvox-us-slt-hts
       libhtsengine1      # the HTS voice's speakers (tools/train/hts.py)
       libgsm1 libopus0   # and the codecs of tools/train/codecs.py: GSM, Opus,
       libspandsp2)       # G.722 (it brings libtiff6 and its image libraries)
# Present on any Debian/Ubuntu base system, or only needed by maintainer
# scripts that never run here (adduser, dpkg, debconf, ...).
exclude=" adduser alsa-utils cdebconf debconf dpkg gcc-12-base install-info kmod
 libacl1 libaudit-common libaudit1 libbz2-1.0 libc6 libcap-ng0 libcap2 libcrypt1
 libdb5.3 libdebian-installer4 libelogind0 libgcc-s1 libgcrypt20 libgpg-error0
 libkmod2 liblz4-1 liblzma5 libmd0 libncursesw6 libnewt0.52 libpam-modules
 libpam-modules-bin libpam0g libpcre2-8-0 libselinux1 libsemanage-common
 libsemanage2 libsepol2 libslang2 libssl3 libstdc++6 libsystemd0 libtextwrap1
 libtinfo6 libzstd1 lsb-base passwd readline-common sgml-base sysvinit-utils tar
 zlib1g "

mapfile -t closure < <(
  apt-cache depends --recurse --no-recommends --no-suggests --no-conflicts \
      --no-breaks --no-replaces --no-enhances "${roots[@]}" |
    grep -v '^ ' | grep -v '^<' | sort -u)
exclude=" $(echo $exclude) "
wanted=()
for p in "${closure[@]}"; do
  case "$exclude" in *" $p "*) ;; *) wanted+=("$p") ;; esac
done

mkdir -p "$dest"
cd "$dest"
rm -f ./*.deb
apt-get download "${wanted[@]}" >/dev/null
printf '%s\n' "${wanted[@]}" > packages.txt
echo "fetch_debs: ${#wanted[@]} packages, $(du -sh --apparent-size . | cut -f1) in $dest"
