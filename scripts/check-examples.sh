#!/usr/bin/env bash
# Installs the Release build into a staging prefix, builds examples/ against it through pkg-config exactly as a
# user of the installed library would, and runs both programs. Usage: scripts/check-examples.sh BUILD_DIR
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
build=${1:-build}
stage="$PWD/$build/stage"
out="$PWD/$build/examples"
rm -rf "$stage" "$out"
cmake --install "$build" --prefix "$stage" >/dev/null
export PKG_CONFIG_PATH="$stage/lib/pkgconfig"
echo "examples: building against $(pkg-config --modversion snug) installed in $stage"
make -s -C examples OUT="$out"
# No LD_LIBRARY_PATH: the programs must find libsnug.so through the run path snug.pc links them with.
unset LD_LIBRARY_PATH
echo "examples: own_data"
"$out/own_data"
echo "examples: plan_model share/snug/models/unet.ini 256MiB 8 (the installed zoo file)"
"$out/plan_model" "$stage/share/snug/models/unet.ini" 256MiB 8
echo "examples: plan_model cnn 1MiB (nothing fits: exit status 3)"
set +e
"$out/plan_model" cnn 1MiB 256
rc=$?
set -e
[ "$rc" -eq 3 ] || { echo "examples: plan_model cnn 1MiB exited $rc, expected 3" >&2; exit 1; }
echo "examples: all built and ran"
