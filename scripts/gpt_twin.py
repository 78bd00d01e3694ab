#!/usr/bin/python3
"""The zoo's gpt (models/gpt.ini) as a torch.nn.Module, for torch.onnx.export: the same layers under the same
names (state_dict keys wte.weight, wpe.weight, h0.ln1.weight, h0.qkv.weight, ..., ln_f.bias; the head tied to
wte), written the way a PyTorch user writes a GPT: one qkv Linear split into heads, q k^T / sqrt(D), a causal
mask filled with -inf, softmax, the weighted sum of v, nn.GELU and nn.LayerNorm. tests/reference/
make_references.py's gpt() is the same network written functionally.

    /usr/bin/python3 scripts/gpt_twin.py OUT.onnx [--opset N] [--context T]   (default opset 13, T = 256)
    /usr/bin/python3 scripts/gpt_twin.py --out-dir DIR     (DIR/gpt_opset13.onnx and DIR/gpt_opset17.onnx, which
                                                            writes LayerNormalization; the tests' fixture)

--out-dir also writes PyTorch's float64 reference of one step from the exported weights (and the same in float32,
the yardstick test_onnx_gpt holds snug's rounding to): DIR/gpt_ref.f64 with its index DIR/gpt_ref.json, as
resnet18_reference.py writes resnet18's. The batch: BATCH sequences of CONTEXT tokens from resnet18_reference's
LCG (seed BATCH_SEED), each token the state's top 8 bits, then per token its target, the next states' top 8 bits;
the loss is snug's per-token cross-entropy, summed over the tokens and divided by their count. In one pass and as
micro-batches of MICRO_BATCH (no layer mixes the sequences of a batch, so both are the same step). The network is
smooth (GELU, softmax, LayerNorm: no ReLU or max-pool decision to keep away from its tie).
"""
import math
import os
import sys
import warnings

import torch
import torch.nn.functional as F
from torch import nn

VOCAB, CONTEXT, LAYERS, HEADS, D = 256, 256, 4, 4, 256
SEED = 22  # torch.manual_seed of the exported weights
BATCH_SEED = 53
BATCH = 2
MICRO_BATCH = 1


class Block(nn.Module):
    def __init__(self, d, heads, context):
        super().__init__()
        self.heads = heads
        self.ln1 = nn.LayerNorm(d)
        self.qkv = nn.Linear(d, 3 * d)
        self.proj = nn.Linear(d, d)
        self.ln2 = nn.LayerNorm(d)
        self.fc = nn.Linear(d, 4 * d)
        self.gelu = nn.GELU()
        self.fc2 = nn.Linear(4 * d, d)
        self.register_buffer("mask", torch.ones(context, context, dtype=torch.bool).tril(), persistent=False)

    def attention(self, x):
        B, T, C = x.shape
        q, k, v = self.qkv(x).split(C, dim=2)
        q, k, v = (t.reshape(B, T, self.heads, C // self.heads).transpose(1, 2) for t in (q, k, v))
        s = q @ k.transpose(-2, -1) / math.sqrt(C // self.heads)
        s = s.masked_fill(~self.mask[:T, :T], float("-inf"))
        y = s.softmax(dim=-1) @ v
        return self.proj(y.transpose(1, 2).reshape(B, T, C))

    def forward(self, x):
        x = x + self.attention(self.ln1(x))
        return x + self.fc2(self.gelu(self.fc(self.ln2(x))))


class Gpt(nn.Module):
    def __init__(self, vocab=VOCAB, context=CONTEXT, layers=LAYERS, heads=HEADS, d=D):
        super().__init__()
        self.layers = layers
        self.wte = nn.Embedding(vocab, d)
        self.wpe = nn.Embedding(context, d)
        for l in range(layers):
            setattr(self, f"h{l}", Block(d, heads, context))
        self.ln_f = nn.LayerNorm(d)
        self.apply(self.init_weights)

    @staticmethod
    def init_weights(m):
        """GPT-2's initialisation (weights N(0, 0.02), biases 0): PyTorch's default N(0, 1) for the tied
        embedding gives logits of about 16 and a loss of about 170, every softmax saturated."""
        if isinstance(m, (nn.Linear, nn.Embedding)):
            nn.init.normal_(m.weight, 0.0, 0.02)
        if isinstance(m, nn.Linear) and m.bias is not None:
            nn.init.zeros_(m.bias)

    def forward(self, tokens):
        h = self.wte(tokens) + self.wpe.weight[: tokens.shape[1]]
        for l in range(self.layers):
            h = getattr(self, f"h{l}")(h)
        return F.linear(self.ln_f(h), self.wte.weight)


def export(path, opset=13, context=CONTEXT, seed=SEED, **sizes):
    warnings.filterwarnings("ignore", category=torch.jit.TracerWarning)  # math.sqrt(D) is meant as a constant
    torch.manual_seed(seed)
    net = Gpt(context=context, **sizes).train()
    tokens = torch.zeros(1, context, dtype=torch.int64)
    torch.onnx.export(net, tokens, path, opset_version=opset, training=torch.onnx.TrainingMode.TRAINING,
                      do_constant_folding=False, input_names=["tokens"], output_names=["logits"],
                      dynamic_axes={"tokens": {0: "batch"}, "logits": {0: "batch"}})
    return net


def reference(out_dir, onnx_path):
    """PyTorch's step from the export's weights, in float64 and float32: OUT_DIR/gpt_ref.{f64,json}."""
    import token_reference
    token_reference.write(out_dir, "gpt_ref", onnx_path, Gpt, BATCH, CONTEXT, BATCH_SEED, 56, MICRO_BATCH)


def main(out_dir):
    """The tests' fixture: both exports and the reference into out_dir."""
    torch.set_num_threads(2)
    os.makedirs(out_dir, exist_ok=True)
    for opset in (13, 17):
        export(os.path.join(out_dir, f"gpt_opset{opset}.onnx"), opset)
    reference(out_dir, os.path.join(out_dir, "gpt_opset13.onnx"))


if __name__ == "__main__":
    args = sys.argv[1:]
    if args[:1] == ["--out-dir"]:
        main(args[1])
        sys.exit(0)
    opset = int(args[args.index("--opset") + 1]) if "--opset" in args else 13
    context = int(args[args.index("--context") + 1]) if "--context" in args else CONTEXT
    export(args[0], opset, context)
