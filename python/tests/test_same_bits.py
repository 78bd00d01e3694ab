"""Same bits: trainer.fit on MNIST as numpy arrays (read from the IDX files, normalised as the library does) with
the settings of `make demo` saves the weights `snug train` saves with the same flags, byte for byte. The demo's
epoch is cut to STEPS optimizer steps on both sides (--max-steps / steps=), so the cosine schedule is the same
short one on both; its evaluations (every 100 steps, on 1,000 test images) are asked for on both sides too."""

import json
import struct
import subprocess

import snug
from conftest import mnist_arrays

STEPS = 60


def split_safetensors(path):
    raw = path.read_bytes()
    n = struct.unpack("<Q", raw[:8])[0]
    return json.loads(raw[8:8 + n]), raw[8 + n:]


def test_fit_saves_the_bits_snug_train_saves(tmp_path, mnist_dir, snug_cli):
    cli_file = tmp_path / "cli.safetensors"
    subprocess.run([str(snug_cli), "train", "--model", "cnn", "--data", "mnist", "--data-dir", str(mnist_dir),
                    "--batch", "64", "--micro-batch", "16", "--mem", "64MiB", "--epochs", "1", "--optim", "sgd",
                    "--lr", "0.05", "--momentum", "0.9", "--schedule", "cosine", "--warmup", "100", "--seed", "1",
                    "--eval-every", "100", "--eval-samples", "1000", "--max-steps", str(STEPS), "--progress", "off",
                    "--save", str(cli_file)], check=True, capture_output=True)

    x, y = mnist_arrays(mnist_dir, "train")
    tx, ty = mnist_arrays(mnist_dir, "t10k")
    train = snug.data.arrays(x, y, classes=10)
    test = snug.data.arrays(tx, ty, classes=10).subset(1000)
    model = snug.Model("cnn")
    sgd = snug.SGD(lr=0.05, momentum=0.9)
    plan = snug.plan(model, batch=64, micro_batch=16, mem="64MiB", optimizer=sgd, data=train)
    trainer = snug.Trainer(model, plan, optimizer=sgd, schedule=snug.Cosine(warmup=100), seed=1)
    history = trainer.fit(train, epochs=1, steps=STEPS, eval_data=test, eval_every=100, progress=False)
    assert len(history) == STEPS
    py_file = tmp_path / "py.safetensors"
    trainer.save(py_file)

    cli_header, cli_data = split_safetensors(cli_file)
    py_header, py_data = split_safetensors(py_file)
    assert py_data == cli_data  # every tensor, bit for bit
    cli_meta, py_meta = cli_header.pop("__metadata__"), py_header.pop("__metadata__")
    assert py_header == cli_header  # names, dtypes, shapes, offsets
    # the CLI's MNIST says its normalisation, which the weights keep (numpy arrays say none), and so the checksum
    # of the whole file differs too
    assert "normalise" in cli_meta and "normalise" not in py_meta
    for key in ("normalise", "crc32c"):
        cli_meta.pop(key, None), py_meta.pop(key, None)
    assert py_meta == cli_meta
