"""Models, plans and errors: the names and shapes PyTorch uses, `snug plan`'s report to the byte, a shortfall whose
figures are the ways out, and every library error as a snug.Error subclass with the library's message."""

import json
import os
import subprocess

import numpy as np
import pytest

import snug


def test_zoo_and_parameters():
    assert "cnn" in snug.models() and "mlp" in snug.models()
    m = snug.Model("cnn")
    assert m.input_shape == (1, 28, 28) and m.output_shape == (10,)
    shapes = m.parameter_shapes()
    assert shapes["conv1.weight"] == (32, 1, 3, 3) and shapes["fc2.weight"] == (10, 128)
    params = m.parameters()
    assert list(params) == list(shapes)
    for name, value in params.items():
        assert value.dtype == np.float32 and value.shape == shapes[name]
    # PyTorch's default initialisation of a conv weight: U(-1/sqrt(fan_in), 1/sqrt(fan_in)), fan_in 9
    assert np.abs(params["conv1.weight"]).max() <= 1 / 3 + 1e-7
    assert "421,642 parameters" in m.summary()


def test_model_file(tmp_path):
    f = tmp_path / "tiny.ini"
    f.write_text("[model]\ninput = image 4 1 1\n[flat]\ntype = flatten\n[fc]\ntype = linear\nout = 3\n"
                 "[loss]\ntype = softmax_cross_entropy\n")
    m = snug.Model(str(f))
    assert m.parameter_shapes() == {"fc.weight": (3, 4), "fc.bias": (3,)}


def test_plan_report_is_snug_plans(snug_cli):
    m = snug.Model("cnn")
    p = snug.plan(m, batch=64, mem="64MiB")
    cli = subprocess.run([str(snug_cli), "plan", "--model", "cnn", "--batch", "64", "--mem", "64MiB"],
                         check=True, capture_output=True, text=True).stdout
    assert cli.startswith(str(p))
    assert p.batch == 64 and p.micro_batch * (p.micro_batches - 1) < 64 <= p.micro_batch * p.micro_batches
    assert set(p.bytes) == {"params", "grads", "optim", "activations", "workspace", "data"}
    assert p.peak == sum(p.bytes.values()) <= 64 << 20
    assert sum(row["chosen"] for row in p.table) == 1
    doc = p.to_dict()
    chosen = [row for row in p.table if row["chosen"]][0]
    assert chosen["total"] == p.peak and doc  # the JSON document of `snug plan --json`


def test_plan_fixed_micro_batch_and_checkpoint():
    m = snug.Model("mlp")
    p = snug.plan(m, batch=256, micro_batch=64, checkpoint="sqrt", precision="bf16")
    assert (p.micro_batch, p.micro_batches, p.precision) == (64, 4, "bf16")
    assert p.checkpoint.startswith("sqrt")


def test_products_as_the_cli_chooses(snug_cli):
    m = snug.Model("mlp")
    for products in ("auto", "blas", "snug"):
        p = snug.plan(m, batch=64, micro_batch=64, precision="bf16", products=products)
        cli = subprocess.run([str(snug_cli), "plan", "--model", "mlp", "--batch", "64", "--micro-batch", "64",
                              "--precision", "bf16", "--json"], env=dict(os.environ, SNUG_GEMM=products), check=True,
                             capture_output=True, text=True).stdout
        assert json.loads(cli)["chosen"]["linear_product"] == p.linear_product
        assert p.summary["products"] == products
    assert snug.plan(m, batch=64, precision="bf16", products="blas").linear_product == "blas"
    assert snug.plan(m, batch=64, precision="bf16", products="snug").linear_product == "snug bf16"
    with pytest.raises(snug.ArgumentError, match="not a product snug knows"):
        snug.plan(m, batch=64, products="cublas")


def test_out_of_budget_says_what_fits():
    m = snug.Model("cnn")
    with pytest.raises(snug.OutOfBudget) as e:
        snug.plan(m, batch=64, mem="1MiB")
    least = e.value.smallest_budget
    assert least > 1 << 20 and "smallest budget" in str(e.value)
    assert isinstance(e.value, snug.Error) and isinstance(e.value, MemoryError)
    snug.plan(m, batch=64, mem=least)  # the figure is a way out ...
    with pytest.raises(snug.OutOfBudget):
        snug.plan(m, batch=64, mem=least - 1)  # ... and the least one
    with pytest.raises(snug.OutOfBudget) as e:
        snug.plan(m, batch=64, micro_batch=64, checkpoint="none", mem=least + (8 << 20))
    biggest = e.value.largest_micro_batch
    assert 1 <= biggest < 64
    snug.plan(m, batch=64, micro_batch=biggest, checkpoint="none", mem=least + (8 << 20))


def test_errors_are_snug_errors(tmp_path):
    with pytest.raises(snug.ArgumentError, match="unknown model 'nosuch'"):
        snug.Model("nosuch")
    with pytest.raises(snug.FileError):
        snug.Model(str(tmp_path / "missing.ini"))
    bad = tmp_path / "bad.ini"
    bad.write_text("[model]\ninput = image 1 2 2\n[fc]\ntype = linear\nout = 0\n")
    with pytest.raises(snug.Error, match="bad.ini"):
        snug.Model(str(bad))
    with pytest.raises(snug.ArgumentError):
        snug.plan(snug.Model("cnn"), batch=64, micro_batch=16, checkpoint="sometimes")
    with pytest.raises(snug.ArgumentError):
        snug.plan(snug.Model("cnn"), batch=64, mem="lots")
    with pytest.raises(snug.FileError):
        snug.data.mnist(str(tmp_path))
    m = snug.Model("cnn")
    t = snug.Trainer(m, snug.plan(m, batch=8))
    with pytest.raises(snug.ShapeError):
        t.fit(snug.data.arrays(np.zeros((4, 3, 28, 28), np.float32), np.zeros(4, np.int32), classes=10))
    with pytest.raises(snug.FormatError):
        junk = tmp_path / "junk.safetensors"
        junk.write_bytes(b"\x10\x00\x00\x00\x00\x00\x00\x00not json at all!")
        t.load(str(junk))
