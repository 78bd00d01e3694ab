#!/usr/bin/env bash
# Checks the system packages snug needs to build, test and fetch data, and installs the missing ones.
# Debian/Ubuntu: as root it runs apt-get; otherwise it prints the exact command to run and exits 1.
# With everything present it is a quick no-op (one dpkg-query call, no apt-get update).
#   usage: scripts/install-deps.sh [--check] [--test | --bench | --fuzz | --fashion-mnist]
#     --check: report only, never install; --test: the packages of `make test` too (PyTorch for the ONNX tests);
#     --bench: the packages of `make bench` instead (PyTorch);
#     --fuzz: the packages of `make fuzz` too (Clang 16 with libFuzzer, its sanitizer runtimes and OpenMP);
#     --fashion-mnist: the package of Fashion-MNIST's IDX files instead (scripts/fetch-fashion-mnist.sh)
set -euo pipefail

# python3: tests/cli/test_compare.sh runs bench/compare.py's judgement on made-up results; python3-dev, -numpy,
# -setuptools, -pip and -pytest: the Python package in python/ (built, installed and tested offline);
# libprotobuf-c-dev, protobuf-c-compiler and libonnx-dev: the ONNX loader's parser, generated from libonnx-dev's
# onnx.proto by protoc-c at build time
BUILD_PACKAGES=(build-essential cmake pkg-config libopenblas-openmp-dev libcmocka-dev libcjson-dev libinih-dev libpng-dev libjpeg62-turbo-dev npm libopenmpi-dev openmpi-bin python3 python3-dev python3-numpy python3-setuptools python3-pip python3-pytest libprotobuf-c-dev protobuf-c-compiler libonnx-dev)
# make test also: the ONNX tests export torchvision's resnet18 and the zoo's unet and gpt twins with
# torch.onnx.export and check snug's gradients and saved weights against PyTorch's (scripts/export_onnx.py,
# scripts/gpt_twin.py); python3-onnx writes the committed models of tests/data/onnx/ (scripts/export_onnx.py)
TEST_PACKAGES=(python3-onnx python3-torch python3-torchvision)
# make bench runs the workloads in PyTorch too, with Debian's build (bench/pytorch_bench.py)
BENCH_PACKAGES=(python3 python3-torch)
# make fuzz builds the library and tests/fuzz/ with Clang's libFuzzer (scripts/fuzz.sh); only that target needs them
FUZZ_PACKAGES=(clang-16 libfuzzer-16-dev libclang-rt-16-dev libomp-16-dev)
# the reference image folder of docs/data.md, written out as PNGs by scripts/fetch-fashion-mnist.sh
FASHION_PACKAGES=(dataset-fashion-mnist)

check_only=0
PACKAGES=("${BUILD_PACKAGES[@]}")
for arg in "$@"; do
    case "$arg" in
        --check) check_only=1 ;;
        --test) PACKAGES=("${BUILD_PACKAGES[@]}" "${TEST_PACKAGES[@]}") ;;
        --bench) PACKAGES=("${BENCH_PACKAGES[@]}") ;;
        --fuzz) PACKAGES=("${BUILD_PACKAGES[@]}" "${FUZZ_PACKAGES[@]}") ;;
        --fashion-mnist) PACKAGES=("${FASHION_PACKAGES[@]}") ;;
        -h|--help) sed -n '2,9p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
        *) echo "install-deps: unknown option '$arg' (expected --check, --test, --bench, --fuzz, --fashion-mnist or nothing)" >&2; exit 2 ;;
    esac
done
readonly PACKAGES

# Without dpkg there is no package database to ask: check the tools and pkg-config modules themselves.
check_without_dpkg() {
    local missing=()
    local tool
    for tool in cc cmake pkg-config npm python3 protoc-c; do
        command -v "$tool" >/dev/null 2>&1 || missing+=("$tool")
    done
    if command -v pkg-config >/dev/null 2>&1; then
        pkg-config --exists openblas || missing+=("OpenBLAS (pkg-config module openblas, OpenMP build)")
        pkg-config --exists cmocka || missing+=("cmocka (pkg-config module cmocka)")
        pkg-config --exists libcjson || missing+=("cJSON (pkg-config module libcjson)")
        pkg-config --exists libpng || missing+=("libpng (pkg-config module libpng)")
        pkg-config --exists libjpeg || missing+=("libjpeg (pkg-config module libjpeg, e.g. libjpeg-turbo)")
        pkg-config --exists inih || missing+=("libinih (pkg-config module inih)")
        pkg-config --exists libprotobuf-c || missing+=("protobuf-c (pkg-config module libprotobuf-c)")
    fi
    if ((${#missing[@]})); then
        echo "install-deps: not a Debian-like system (no dpkg-query); install these with your package manager:" >&2
        printf '  - %s\n' "${missing[@]}" >&2
        exit 1
    fi
}

missing_debian_packages() {
    # One dpkg-query for all packages; unknown packages print nothing (and make it exit 1, hence || true).
    local installed
    installed=$(dpkg-query -W -f='${Package} ${db:Status-Status}\n' "${PACKAGES[@]}" 2>/dev/null \
        | awk '$2 == "installed" { print $1 }' || true)
    local p
    for p in "${PACKAGES[@]}"; do
        # node and npm are often installed outside Debian's packages (NodeSource, nvm): a working npm counts.
        if [[ $p == npm ]] && command -v npm >/dev/null 2>&1; then
            continue
        fi
        grep -qxF "$p" <<<"$installed" || echo "$p"
    done
}

if ! command -v dpkg-query >/dev/null 2>&1; then
    check_without_dpkg
    exit 0
fi

mapfile -t missing < <(missing_debian_packages)
if ((${#missing[@]} == 0)); then
    exit 0
fi

echo "install-deps: missing packages: ${missing[*]}" >&2
install_cmd=(apt-get install -y --no-install-recommends "${missing[@]}")
if ((check_only)); then
    echo "install-deps: to install them: sudo apt-get update && sudo ${install_cmd[*]}" >&2
    exit 1
fi
if [[ $(id -u) -ne 0 ]]; then
    echo "install-deps: not root, so not installing. Run:" >&2
    echo "  sudo apt-get update && sudo ${install_cmd[*]}" >&2
    exit 1
fi

export DEBIAN_FRONTEND=noninteractive
apt-get update
"${install_cmd[@]}"
echo "install-deps: installed ${missing[*]}"
