#!/usr/bin/env python3
"""Training from Python against `snug train`: one process trains MODEL at BATCH for STEPS optimizer steps on MNIST,
from numpy arrays through the Python package (`py`, which prints the seconds `fit` took), or prints the `snug
train` command with the same settings (`cli`), so that both can be timed as whole processes, turn by turn; `pairs
N` runs N pairs of the two in turn and compares the training alone: `fit`'s seconds against the seconds the CLI's
last line reports for its steps (both from the first step to the last, without reading the files):

    PYTHONPATH=build/python python3 bench/bench_python.py pairs mlp 256 300 data/mnist 5

    PYTHONPATH=build/python /usr/bin/time -v python3 bench/bench_python.py py mlp 256 300 data/mnist
    /usr/bin/time -v $(python3 bench/bench_python.py cli mlp 256 300 data/mnist)

Both read the same IDX files, train with SGD (lr 0.05, momentum 0.9, seed 1) without evaluation and save
nothing: the difference is the Python layer (reading the files with numpy, the calls into the library)."""
import os
import pathlib
import re
import statistics
import subprocess
import sys
import time


def read_idx(path):
    import numpy as np
    raw = pathlib.Path(path).read_bytes()
    dims = raw[3]
    shape = tuple(int.from_bytes(raw[4 + 4 * i:8 + 4 * i], "big") for i in range(dims))
    return np.frombuffer(raw, np.uint8, offset=4 + 4 * dims).reshape(shape)


def train_from_python(model_name, batch, steps, directory):
    import numpy as np
    import snug
    x = read_idx(f"{directory}/train-images-idx3-ubyte").astype(np.float32) / np.float32(255)
    x = ((x - np.float32(0.1307)) / np.float32(0.3081)).reshape(-1, 1, 28, 28)
    y = read_idx(f"{directory}/train-labels-idx1-ubyte").astype(np.int32)
    train = snug.data.arrays(x, y, classes=10)
    model = snug.Model(model_name)
    sgd = snug.SGD(lr=0.05, momentum=0.9)
    plan = snug.plan(model, batch=batch, optimizer=sgd, data=train)
    trainer = snug.Trainer(model, plan, optimizer=sgd, seed=1)
    start = time.perf_counter()
    trainer.fit(train, epochs=1000, steps=steps, progress=False)
    print(f"fit_s {time.perf_counter() - start:.4f}")


def cli_command(model_name, batch, steps, directory):
    return (f"build/snug train --model {model_name} --data mnist --data-dir {directory} --batch {batch} "
            f"--optim sgd --lr 0.05 --momentum 0.9 --seed 1 --epochs 1000 --max-steps {steps} "
            f"--evaluate off --progress off")


def training_seconds(command, pattern):
    out = subprocess.run(command, check=True, capture_output=True, text=True, env=os.environ).stdout
    return float(re.search(pattern, out).group(1))


def pairs(name, batch, steps, directory, n):
    py = [sys.executable, __file__, "py", name, str(batch), str(steps), directory]
    cli = cli_command(name, batch, steps, directory).split()
    ratios = []
    for i in range(n):
        # Alternate which goes first, so that what a process leaves behind (page cache, clocks, the other
        # core's work) weighs on both sides alike.
        if i % 2:
            c = training_seconds(cli, r"trained \d+ steps .* \(([0-9.]+) s\)")
            p = training_seconds(py, r"fit_s ([0-9.]+)")
        else:
            p = training_seconds(py, r"fit_s ([0-9.]+)")
            c = training_seconds(cli, r"trained \d+ steps .* \(([0-9.]+) s\)")
        ratios.append(p / c)
        print(f"pair {i + 1}: python {p:.3f} s, snug train {c:.3f} s, ratio {p / c:.4f}", flush=True)
    print(f"{name} batch {batch}, {steps} steps: median python / snug train {statistics.median(ratios):.4f} "
          f"(min {min(ratios):.4f}, max {max(ratios):.4f})")


if __name__ == "__main__":
    usage = "usage: bench_python.py py|cli MODEL BATCH STEPS MNIST_DIR | pairs MODEL BATCH STEPS MNIST_DIR N"
    if len(sys.argv) < 6 or sys.argv[1] not in ("py", "cli", "pairs") or (sys.argv[1] == "pairs") != (len(sys.argv) == 7):
        sys.exit(usage)
    how, name, batch, steps, directory = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), sys.argv[5]
    if how == "py":
        train_from_python(name, batch, steps, directory)
    elif how == "cli":
        print(cli_command(name, batch, steps, directory))
    else:
        pairs(name, batch, steps, directory, int(sys.argv[6]))
