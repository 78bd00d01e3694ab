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

# The Python package, installed with pip against the staged library exactly as `make python` installs it, then
# the examples of examples/python/ run with it (the IDX files of MNIST from data/mnist, as `make test` fetches).
python=/usr/bin/python3
[ -x "$python" ] || python=python3
if "$python" -c "import numpy, setuptools" 2>/dev/null && "$python" -m pip --version >/dev/null 2>&1; then
    site="$stage/lib/$("$python" -c 'import sys; print("python%d.%d" % sys.version_info[:2])')/dist-packages"
    echo "examples: pip install ./python into $site"
    PKG_CONFIG_PATH="$stage/lib/pkgconfig" "$python" -m pip install -q --no-build-isolation --no-deps --upgrade \
        --target "$site" ./python 2>&1 | grep -v "Running pip as the 'root' user" || true
    [ -f "$site/snug/__init__.py" ] || { echo "examples: pip install ./python failed" >&2; exit 1; }
    for example in "plan_budget.py cnn 64MiB 64" "train_numpy.py data/mnist 30" "resume.py" "to_torch.py"; do
        echo "examples: python3 examples/python/$example"
        # shellcheck disable=SC2086 # the arguments are words
        PYTHONPATH="$site" "$python" examples/python/$example
    done
else
    echo "examples: $python lacks numpy, pip or setuptools (make deps): the Python examples are skipped"
fi
echo "examples: all built and ran"
