#!/usr/bin/python3
"""Writes the whole-model reference files tests/reference/{resnet20,unet,gpt}.ref from PyTorch.

A developer tool, not a test dependency: tests/test_reference_models.c reads the committed .ref files only.
Run it with Debian's python3-torch (apt-get install python3-torch):

    /usr/bin/python3 tests/reference/make_references.py            # writes next to this script
    /usr/bin/python3 tests/reference/make_references.py --out DIR

Every model is written functionally (F.conv2d, F.group_norm, ...) over a dictionary of tensors named as snug
names its parameters ("s2b1.conv1.weight"), created in the order the forward pass meets them, which is snug's
graph order, in snug's layouts (linear (out, in), conv (Co, C/g, k, k), conv-transpose (C, Co, k, k)).

Nothing large is shipped: parameters, inputs and targets are drawn from snug's counter-based RNG
(src/core/rng.c), re-implemented here over numpy uint64, so the C test regenerates the same values bit for
bit. Parameter tensor NAME holds offset + (2u - 1) * scale with u = snug_rng_uniform(seed, fnv1a64(NAME), i),
computed in double and rounded once to float32 (exact in double, so the C side rounds identically); offset and
scale are written into the reference file. The forward and backward passes run in float64, so the references
are the exact values up to 1e-15 and the test measures snug's own float32 error. Before writing a file the
script runs the model in float32 as well and refuses unless that run meets the test's criteria with a tenth of
the tolerance: near a ReLU or max-pool kink float32 and float64 can take different branches (see README.md).

A .ref file is text, one record a line:
    model NAME / seed S / batch B / items N (counted items: samples, pixels or tokens not ignored)
    rng SEED STREAM COUNTER BITS (one draw of snug_rng_bits: checks this port of the RNG against the C one)
    loss L (PyTorch's mean over counted items, = snug's sum / N)
    grad_norm G (the L2 norm of the whole gradient)
    param NAME NUMEL OFFSET SCALE NORM SUM L1 MAXABS ZERO   (statistics of its gradient; ZERO = 1 when the
                                                            gradient is zero in exact arithmetic)
    buffer NAME NUMEL NORM SUM L1 MAXABS                    (statistics of its value after the forward pass:
                                                            BatchNorm's running statistics)
    samples V V ...                                         (32 elements of the tensor just above, element k at
                                                            snug_rng_bits(seed, fnv1a64(NAME) + 1, k) % NUMEL)
"""
import argparse
import math
import os
import sys

import numpy as np
import torch
import torch.nn.functional as F

MASK = (1 << 64) - 1
SAMPLES = 32
TOL = 1e-4       # the C test's tolerance
ZERO_TOL = 1e-6  # the C test's bound on a gradient zero in exact arithmetic, over the whole gradient's norm
STREAM_INPUTS, STREAM_TARGETS, STREAM_IGNORE = 1, 2, 3


# ---- snug's counter-based RNG (src/core/rng.c) ----
def mix64_int(z):
    z = ((z ^ (z >> 30)) * 0xbf58476d1ce4e5b9) & MASK
    z = ((z ^ (z >> 27)) * 0x94d049bb133111eb) & MASK
    return z ^ (z >> 31)


def mix64_np(z):
    z = (z ^ (z >> np.uint64(30))) * np.uint64(0xbf58476d1ce4e5b9)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94d049bb133111eb)
    return z ^ (z >> np.uint64(31))


def rng_bits(seed, stream, n):
    """snug_rng_bits(seed, stream, counter) for counter = 0 .. n-1, as a uint64 array."""
    k = mix64_int((seed + 0x9e3779b97f4a7c15) & MASK)
    k = mix64_int(k ^ ((stream * 0xd1b54a32d192ed03 + 0x632be59bd9b4e019) & MASK))
    c = np.arange(n, dtype=np.uint64)
    with np.errstate(over="ignore"):
        return mix64_np(np.uint64(k) ^ (c * np.uint64(0x9e3779b97f4a7c15) + np.uint64(0x8cb92ba72f3d8dd7)))


def rng_uniform(seed, stream, n):
    """snug_rng_uniform: the top 24 bits over 2^24, exact in float64."""
    return (rng_bits(seed, stream, n) >> np.uint64(40)).astype(np.float64) / 16777216.0


