"""torchvision's resnet18(num_classes=10) exported to ONNX, and PyTorch's float64 reference of one step from the
exported weights (scripts/export_onnx.py --resnet18 OUT_DIR runs it; tests/cli/test_onnx_torch.sh checks snug
against it).

The batch: 8 images of 3x32x32 whose values come from a 64-bit linear congruential generator (Knuth's MMIX
constants, seed 49): each value is the state's top 24 bits as k / 2^23 - 1, exact in float32, so that the C test
rebuilds the same floats without reading them; labels 3 1 4 1 5 9 2 6. The loss is the mean softmax cross-entropy
over the 8 images, as snug's; for the micro-batched case, each micro-batch of 2 adds its summed loss / 8, and each
runs its BatchNorms on its own statistics (in training mode), as snug's micro-batches do.

The batch is chosen so that the one-pass comparison is well posed (check_decisions): a ReLU network's gradient is
discontinuous, and a unit whose float64 pre-activation lies within float32 rounding of zero is on in one float32
run and off in another, its whole backward path appearing or vanishing (tests/pinned_decisions.h). With the
batch of seed 41, layer3.1's first ReLU had a unit 1.4e-8 from zero (about 1e-2 of float32's rounding there):
snug's AVX2 and AVX-512 kernels rounded it to the other side and every gradient below it moved by about 1.4%.
So every ReLU input and every max-pool window lead of the one-pass forward must be at least DECISION_MARGIN
times float32's RMS deviation of that tensor (PyTorch's float32 forward against its float64) away from its tie.

Both cases also run in PyTorch float32 (one_pass_float32, micro_batches_float32, in the build tree only: they
depend on the CPU's kernels, so the committed summary leaves them out). They are the yardstick test_onnx_torch
holds snug's rounding to, tensor by tensor: a float32 engine's deviation from float64 is what its rounding does
through 20 layers, and in the micro-batched case it is large at any batch: layer4 runs BatchNorm over 2 values
per channel, where rounding is amplified enormously (PyTorch's own float32 gradients are up to 25% from its
float64 there).
"""
import copy
import json
import os
import sys

import numpy as np

SEED = 41  # torch.manual_seed of the exported weights
BATCH_SEED = 49  # the batch's LCG seed: one whose decisions check_decisions accepts (41's are not)
DECISION_MARGIN = 8.0  # float32 RMS deviations between a decision and its tie: a Gaussian tail of 1e-15
BATCH = 8
MICRO_BATCH = 2
LABELS = [3, 1, 4, 1, 5, 9, 2, 6]
SHAPE = (3, 32, 32)
LCG_MUL = 6364136223846793005
LCG_ADD = 1442695040888963407
SAMPLES = 4  # entries per tensor in the committed summary


def lcg_states(seed, n):
    """The 64-bit LCG's next n states from seed, and the state after them."""
    state, out = seed, []
    for _ in range(n):
        state = (state * LCG_MUL + LCG_ADD) & 0xFFFFFFFFFFFFFFFF
        out.append(state)
    return out, state


def lcg_inputs(seed, shape):
    """Values (state >> 40) / 2^23 - 1 in C order (exact in float32), and the LCG state after them."""
    states, state = lcg_states(seed, int(np.prod(shape)))
    return np.array([(v >> 40) / 2.0 ** 23 - 1.0 for v in states], dtype=np.float64).reshape(shape), state


def batch_inputs():
    return lcg_inputs(BATCH_SEED, (BATCH, *SHAPE))[0]


