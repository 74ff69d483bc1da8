#!/usr/bin/env bash
# Schema and policy check of deploy/kubernetes with npm's kubernetes-models
# (validate_manifests.mjs). Installs the pinned packages into WORK_DIR once.
# Exit 77 (ctest: skipped), saying why, without node and npm or when the
# npm registry cannot be reached.
#   usage: check_manifests.sh SOURCE_DIR WORK_DIR
set -euo pipefail
src=$(cd "$1" && pwd)
work=$2
for tool in node npm; do
  command -v "$tool" >/dev/null || { echo "SKIPPED: $tool is not installed"; exit 77; }
done
mkdir -p "$work"
cp "$src/tests/deploy/package.json" "$src/tests/deploy/validate_manifests.mjs" "$work/"
if [ ! -d "$work/node_modules/kubernetes-models" ]; then
  if ! (cd "$work" && timeout 300 npm install --no-audit --no-fund --loglevel=error >npm.log 2>&1); then
    echo "SKIPPED: npm install of kubernetes-models failed (no registry?):"
    tail -n 5 "$work/npm.log"
    exit 77
  fi
fi
cd "$work"
exec node validate_manifests.mjs $(find "$src/deploy/kubernetes" -name '*.yaml' | sort)