def fnv1a64(text):
    h = 0xcbf29ce484222325
    for b in text.encode():
        h = ((h ^ b) * 0x100000001b3) & MASK
    return h


def fill(seed, name, numel, offset, scale):
    """offset + (2u - 1) * scale, exact in double, rounded once to float32 (as the C test does)."""
    u = rng_uniform(seed, fnv1a64(name), numel)
    return (offset + (2.0 * u - 1.0) * scale).astype(np.float32)


def f32(x):
    """x rounded to float32, as a Python float (written with repr: strtod reads it back exactly)."""
    return float(np.float32(x))


# ---- parameters in graph order ----
class Params:
    def __init__(self, seed, dtype):
        self.seed = seed
        self.dtype = dtype
        self.entries = []  # (name, tensor, is_buffer, offset, scale)

    def param(self, name, shape, offset, scale):
        numel = math.prod(shape)
        v = fill(self.seed, name, numel, offset, scale).astype(np.float64).reshape(shape)
        t = torch.tensor(v, dtype=self.dtype, requires_grad=True)
        self.entries.append((name, t, False, offset, scale))
        return t

    def buffer(self, name, shape, value):
        t = torch.full(shape, float(value), dtype=self.dtype)
        self.entries.append((name, t, True, 0.0, 0.0))
        return t

    def weight(self, name, shape, fan_in):
        """A weight U(-1/sqrt(fan_in), 1/sqrt(fan_in)) (PyTorch's bound for linear and conv weights)."""
        return self.param(name + ".weight", shape, 0.0, f32(1.0 / math.sqrt(fan_in)))

    def bias(self, name, n, fan_in):
        return self.param(name + ".bias", (n,), 0.0, f32(1.0 / math.sqrt(fan_in)))

    def norm_affine(self, name, c):
        """Norm weights near 1 and biases near 0, perturbed so that both enter the gradients non-trivially."""
        return self.param(name + ".weight", (c,), 1.0, 0.25), self.param(name + ".bias", (c,), 0.0, 0.125)


# ---- kinks: where a float32 rounding error can flip a non-differentiable decision ----
KINK_BAND = 1e-5  # float32 activations deep in a model carry errors of ~1e-6 of their RMS


class Kinks:
    """Counts ReLU inputs within KINK_BAND * RMS of zero and max-pool windows whose two largest values are within
    KINK_BAND * RMS of each other: there float32 and float64 may take different branches, which moves a whole
    element of the gradient, far beyond rounding. A reference is only meaningful when none is near (main checks)."""
    near = 0
    smallest = math.inf

    @classmethod
    def note(cls, margin, rms):
        r = margin / max(rms, 1e-300)
        cls.near += int((r < KINK_BAND).sum())
        if r.numel():
            cls.smallest = min(cls.smallest, float(r.min()))


def relu(x):
    d = x.detach()
    Kinks.note(d.abs().flatten(), float(d.pow(2).mean().sqrt()))
    return F.relu(x)


