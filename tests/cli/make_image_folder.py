#!/usr/bin/env python3
"""Writes a small labelled image folder for the CLI tests: DIR/{train,val}/CLASS/NNN.png, 8-bit grayscale PNGs of
SIZE x SIZE, each class a different bright blob position over noise, so a small model learns it in a few steps.
Standard library only.

usage: make_image_folder.py DIR CLASSES TRAIN_PER_CLASS VAL_PER_CLASS SIZE
"""
import os
import random
import struct
import sys
import zlib


def png(pixels, size):
    rows = b"".join(b"\x00" + bytes(pixels[r * size:(r + 1) * size]) for r in range(size))
    chunk = lambda kind, data: (struct.pack(">I", len(data)) + kind + data +
                                struct.pack(">I", zlib.crc32(kind + data)))
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", size, size, 8, 0, 0, 0, 0)) +
            chunk(b"IDAT", zlib.compress(rows)) + chunk(b"IEND", b""))


def image(rng, cls, classes, size):
    cy = size // 2 + int((size // 3) * __import__("math").sin(6.283 * cls / classes))
    cx = size // 2 + int((size // 3) * __import__("math").cos(6.283 * cls / classes))
    return [min(255, rng.randrange(40) + (200 if (y - cy) ** 2 + (x - cx) ** 2 <= (size // 6) ** 2 else 0))
            for y in range(size) for x in range(size)]


def main():
    root, classes, n_train, n_val, size = sys.argv[1], *map(int, sys.argv[2:6])
    rng = random.Random(7)
    for part, n in (("train", n_train), ("val", n_val)):
        for c in range(classes):
            folder = os.path.join(root, part, f"class-{c}")
            os.makedirs(folder, exist_ok=True)
            for i in range(n):
                with open(os.path.join(folder, f"{i:03d}.png"), "wb") as f:
                    f.write(png(image(rng, c, classes, size), size))


if __name__ == "__main__":
    main()
