"""torchvision's resnet18(num_classes=10) exported to ONNX, and PyTorch's float64 reference of one step from the
exported weights (scripts/export_onnx.py --resnet18 OUT_DIR runs it; tests/cli/test_onnx_torch.sh checks snug
against it).

The batch: 8 images of 3x32x32 whose values come from a 64-bit linear congruential generator (Knuth's MMIX
constants, seed 41): each value is the state's top 24 bits as k / 2^23 - 1, exact in float32, so that the C test
rebuilds the same floats without reading them; labels 3 1 4 1 5 9 2 6. The loss is the mean softmax cross-entropy
over the 8 images, as snug's; for the micro-batched case, each micro-batch of 2 adds its summed loss / 8, and each
runs its BatchNorms on its own statistics (in training mode), as snug's micro-batches do.
"""
import copy
import json
import os
import sys

import numpy as np

SEED = 41
BATCH = 8
MICRO_BATCH = 2
LABELS = [3, 1, 4, 1, 5, 9, 2, 6]
SHAPE = (3, 32, 32)
LCG_MUL = 6364136223846793005
LCG_ADD = 1442695040888963407
SAMPLES = 4  # entries per tensor in the committed summary


def batch_inputs():
    n = BATCH * int(np.prod(SHAPE))
    state, out = SEED, np.empty(n, dtype=np.float64)
    for i in range(n):
        state = (state * LCG_MUL + LCG_ADD) & 0xFFFFFFFFFFFFFFFF
        out[i] = (state >> 40) / 2.0 ** 23 - 1.0
    return out.reshape(BATCH, *SHAPE)


def batch_description():
    return {"images": BATCH, "shape": list(SHAPE), "labels": LABELS, "generator": "lcg64", "seed": SEED,
            "multiplier": LCG_MUL, "increment": LCG_ADD,
            "value": "state = state * multiplier + increment (mod 2^64) per value, in C order; value = "
                     "(state >> 40) / 2^23 - 1"}


def export(torch, torchvision, path):
    torch.manual_seed(SEED)
    net = torchvision.models.resnet18(num_classes=10)
    net.train()
    keep = copy.deepcopy(net.state_dict())  # tracing in training mode runs the BatchNorms on the dummy batch
    torch.onnx.export(net, torch.zeros(2, *SHAPE), path, opset_version=13,
                      training=torch.onnx.TrainingMode.TRAINING, do_constant_folding=False,
                      input_names=["input"], output_names=["logits"], dynamic_axes={"input": {0: "batch"}})
    net.load_state_dict(keep)


def exported_net(torch, torchvision, path):
    """resnet18 in float64 with exactly the ONNX file's initializers (the weights snug starts from)."""
    import onnx
    from onnx import numpy_helper
    net = torchvision.models.resnet18(num_classes=10).double()
    inits = {t.name: torch.from_numpy(numpy_helper.to_array(t).astype(np.float64))
             for t in onnx.load(path).graph.initializer}
    missing, unexpected = net.load_state_dict(inits, strict=False)
    if unexpected or any(not k.endswith("num_batches_tracked") for k in missing):
        sys.exit(f"resnet18 export: initializers do not match the module: missing {missing}, extra {unexpected}")
    return net.train()


def one_step(torch, net, x, y, micro):
    """The loss and, per state_dict name, the gradient (parameters) or the value after the forwards (running
    statistics), as float64 arrays."""
    net.zero_grad()
    total = 0.0
    for lo in range(0, BATCH, micro):
        logits = net(x[lo:lo + micro])
        loss = torch.nn.functional.cross_entropy(logits, y[lo:lo + micro], reduction="sum") / BATCH
        loss.backward()
        total += loss.item()
    out = {name: p.grad.detach().numpy().copy() for name, p in net.named_parameters()}
    out.update({name: b.detach().numpy().copy() for name, b in net.named_buffers()
                if name.endswith("running_mean") or name.endswith("running_var")})
    return total, out


def summary_of(cases):
    rng = np.random.default_rng(SEED)
    out = {}
    for case, (loss, tensors) in cases.items():
        entries = {}
        for name, v in tensors.items():
            flat = v.ravel()
            idx = sorted(rng.choice(flat.size, size=min(SAMPLES, flat.size), replace=False).tolist())
            entries[name] = {"norm": float(np.linalg.norm(flat)), "samples": [[i, float(flat[i])] for i in idx]}
        out[case] = {"loss": loss, "tensors": entries}
    return out


def check_summary(summary, path):
    """The reference just computed must be the committed one: the same export (torch's seeded init) and the same
    arithmetic, to float64 rounding of a different summation order at most."""
    with open(path) as f:
        want = json.load(f)["cases"]
    for case, c in want.items():
        got = summary[case]
        if abs(got["loss"] - c["loss"]) > 1e-12 * abs(c["loss"]):
            sys.exit(f"resnet18 reference: {case} loss {got['loss']!r}, the committed {path} says {c['loss']!r}: "
                     "another PyTorch whose resnet18 initialises differently? (Debian 12's python3-torch 1.13 made it)")
        for name, t in c["tensors"].items():
            g = got["tensors"][name]
            if abs(g["norm"] - t["norm"]) > 1e-9 * t["norm"] + 1e-300:
                sys.exit(f"resnet18 reference: {case} {name} norm {g['norm']!r}, committed {t['norm']!r}")


def main(out_dir, write_summary, summary_path):
    import torch
    import torchvision
    torch.set_num_threads(2)
    os.makedirs(out_dir, exist_ok=True)
    onnx_path = os.path.join(out_dir, "resnet18.onnx")
    export(torch, torchvision, onnx_path)
    x = torch.from_numpy(batch_inputs().astype(np.float32).astype(np.float64))
    y = torch.tensor(LABELS, dtype=torch.int64)
    cases = {}
    for case, micro in (("one_pass", BATCH), ("micro_batches", MICRO_BATCH)):
        cases[case] = one_step(torch, exported_net(torch, torchvision, onnx_path), x, y, micro)
    names = list(cases["one_pass"][1])
    index = {"batch": batch_description(), "micro_batch": {"one_pass": BATCH, "micro_batches": MICRO_BATCH},
             "loss": {case: c[0] for case, c in cases.items()}, "tensors": []}
    at = 0
    with open(os.path.join(out_dir, "resnet18_ref.f64"), "wb") as f:
        for name in names:
            entry = {"name": name, "numel": int(cases["one_pass"][1][name].size)}
            for case in cases:
                f.write(cases[case][1][name].astype("<f8").tobytes())
                entry[case] = at
                at += entry["numel"]
            index["tensors"].append(entry)
    with open(os.path.join(out_dir, "resnet18_ref.json"), "w") as f:
        json.dump(index, f)
    summary = summary_of(cases)
    if write_summary:
        with open(summary_path, "w") as f:
            json.dump({"model": "torchvision.models.resnet18(num_classes=10), torch.manual_seed(41), exported at "
                                "3x32x32 by scripts/export_onnx.py --resnet18",
                       "torch": torch.__version__, "torchvision": torchvision.__version__,
                       "batch": batch_description(), "micro_batch": index["micro_batch"], "cases": summary},
                      f, indent=1)
            f.write("\n")
    else:
        check_summary(summary, summary_path)