def max_pool2(x):
    d = x.detach()
    B, C, H, W = d.shape
    win = d.reshape(B, C, H // 2, 2, W // 2, 2).permute(0, 1, 2, 4, 3, 5).reshape(-1, 4)
    top = win.topk(2, dim=1).values
    positive = top[:, 0] > 0  # an all-zero window (after ReLU) has no gradient to route
    Kinks.note((top[:, 0] - top[:, 1])[positive], float(d.pow(2).mean().sqrt()))
    return F.max_pool2d(x, 2, 2)


# ---- layers (snug's semantics; each creates its parameters in snug's order) ----
def conv(P, name, x, cout, k, stride, pad):
    cin = x.shape[1]
    w = P.weight(name, (cout, cin, k, k), cin * k * k)
    b = P.bias(name, cout, cin * k * k)
    return F.conv2d(x, w, b, stride=stride, padding=pad)


def conv_transpose(P, name, x, cout, k, stride):
    cin = x.shape[1]
    w = P.weight(name, (cin, cout, k, k), cout * k * k)  # PyTorch's fan_in for a transposed convolution
    b = P.bias(name, cout, cout * k * k)
    return F.conv_transpose2d(x, w, b, stride=stride)


def linear(P, name, x, out):
    fin = x.shape[-1]
    w = P.weight(name, (out, fin), fin)
    b = P.bias(name, out, fin)
    return F.linear(x, w, b)


def batchnorm(P, name, x):
    c = x.shape[1]
    w, b = P.norm_affine(name, c)
    rm = P.buffer(name + ".running_mean", (c,), 0.0)
    rv = P.buffer(name + ".running_var", (c,), 1.0)
    return F.batch_norm(x, rm, rv, w, b, training=True, momentum=0.1, eps=1e-5)


def groupnorm(P, name, x, groups):
    w, b = P.norm_affine(name, x.shape[1])
    return F.group_norm(x, groups, w, b, eps=1e-5)


def layernorm(P, name, x):
    w, b = P.norm_affine(name, x.shape[-1])
    return F.layer_norm(x, (x.shape[-1],), w, b, eps=1e-5)


def self_attention(qkv, heads):
    """snug_self_attention(causal): qkv (B, T, 3C) = [Q | K | V], head h on columns [h D, (h+1) D) of each."""
    B, T, C3 = qkv.shape
    C = C3 // 3
    D = C // heads
    q, k, v = (t.reshape(B, T, heads, D).transpose(1, 2) for t in qkv.split(C, dim=2))
    s = q @ k.transpose(-1, -2) / math.sqrt(D)
    mask = torch.ones(T, T, dtype=torch.bool).tril()
    s = s.masked_fill(~mask, float("-inf"))
    return (s.softmax(-1) @ v).transpose(1, 2).reshape(B, T, C)


# ---- the models (tests/test_reference_models.c builds the same graphs in C) ----
def resnet20(P, x):
    """CIFAR ResNet-20: conv 16, 3 stages x 3 basic blocks (16/32/64), 1x1 conv + BN shortcut on downsampling."""
    h = relu(batchnorm(P, "bn1", conv(P, "conv1", x, 16, 3, 1, 1)))
    cin = 16
    for s, cout in enumerate((16, 32, 64), start=1):
        for b in range(1, 4):
            name = f"s{s}b{b}"
            stride = 2 if (b == 1 and s > 1) else 1
            y = relu(batchnorm(P, name + ".bn1", conv(P, name + ".conv1", h, cout, 3, stride, 1)))
            y = batchnorm(P, name + ".bn2", conv(P, name + ".conv2", y, cout, 3, 1, 1))
            if stride != 1 or cin != cout:
                h = batchnorm(P, name + ".down_bn", conv(P, name + ".down", h, cout, 1, stride, 0))
            h = relu(y + h)
            cin = cout
    return linear(P, "fc", h.mean(dim=(2, 3)), 10)


def unet(P, x):
    """UNet: levels 16/32/64/128, bottleneck 256, each two conv3x3 + GroupNorm(8) + ReLU; maxpool down,
    conv-transpose 2x2 stride 2 up, skips concatenated before the up-sampled channels; 1x1 conv to 2 classes."""
    def double(name, h, c):
        h = relu(groupnorm(P, name + ".gn1", conv(P, name + ".conv1", h, c, 3, 1, 1), 8))
        return relu(groupnorm(P, name + ".gn2", conv(P, name + ".conv2", h, c, 3, 1, 1), 8))

    skips = []
    h = x
    for i, c in enumerate((16, 32, 64, 128), start=1):
        h = double(f"enc{i}", h, c)
        skips.append(h)
        h = max_pool2(h)
    h = double("mid", h, 256)
    for i, c in zip((4, 3, 2, 1), (128, 64, 32, 16)):
        up = conv_transpose(P, f"up{i}", h, c, 2, 2)
        h = double(f"dec{i}", torch.cat([skips[i - 1], up], dim=1), c)
    return conv(P, "head", h, 2, 1, 1, 0)


GPT_VOCAB, GPT_CONTEXT, GPT_LAYERS, GPT_HEADS, GPT_D = 256, 256, 4, 4, 256


def gpt(P, tokens):
    """GPT-2 style: token + learned position embeddings, pre-LN blocks (causal attention, MLP 4x GELU),
    final LayerNorm, output head tied to the token embedding."""
    d = GPT_D
    wte = P.param("wte.weight", (GPT_VOCAB, d), 0.0, f32(1.0 / math.sqrt(d)))
    h = F.embedding(tokens, wte)
    wpe = P.param("wpe.weight", (GPT_CONTEXT, d), 0.0, f32(1.0 / math.sqrt(d)))
    h = h + wpe[: tokens.shape[1]]
    for l in range(GPT_LAYERS):
        name = f"h{l}"
        a = linear(P, name + ".qkv", layernorm(P, name + ".ln1", h), 3 * d)
        h = h + linear(P, name + ".proj", self_attention(a, GPT_HEADS), d)
        m = F.gelu(linear(P, name + ".fc", layernorm(P, name + ".ln2", h), 4 * d))
        h = h + linear(P, name + ".fc2", m, d)
    return F.linear(layernorm(P, "ln_f", h), wte)


# ---- inputs and targets (the C test draws the same) ----
def uniform_inputs(P, shape):
    """Inputs 2u - 1, exact in float32."""
    u = rng_uniform(P.seed, STREAM_INPUTS, math.prod(shape))
    return torch.tensor((2.0 * u - 1.0).reshape(shape), dtype=P.dtype)


def targets(seed, n, classes, ignore_one_in):
    """rng_bits % classes, and -1 (ignored) where rng_bits of the ignore stream % ignore_one_in == 0."""
    t = (rng_bits(seed, STREAM_TARGETS, n) % np.uint64(classes)).astype(np.int64)
    if ignore_one_in:
        t[rng_bits(seed, STREAM_IGNORE, n) % np.uint64(ignore_one_in) == 0] = -1
    return t


def run_resnet20(P):
    B = 4
    x = uniform_inputs(P, (B, 3, 32, 32))
    y = torch.tensor(targets(P.seed, B, 10, 0))
    return B, F.cross_entropy(resnet20(P, x), y), int((y >= 0).sum())


UNET_SIZE = 64


def run_unet(P):
    B, H = 2, UNET_SIZE
    x = uniform_inputs(P, (B, 1, H, H))
    y = torch.tensor(targets(P.seed, B * H * H, 2, 8).reshape(B, H, H))
    return B, F.cross_entropy(unet(P, x), y, ignore_index=-1), int((y >= 0).sum())


def run_gpt(P):
    B, T = 2, GPT_CONTEXT
    tok = torch.tensor((rng_bits(P.seed, STREAM_INPUTS, B * T) % np.uint64(GPT_VOCAB)).astype(np.int64))
    y = torch.tensor(targets(P.seed, B * T, GPT_VOCAB, 8))
    logits = gpt(P, tok.reshape(B, T))
    return B, F.cross_entropy(logits.reshape(B * T, GPT_VOCAB), y, ignore_index=-1), int((y >= 0).sum())


MODELS = {"resnet20": (20, run_resnet20), "unet": (21, run_unet), "gpt": (22, run_gpt)}


# ---- writing ----
def stats(v):
    return [math.sqrt(float(np.dot(v, v))), float(v.sum()), float(np.abs(v).sum()), float(np.abs(v).max())]


def sample_line(seed, name, v):
    """32 elements, element k at index snug_rng_bits(seed, fnv1a64(name) + 1, k) % numel (repeats allowed), with 8
    significant digits (the test compares them within 1e-4 of the tensor's largest magnitude)."""
    idx = rng_bits(seed, (fnv1a64(name) + 1) & MASK, SAMPLES) % np.uint64(v.size)
    return "samples " + " ".join(f"{v[int(i)]:.7e}" for i in idx)


def evaluate(model, dtype):
    """Forward and backward of `model` in dtype: (Params with gradients, batch, loss, counted items)."""
    seed, run = MODELS[model]
    P = Params(seed, dtype)
    Kinks.near, Kinks.smallest = 0, math.inf
    batch, loss, items = run(P)
    loss.backward()
    return P, batch, float(loss), items


def tensors(P):
    """(name, is_buffer, values) in graph order: gradients of parameters, values of buffers, as float64."""
    return [(name, buf, (t if buf else t.grad).detach().double().numpy().ravel()) for name, t, buf, _, _ in P.entries]


def is_zero(st, grad_norm):
    """A gradient zero in exact arithmetic (a conv bias right before BatchNorm): float64 leaves ~1e-17."""
    return st[0] <= 1e-10 * grad_norm


def float32_error(ref, loss_ref, grad_norm, chk, loss_chk):
    """The worst error of a float32 run against the float64 reference, by the C test's criteria (with every
    element instead of 32 samples)."""
    worst = abs(loss_chk - loss_ref) / abs(loss_ref)
    for (_, _, b), (_, _, a) in zip(ref, chk):
        st = stats(b)
        if is_zero(st, grad_norm):
            worst = max(worst, float(np.linalg.norm(a)) / grad_norm * (TOL / ZERO_TOL))
            continue
        worst = max(worst, float(np.abs(a - b).max()) / st[3], abs(float(np.linalg.norm(a)) - st[0]) / st[0],
                    abs(float(a.sum()) - st[1]) / st[2])
    return worst


def write_reference(model, out_dir):
    P, batch, loss, items = evaluate(model, torch.float64)
    near, smallest = Kinks.near, Kinks.smallest
    ref = tensors(P)
    grad_norm = math.sqrt(sum(float(np.dot(v, v)) for _, buf, v in ref if not buf))
    # The test is fair only if float32 arithmetic can meet it at all: PyTorch's own float32 run must pass it
    # with a tenth of the tolerance to spare, or the configuration is too ill-conditioned (a ReLU input or a
    # max-pool tie within rounding of its kink flips a branch and moves a whole gradient element).
    P32, _, loss32, _ = evaluate(model, torch.float32)
    err32 = float32_error(ref, loss, grad_norm, tensors(P32), loss32)
    print(f"{model}: PyTorch float32 vs float64 {err32:.2e}; {near} kinks within {KINK_BAND:g} of their "
          f"RMS (the closest at {smallest:.2e})")
    if err32 > TOL / 10:
        sys.exit(f"{model}: PyTorch's float32 run is {err32:.2e} from the float64 reference, more than "
                 f"{TOL / 10:g}: the configuration is too ill-conditioned for a {TOL:g} test (choose another seed or "
                 "smaller shapes); nothing written")
    seed = P.seed
    lines = [
        f"# snug whole-model reference: {model}, generated by make_references.py with torch {torch.__version__}",
        "# (float64 forward and backward over float32 parameters and inputs drawn from snug's RNG;",
        f"# PyTorch's float32 run is within {err32:.1e} of it by the test's criteria)",
        f"model {model}", f"seed {seed}", f"batch {batch}", f"items {items}", f"loss {loss:.17g}",
        f"grad_norm {grad_norm:.17g}",
        # One draw of the RNG port, so the C test can tell a broken port from a broken model.
        f"rng {seed} {fnv1a64(model)} 12345 {int(rng_bits(seed, fnv1a64(model), 12346)[12345])}",
    ]
    for (name, buf, v), (_, _, _, offset, scale) in zip(ref, P.entries):
        st = stats(v)
        if buf:
            lines.append(f"buffer {name} {v.size} " + " ".join(f"{x:.17g}" for x in st))
        else:
            lines.append(f"param {name} {v.size} {offset!r} {scale!r} " + " ".join(f"{x:.17g}" for x in st) +
                         f" {int(is_zero(st, grad_norm))}")
        lines.append(sample_line(seed, name, v))
    path = os.path.join(out_dir, model + ".ref")
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")
    grads = [v for _, buf, v in ref if not buf]
    print(f"{path}: loss {loss:.9f} over {items} items, {len(grads)} parameter tensors, "
          f"{sum(g.size for g in grads)} parameters, |grad| {grad_norm:.6g}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default=os.path.dirname(os.path.abspath(__file__)), help="output folder")
    ap.add_argument("models", nargs="*", default=list(MODELS), help="models to write (default: all)")
    args = ap.parse_args()
    torch.set_num_threads(max(1, min(2, os.cpu_count() or 1)))
    for m in args.models:
        if m not in MODELS:
            sys.exit(f"unknown model {m!r}: choose from {', '.join(MODELS)}")
        write_reference(m, args.out)


if __name__ == "__main__":
    main()
