#!/usr/bin/env bash
# Writes Fashion-MNIST (Zalando, 28x28 grayscale, 10 classes) as a PNG image folder in data/fashion-mnist/:
# train/CLASS/NNNNN.png (60,000) and val/CLASS/NNNNN.png (the 10,000 test images), the folders named
# 0-tshirt-top ... 9-ankle-boot so that their sorted order is the data set's label order. The IDX files come
# from Debian's package dataset-fashion-mnist (installed by scripts/install-deps.sh --fashion-mnist). The
# folder appears all at once (written beside, then renamed), and nothing is written when it is already complete.
#   usage: scripts/fetch-fashion-mnist.sh
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
readonly SRC=/usr/share/datasets/fashion-mnist
readonly DEST="$root/data/fashion-mnist"
readonly NAMES=(0-tshirt-top 1-trouser 2-pullover 3-dress 4-coat 5-sandal 6-shirt 7-sneaker 8-bag 9-ankle-boot)

count_pngs() { find "$1" -name '*.png' 2>/dev/null | wc -l; }

if [[ -f $DEST/.complete ]] && [[ $(count_pngs "$DEST/train") == 60000 ]] && [[ $(count_pngs "$DEST/val") == 10000 ]]; then
    exit 0
fi
"$root/scripts/install-deps.sh" --fashion-mnist
[[ -f $SRC/train-images-idx3-ubyte.gz ]] || {
    echo "fetch-fashion-mnist: $SRC/train-images-idx3-ubyte.gz is missing (package dataset-fashion-mnist)" >&2
    exit 1
}
mkdir -p "$root/data"
tmp=$(mktemp -d "$root/data/.fetch-fashion-mnist.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
echo "fetch-fashion-mnist: writing 70,000 PNG files into data/fashion-mnist/ ..."
python3 "$root/scripts/idx_to_image_folder.py" "$SRC/train-images-idx3-ubyte.gz" "$SRC/train-labels-idx1-ubyte.gz" \
    "$tmp/train" "${NAMES[@]}"
python3 "$root/scripts/idx_to_image_folder.py" "$SRC/t10k-images-idx3-ubyte.gz" "$SRC/t10k-labels-idx1-ubyte.gz" \
    "$tmp/val" "${NAMES[@]}"
touch "$tmp/.complete"
rm -rf "$DEST"
mv "$tmp" "$DEST"
echo "fetch-fashion-mnist: data/fashion-mnist/ ready (train: 60,000 images, val: 10,000)"
