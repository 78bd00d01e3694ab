#!/usr/bin/env python3
"""Ctrl-C, then resume: a run stopped mid-way (here by its own callback sending SIGINT, as a user's Ctrl-C
would) leaves its state; Trainer.resume continues it to the weights of a run never stopped, bit for bit.

usage: resume.py [STATE_DIR]     (default a temporary folder)"""
import os
import signal
import sys
import tempfile

import numpy as np

import snug

rng = np.random.default_rng(0)
x = rng.uniform(-1, 1, size=(2000, 1, 28, 28)).astype(np.float32)
y = (np.arange(2000) % 10).astype(np.int32)
data = snug.data.arrays(x, y)
state = sys.argv[1] if len(sys.argv) > 1 else tempfile.mkdtemp()


def trainer():
    model = snug.Model("mlp")
    return snug.Trainer(model, snug.plan(model, batch=64, mem="64MiB"), schedule=snug.Cosine(warmup=5))


def stop_at_10(step):
    if step["step"] == 10:
        os.kill(os.getpid(), signal.SIGINT)


try:
    trainer().fit(data, steps=30, state=state, progress=stop_at_10)
except KeyboardInterrupt as e:
    print(e)
resumed = snug.Trainer.resume(state)
resumed.fit(data)  # the remaining steps, to the run's 30
straight = trainer()
straight.fit(data, steps=30, progress=False)
same = all(a.tobytes() == b.tobytes()
           for a, b in zip(straight.state_dict().values(), resumed.state_dict().values()))
print("resumed weights equal the uninterrupted run's:", same)
sys.exit(0 if same else 1)
