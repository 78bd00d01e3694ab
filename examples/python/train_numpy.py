#!/usr/bin/env python3
"""Trains the MNIST CNN from numpy arrays, borrowed by snug without a copy, inside a 64 MiB budget.

usage: train_numpy.py [MNIST_DIR] [STEPS]     (default data/mnist, 100 steps)"""
import pathlib
import sys

import numpy as np

import snug


def read_idx(path):
    raw = pathlib.Path(path).read_bytes()
    dims = raw[3]
    shape = tuple(int.from_bytes(raw[4 + 4 * i:8 + 4 * i], "big") for i in range(dims))
    return np.frombuffer(raw, np.uint8, offset=4 + 4 * dims).reshape(shape)


def mnist(directory, part):
    x = read_idx(f"{directory}/{part}-images-idx3-ubyte").astype(np.float32) / np.float32(255)
    x = (x - np.float32(0.1307)) / np.float32(0.3081)
    return x.reshape(-1, 1, 28, 28), read_idx(f"{directory}/{part}-labels-idx1-ubyte").astype(np.int32)


directory = sys.argv[1] if len(sys.argv) > 1 else "data/mnist"
steps = int(sys.argv[2]) if len(sys.argv) > 2 else 100
x, y = mnist(directory, "train")
tx, ty = mnist(directory, "t10k")
train, test = snug.data.arrays(x, y), snug.data.arrays(tx, ty)

model = snug.Model("cnn")
sgd = snug.SGD(lr=0.05, momentum=0.9)
plan = snug.plan(model, batch=64, mem="64MiB", optimizer=sgd, data=train)
print(repr(plan))
trainer = snug.Trainer(model, plan, optimizer=sgd, schedule=snug.Cosine(warmup=20), seed=1)
history = trainer.fit(train, steps=steps, eval_data=test.subset(1000), eval_every=50)
print(f"{len(history)} steps, loss {history.loss[0]:.3f} -> {history.loss[-1]:.3f}")
print("test accuracy: {:.2%}".format(trainer.evaluate(test)["accuracy"]))
