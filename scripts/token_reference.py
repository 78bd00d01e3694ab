"""What the PyTorch twins of token models share (gpt_twin.py, attention_twin.py): the module in float64 with an
ONNX export's initializers, the batch of token ids and targets from resnet18_reference's LCG, and PyTorch's step
from the export's weights in float64 and float32, written as resnet18_reference.py writes resnet18's."""
import os

import numpy as np
import onnx
import torch
from onnx import numpy_helper

import resnet18_reference as ref


def exported_net(path, make):
    """make() in float64 with exactly the ONNX file's initializers (the weights snug starts from)."""
    inits = {t.name: torch.from_numpy(numpy_helper.to_array(t).astype(np.float64))
             for t in onnx.load(path).graph.initializer}
    net = make().double()
    net.load_state_dict(inits, strict=True)
    return net.train()


def batch(sequences, context, seed, shift):
    """sequences x context token ids, each an LCG state's top bits (state >> shift), then per token its target, the
    next states' top bits; and the batch's description."""
    states, state = ref.lcg_states(seed, sequences * context)
    targets, _ = ref.lcg_states(state, sequences * context)
    x = torch.tensor([v >> shift for v in states], dtype=torch.int64).reshape(sequences, context)
    y = torch.tensor([v >> shift for v in targets], dtype=torch.int64).reshape(sequences, context)
    desc = {"sequences": sequences, "tokens": context, "generator": "lcg64", "seed": seed,
            "multiplier": ref.LCG_MUL, "increment": ref.LCG_ADD,
            "value": f"state = state * multiplier + increment (mod 2^64) per token, in C order; token = state >> "
                     f"{shift}; then per token, in C order, target = the next state >> {shift}"}
    return x, y, desc


def reference(stem, onnx_path, make, x, y, desc, micro_batch):
    """PyTorch's step from the export's weights, in one pass and as micro-batches, each in float64 and float32:
    STEM.f64 and STEM.json."""
    cases, micro_of = {}, {"one_pass": len(x), "micro_batches": micro_batch}
    for case in ("one_pass", "micro_batches"):
        cases[case] = ref.one_step(torch, exported_net(onnx_path, make), x, y, micro_of[case], classes_last=True)
    for case in ("one_pass", "micro_batches"):
        micro_of[case + "_float32"] = micro_of[case]
        cases[case + "_float32"] = ref.one_step(torch, exported_net(onnx_path, make).float(), x, y, micro_of[case],
                                                classes_last=True)
    ref.write_reference(stem, cases, micro_of, desc)


def write(out_dir, stem, onnx_path, make, sequences, context, seed, shift, micro_batch):
    """The fixture's reference of a token model: batch() through reference() into OUT_DIR/STEM.{f64,json}."""
    x, y, desc = batch(sequences, context, seed, shift)
    reference(os.path.join(out_dir, stem), onnx_path, make, x, y, desc, micro_batch)