def batch_description():
    return {"images": BATCH, "shape": list(SHAPE), "labels": LABELS, "generator": "lcg64", "seed": BATCH_SEED,
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


def load_exported(torch, net, path, model):
    """net in float64 with exactly the ONNX file's initializers (the weights snug starts from), in training mode;
    exports drop BatchNorm's num_batches_tracked, which the module keeps."""
    import onnx
    from onnx import numpy_helper
    net = net.double()
    inits = {t.name: torch.from_numpy(numpy_helper.to_array(t).astype(np.float64))
             for t in onnx.load(path).graph.initializer}
    missing, unexpected = net.load_state_dict(inits, strict=False)
    if unexpected or any(not k.endswith("num_batches_tracked") for k in missing):
        sys.exit(f"{model} export: initializers do not match the module: missing {missing}, extra {unexpected}")
    return net.train()


def exported_net(torch, torchvision, path):
    return load_exported(torch, torchvision.models.resnet18(num_classes=10), path, "resnet18")


def one_step(torch, net, x, y, micro, classes_last=False):
    """The loss and, per state_dict name, the gradient (parameters) or the value after the forwards (running
    statistics), as float64 arrays. The loss is snug's: summed over the batch's targets (one per image, pixel or
    token), divided by their count. classes_last: the logits are (N, T, classes), a sequence model's."""
    net.zero_grad()
    total = 0.0
    for lo in range(0, len(x), micro):
        logits = net(x[lo:lo + micro])
        if classes_last:
            logits = logits.transpose(1, -1)  # cross_entropy wants the classes on axis 1
        loss = torch.nn.functional.cross_entropy(logits, y[lo:lo + micro], reduction="sum") / y.numel()
        loss.backward()
        total += loss.item()
    out = {name: p.grad.detach().numpy().copy() for name, p in net.named_parameters()}
    out.update({name: b.detach().numpy().copy() for name, b in net.named_buffers()
                if name.endswith("running_mean") or name.endswith("running_var")})
    return total, out


def decision_inputs(torch, net, x):
    """(name, module, tensor) per decision the forward makes, in its order: every ReLU call's input
    (torchvision's ReLUs are in place, so a pre-hook) and every max-pool's input."""
    seen, hooks = [], []
    for name, mod in net.named_modules():
        if isinstance(mod, (torch.nn.ReLU, torch.nn.MaxPool2d)):
            hooks.append(mod.register_forward_pre_hook(
                lambda m, i, name=name: seen.append((name, m, i[0].detach().double().clone()))))
    with torch.no_grad():
        net(x)
    for h in hooks:
        h.remove()
    return seen


def decision_margins(torch, pool, v):
    """Per decision, how far it is from its tie: a ReLU input's |value|; a live max-pool window's lead of its
    largest value over the second (a dead window, largest 0 after the ReLU, passes no gradient whichever wins)."""
    if not isinstance(pool, torch.nn.MaxPool2d):
        return v.abs().flatten()
    pad = torch.nn.functional.pad(v, (pool.padding,) * 4, value=-float("inf"))
    w = pad.unfold(2, pool.kernel_size, pool.stride).unfold(3, pool.kernel_size, pool.stride).flatten(-2)
    top = w.sort(dim=-1, descending=True).values
    return (top[..., 0] - top[..., 1])[top[..., 0] > 0]


def check_decisions(torch, net64, net32, x, model="resnet18"):
    """Exits unless every decision of the one-pass forward lies DECISION_MARGIN float32 deviations from its tie,
    so that any float32 arithmetic (snug's on any CPU, PyTorch's) takes the float64 branch."""
    worst = (float("inf"), "")
    for (name, mod, v64), (_, _, v32) in zip(decision_inputs(torch, net64, x),
                                             decision_inputs(torch, net32, x.float())):
        dev = (v32 - v64).pow(2).mean().sqrt().item()
        margins = decision_margins(torch, mod, v64)
        if margins.numel():
            worst = min(worst, (margins.min().item() / dev, name))
    if worst[0] < DECISION_MARGIN:
        sys.exit(f"{model} reference: a decision of {worst[1]} lies {worst[0]:.3g} float32 deviations from its tie "
                 f"(at least {DECISION_MARGIN:g} wanted), so float32 engines may take either branch: choose another "
                 "BATCH_SEED")
    return worst


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


def write_image_reference(torch, stem, make_net, batch_seed, shape, micro, model):
    """STEM.f64 and STEM.json of one step of make_net() (the exported module in float64) on len(shape[0]) images
    of shape[1:] from the LCG at batch_seed, labelled LABELS: in one pass and as micro-batches of micro, in float64
    and (the yardstick) float32, once every decision of every forward is checked far from its tie."""
    batch = shape[0]
    x = torch.from_numpy(lcg_inputs(batch_seed, shape)[0].astype(np.float32).astype(np.float64))
    y = torch.tensor(LABELS[:batch], dtype=torch.int64)
    net64, net32 = make_net(), make_net().float()
    margin, where = min(check_decisions(torch, net64, net32, x[lo:lo + n], model)
                        for n in (batch, micro) for lo in range(0, batch, n))
    print(f"{model} reference: every decision at least {margin:.3g} float32 deviations from its tie ({where})")
    desc = dict(batch_description(), images=batch, shape=list(shape[1:]), labels=LABELS[:batch], seed=batch_seed)
    cases, micro_of = {}, {"one_pass": batch, "micro_batches": micro}
    for case in ("one_pass", "micro_batches"):
        cases[case] = one_step(torch, make_net(), x, y, micro_of[case])
    for case in ("one_pass", "micro_batches"):
        micro_of[case + "_float32"] = micro_of[case]
        cases[case + "_float32"] = one_step(torch, make_net().float(), x.float(), y, micro_of[case])
    write_reference(stem, cases, micro_of, desc)


def export_image_twin(torch, make_module, path, shape):
    """make_module(torch) exported to path as every image twin is: opset 13, in training mode, no constant
    folding, input (batch, *shape) with the batch axis dynamic."""
    torch.onnx.export(make_module(torch), torch.zeros(2, *shape), path, opset_version=13,
                      training=torch.onnx.TrainingMode.TRAINING, do_constant_folding=False,
                      input_names=["input"], output_names=["logits"], dynamic_axes={"input": {0: "batch"}})


def write_image_twin(make_module, out_dir, model, batch_seed, shape, micro):
    """OUT_DIR/MODEL.onnx, make_module(torch) exported at shape[1:], and PyTorch's reference of one step from its
    weights on shape[0] images, OUT_DIR/MODEL_ref.* (write_image_reference)."""
    import torch
    torch.set_num_threads(2)
    os.makedirs(out_dir, exist_ok=True)
    path = os.path.join(out_dir, f"{model}.onnx")
    export_image_twin(torch, make_module, path, shape[1:])
    write_image_reference(torch, os.path.join(out_dir, f"{model}_ref"),
                          lambda: load_exported(torch, make_module(torch), path, model), batch_seed, shape, micro,
                          model)


def write_reference(stem, cases, micro_of, batch):
    """STEM.f64: per tensor (in the first case's order), each case's float64 values in turn; STEM.json: the
    batch, the losses and per tensor its size and where each case's values start (in float64s)."""
    index = {"batch": batch, "micro_batch": micro_of, "loss": {case: c[0] for case, c in cases.items()},
             "tensors": []}
    at = 0
    with open(stem + ".f64", "wb") as f:
        for name in cases[next(iter(cases))][1]:
            entry = {"name": name, "numel": int(cases["one_pass"][1][name].size)}
            for case in cases:
                f.write(cases[case][1][name].astype("<f8").tobytes())
                entry[case] = at
                at += entry["numel"]
            index["tensors"].append(entry)
    with open(stem + ".json", "w") as f:
        json.dump(index, f)
    return index


def main(out_dir, write_summary, summary_path):
    import torch
    import torchvision
    torch.set_num_threads(2)
    os.makedirs(out_dir, exist_ok=True)
    onnx_path = os.path.join(out_dir, "resnet18.onnx")
    export(torch, torchvision, onnx_path)
    x = torch.from_numpy(batch_inputs().astype(np.float32).astype(np.float64))
    y = torch.tensor(LABELS, dtype=torch.int64)
    margin, where = check_decisions(torch, exported_net(torch, torchvision, onnx_path),
                                    exported_net(torch, torchvision, onnx_path).float(), x)
    print(f"resnet18 reference: every decision at least {margin:.3g} float32 deviations from its tie ({where})")
    cases, micro_of = {}, {"one_pass": BATCH, "micro_batches": MICRO_BATCH}
    for case in ("one_pass", "micro_batches"):
        cases[case] = one_step(torch, exported_net(torch, torchvision, onnx_path), x, y, micro_of[case])
    # PyTorch's own float32 of each case: the yardstick test_onnx_torch measures snug's rounding with
    for case in ("one_pass", "micro_batches"):
        micro_of[case + "_float32"] = micro_of[case]
        cases[case + "_float32"] = one_step(torch, exported_net(torch, torchvision, onnx_path).float(), x.float(), y,
                                            micro_of[case])
    index = write_reference(os.path.join(out_dir, "resnet18_ref"), cases, micro_of, batch_description())
    summary = summary_of({case: cases[case] for case in ("one_pass", "micro_batches")})  # float32: per machine
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
