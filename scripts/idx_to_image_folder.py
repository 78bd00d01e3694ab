#!/usr/bin/env python3
"""Writes an IDX image/label pair (gzipped or not) as an image folder: OUT/CLASS/NNNNN.png, one 8-bit grayscale
PNG per image, the folder of label k named by the k-th name given. Standard library only (zlib, struct).

usage: idx_to_image_folder.py IMAGES LABELS OUT NAME0 NAME1 ...
"""
import gzip
import os
import struct
import sys
import zlib


def read_idx(path):
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rb") as f:
        data = f.read()
    zero, kind, rank = struct.unpack(">HBB", data[:4])
    if zero != 0 or kind != 0x08:
        sys.exit(f"{path}: not an IDX file of unsigned bytes (magic {data[:4].hex()})")
    dims = struct.unpack(">" + "I" * rank, data[4:4 + 4 * rank])
    body = data[4 + 4 * rank:]
    count = 1
    for d in dims:
        count *= d
    if len(body) != count:
        sys.exit(f"{path}: {len(body)} bytes of data, the header says {count}")
    return dims, body


def png_chunk(kind, payload):
    return struct.pack(">I", len(payload)) + kind + payload + struct.pack(">I", zlib.crc32(kind + payload))


def gray_png(pixels, height, width):
    rows = b"".join(b"\x00" + pixels[r * width:(r + 1) * width] for r in range(height))  # filter 0 per row
    header = struct.pack(">IIBBBBB", width, height, 8, 0, 0, 0, 0)  # 8-bit grayscale
    return (b"\x89PNG\r\n\x1a\n" + png_chunk(b"IHDR", header) + png_chunk(b"IDAT", zlib.compress(rows, 9))
            + png_chunk(b"IEND", b""))


def main():
    if len(sys.argv) < 5:
        sys.exit(__doc__)
    images, labels, out, names = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4:]
    (n, h, w), pixels = read_idx(images)
    (n_labels,), classes = read_idx(labels)
    if n != n_labels:
        sys.exit(f"{images} holds {n} images but {labels} {n_labels} labels")
    for name in names:
        os.makedirs(os.path.join(out, name), exist_ok=True)
    size = h * w
    for i in range(n):
        label = classes[i]
        if label >= len(names):
            sys.exit(f"{labels}: label {label} of image {i} has no class name ({len(names)} given)")
        with open(os.path.join(out, names[label], f"{i:05d}.png"), "wb") as f:
            f.write(gray_png(pixels[i * size:(i + 1) * size], h, w))


if __name__ == "__main__":
    main()
