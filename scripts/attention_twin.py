#!/usr/bin/python3
"""Attention two ways, as a torch.nn.Module for torch.onnx.export: a token model with one encoder block written
the usual way without a mask (one qkv Linear split into heads, q k^T / sqrt(D), softmax over the keys, @ v), which
snug fuses into its self_attention with causal off, and one block written by hand so that no pattern matches it:
the qkv projection Split in two unequal parts ([D, 2D]) and the second Sliced into k and v, the heads made by
Reshape and an explicit permute (k straight to (B, H, D, T)), a batched q @ k^T scaled by a Python number, a
softmax over the queries (dim=-2) instead of the keys, and a product broadcast over the heads (the probabilities
(B, H, T, T) times v as (B, 1, T, C), through a Linear there), its heads side by side into a Linear. snug maps
those nodes one by one onto its permute, slice, reshape, softmax, matmul and linear layers (docs/onnx.md).

    /usr/bin/python3 scripts/attention_twin.py --out-dir DIR    (the tests' fixture: DIR/attention.onnx and the
                                                                 reference below)

It also writes PyTorch's float64 reference of one step from the exported weights (and the same in float32, the
yardstick test_onnx_attention holds snug's rounding to): DIR/attention_ref.f64 and its index
DIR/attention_ref.json, as gpt_twin.py writes the gpt's. The batch: BATCH sequences of CONTEXT tokens from
resnet18_reference's LCG (seed BATCH_SEED), each token the state's top 8 bits, then per token its target, the next
states' top 8 bits; the loss is snug's per-token cross-entropy. In one pass and as micro-batches of MICRO_BATCH (no
layer mixes the sequences of a batch). The network is smooth: no decision to keep from a tie.
"""
import math
import os
import sys

import torch
from torch import nn

VOCAB, CONTEXT, HEADS, D = 256, 16, 4, 32  # VOCAB: bytes, as snug's text data reads them
SEED = 31  # torch.manual_seed of the exported weights
BATCH_SEED = 57
BATCH = 4
MICRO_BATCH = 2


class Encoder(nn.Module):
    """Self-attention as a PyTorch user writes an encoder's (ViT, BERT): every position sees every other."""

    def __init__(self, d, heads):
        super().__init__()
        self.heads = heads
        self.qkv = nn.Linear(d, 3 * d)
        self.proj = nn.Linear(d, d)

    def forward(self, x):
        B, T, C = x.shape
        q, k, v = self.qkv(x).split(C, dim=2)
        q, k, v = (t.reshape(B, T, self.heads, C // self.heads).transpose(1, 2) for t in (q, k, v))
        s = q @ k.transpose(-2, -1) / math.sqrt(C // self.heads)
        y = s.softmax(dim=-1) @ v
        return self.proj(y.transpose(1, 2).reshape(B, T, C))


class Unfused(nn.Module):
    """Attention-like mixing written so that snug's attention pattern cannot match it (the module docstring)."""

    def __init__(self, d, heads):
        super().__init__()
        self.heads = heads
        self.qkv = nn.Linear(d, 3 * d)
        self.vmix = nn.Linear(d, d)  # on v as (B, 1, T, C): MatMul of a rank-4 tensor
        self.proj = nn.Linear(heads * d, d)

    def forward(self, x):
        B, T, C = x.shape
        H, Dh = self.heads, C // self.heads
        q, kv = self.qkv(x).split([C, 2 * C], dim=-1)
        k, v = kv[..., :C], kv[..., C:]
        q = q.reshape(B, T, H, Dh).permute(0, 2, 1, 3)
        kt = k.reshape(B, T, H, Dh).permute(0, 2, 3, 1)
        p = ((q @ kt) * (1.0 / math.sqrt(Dh))).softmax(dim=-2)
        y = p @ self.vmix(v.reshape(B, 1, T, C))
        return self.proj(y.transpose(1, 2).reshape(B, T, H * C))


class Net(nn.Module):
    def __init__(self, vocab=VOCAB, context=CONTEXT, heads=HEADS, d=D):
        super().__init__()
        self.wte = nn.Embedding(vocab, d)
        self.wpe = nn.Embedding(context, d)
        self.ln1 = nn.LayerNorm(d)
        self.enc = Encoder(d, heads)
        self.ln2 = nn.LayerNorm(d)
        self.mix = Unfused(d, heads)
        self.ln_f = nn.LayerNorm(d)
        self.head = nn.Linear(d, vocab)
        for m in self.modules():  # GPT-2's initialisation: small logits, no softmax saturated
            if isinstance(m, (nn.Linear, nn.Embedding)):
                nn.init.normal_(m.weight, 0.0, 0.1)

    def forward(self, tokens):
        h = self.wte(tokens) + self.wpe.weight[: tokens.shape[1]]
        h = h + self.enc(self.ln1(h))
        h = h + self.mix(self.ln2(h))
        return self.head(self.ln_f(h))


def export(path, seed=SEED):
    import warnings
    warnings.filterwarnings("ignore", category=torch.jit.TracerWarning)  # math.sqrt(D) is meant as a constant
    torch.manual_seed(seed)
    net = Net().train()
    torch.onnx.export(net, torch.zeros(1, CONTEXT, dtype=torch.int64), path, opset_version=13,
                      training=torch.onnx.TrainingMode.TRAINING, do_constant_folding=False,
                      input_names=["tokens"], output_names=["logits"],
                      dynamic_axes={"tokens": {0: "batch"}, "logits": {0: "batch"}})


def main(out_dir):
    """The tests' fixture: the export and PyTorch's step from its weights, float64 and float32."""
    import token_reference
    torch.set_num_threads(2)
    os.makedirs(out_dir, exist_ok=True)
    path = os.path.join(out_dir, "attention.onnx")
    export(path)
    token_reference.write(out_dir, "attention_ref", path, Net, BATCH, CONTEXT, BATCH_SEED, 56, MICRO_BATCH)


if __name__ == "__main__":
    if sys.argv[1:2] != ["--out-dir"] or len(sys.argv) != 3:
        sys.exit(__doc__)
    main(sys.argv[2])
