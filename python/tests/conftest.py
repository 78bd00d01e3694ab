"""Where the tests find what they compare against: the MNIST IDX files (SNUG_DATA_DIR, else data/mnist) and the
`snug` command of the same build (SNUG_CLI, else build/snug); CTest sets both."""

import os
import pathlib

import numpy as np
import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]


@pytest.fixture(scope="session")
def mnist_dir():
    d = pathlib.Path(os.environ.get("SNUG_DATA_DIR", ROOT / "data" / "mnist"))
    if not (d / "train-images-idx3-ubyte").exists():
        pytest.skip(f"no MNIST IDX files in {d} (make data-mnist)")
    return d


@pytest.fixture(scope="session")
def snug_cli():
    cli = pathlib.Path(os.environ.get("SNUG_CLI", ROOT / "build" / "snug"))
    if not cli.exists():
        pytest.skip(f"no snug command at {cli} (make build)")
    return cli


def read_idx(path):
    """An IDX file as a numpy array (big-endian header: magic, then one uint32 per dimension)."""
    raw = pathlib.Path(path).read_bytes()
    dims = raw[3]
    shape = tuple(int.from_bytes(raw[4 + 4 * i:8 + 4 * i], "big") for i in range(dims))
    return np.frombuffer(raw, np.uint8, offset=4 + 4 * dims).reshape(shape)


def mnist_arrays(directory, part="train"):
    """MNIST as the library reads it: (n, 1, 28, 28) float32 normalised in float32 as (x/255 - 0.1307) / 0.3081,
    and int32 labels."""
    images = read_idx(pathlib.Path(directory) / f"{part}-images-idx3-ubyte")
    labels = read_idx(pathlib.Path(directory) / f"{part}-labels-idx1-ubyte")
    x = (images.astype(np.float32) / np.float32(255) - np.float32(0.1307)) / np.float32(0.3081)
    return np.ascontiguousarray(x.reshape(-1, 1, 28, 28), np.float32), labels.astype(np.int32)


def resident_bytes():
    for line in open("/proc/self/status"):
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    pytest.skip("/proc/self/status has no VmRSS")
