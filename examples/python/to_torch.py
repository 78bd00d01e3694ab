#!/usr/bin/env python3
"""Trains a small MLP in snug, then loads its state_dict into the equivalent torch.nn.Module (names and shapes
are PyTorch's) and checks that both give the same logits. Needs PyTorch (Debian: python3-torch)."""
import sys

import numpy as np

import snug

try:
    import torch
except ImportError:
    print("to_torch: PyTorch is not installed (apt-get install python3-torch): skipped")
    sys.exit(0)

rng = np.random.default_rng(0)
x = rng.uniform(-1, 1, size=(512, 1, 28, 28)).astype(np.float32)
y = (np.arange(512) % 10).astype(np.int32)
model = snug.Model("mlp")
trainer = snug.Trainer(model, snug.plan(model, batch=64))
trainer.fit(snug.data.arrays(x, y), steps=10, progress=False)

net = torch.nn.Sequential()
for name, layer in [("flatten", torch.nn.Flatten()), ("fc1", torch.nn.Linear(784, 1024)), ("relu1", torch.nn.ReLU()),
                    ("fc2", torch.nn.Linear(1024, 1024)), ("relu2", torch.nn.ReLU()), ("fc3", torch.nn.Linear(1024, 10))]:
    net.add_module(name, layer)
net.load_state_dict({k: torch.from_numpy(v) for k, v in trainer.state_dict().items()})
with torch.no_grad():
    diff = np.abs(net(torch.from_numpy(x)).numpy() - trainer.predict(x)).max()
print(f"largest logit difference, snug against PyTorch: {diff:.2e}")
sys.exit(0 if diff < 1e-3 else 1)
