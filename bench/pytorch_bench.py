#!/usr/bin/python3
"""The benchmark workloads of `snug-bench` in PyTorch: same shapes, batches, optimizers, variants and timing
method, and the CSV columns of `snug-bench --csv`, so bench/compare.py reads both alike.

Run with Debian's python3-torch (apt-get install python3-torch):

    /usr/bin/python3 bench/pytorch_bench.py --workload cnn --variant full --threads 2 --csv torch.csv
    /usr/bin/python3 bench/pytorch_bench.py --check-shapes   # the models against tests/reference's

Method (as bench/harness/main.c): synthetic data held in memory (inputs U(-1, 1) or random token ids, targets
uniform over the classes); warm-up steps, then repeats of timed optimizer steps, the median; resident memory
from /proc/self/status, its high-water mark reset by writing 5 to /proc/self/clear_refs before the timed
steps. Activation RSS = peak RSS - RSS once the data exist but not the model - (parameters + gradients +
optimizer state), as snug's: the memory a step needs beyond the model's persistent state (PyTorch creates the
gradients and the optimizer state in the first step, snug before it, so "RSS just before the first step" would
not compare).

PyTorch's configuration: OPENBLAS_CORETYPE=SkylakeX when the CPU has AVX-512 and the variable is unset
(Debian's OpenBLAS 0.3.21 otherwise falls back to its generic Prescott kernel on some CPUs), oneDNN (mkldnn)
on, torch.set_num_threads(threads); for the convolution workloads --config auto times contiguous and
channels_last in child processes and keeps the faster. Each (workload, variant) is measured in a fresh child
process, so no measurement inherits another's memory; the parent only orchestrates and collects the rows.
With --turns (one workload, variant and --config) the process speaks the protocol of `snug-bench --turns` on
standard input and output instead, so that bench/duel.py can alternate blocks of steps of both frameworks.

The models are nn.Modules (an optimizer needs persistent parameters) with the layer structure of
tests/reference/make_references.py, whose functional models tests/test_reference_models.c matches against
snug to 1e-4; --check-shapes runs those reference functions once and checks that every parameter shape here
is the same, in the same order.
"""
import argparse
import csv
import io
import math
import os
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))

COLUMNS = ("framework,workload,variant,batch,micro_batch,micro_batches,threads,params,steps,repeats,ms_per_step,"
           "samples_per_s,step_gflop,gflops,sgemm_gflops,sgemm_fraction,planned_total_bytes,"
           "planned_activation_bytes,persistent_bytes,rss_start_bytes,rss_before_bytes,rss_peak_bytes,"
           "activation_rss_bytes,config,machine").split(",")

# name: (batch, optimizer, state tensors per parameter, convolutional)
WORKLOADS = {
    "mlp": (256, "sgd", 1, False),
    "cnn": (64, "sgd", 1, True),
    "resnet20": (128, "sgd", 1, True),
    "unet": (8, "adamw", 2, True),
    "gpt": (8, "adamw", 2, False),
}
VARIANTS = ("full", "accum4", "sqrt", "micro1")
AUTO_REPEAT_SECONDS, AUTO_MIN_STEPS, AUTO_MAX_STEPS = 1.0, 3, 200
# --turns: a block of steps takes about this long (snug's BENCH_BLOCK_SECONDS)
BLOCK_SECONDS = 0.25


def cpu_flags():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("flags"):
                    return set(line.split(":", 1)[1].split())
    except OSError:
        pass
    return set()


def set_blas_kernel():
    """Before torch (and with it OpenBLAS) loads: OpenBLAS reads the variable only then."""
    if "OPENBLAS_CORETYPE" not in os.environ and "avx512f" in cpu_flags():
        os.environ["OPENBLAS_CORETYPE"] = "SkylakeX"


def cpu_model():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return "unknown CPU"


# ---- resident memory, as bench/harness/rss.c ----
def release_freed():
    """glibc's malloc_trim(0), as snug's bench_rss_release_freed: memory the SGEMM probe and the data generation
    freed must not sit in the baseline RSS, where the step would reuse it unseen."""
    import ctypes
    import gc
    gc.collect()
    try:
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):
        pass


def rss():
    """(VmRSS, VmHWM) in bytes."""
    out = {}
    with open("/proc/self/status") as f:
        for line in f:
            key, _, value = line.partition(":")
            if key in ("VmRSS", "VmHWM"):
                out[key] = int(value.split()[0]) * 1024
    return out.get("VmRSS", 0), out.get("VmHWM", 0)


def reset_peak():
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
    except OSError:
        pass


# ---- the models (everything below runs in a measuring child, after torch is imported) ----
def build(name):
    import torch
    import torch.nn as nn
    import torch.nn.functional as F

    class Seq(nn.Module):
        """Layers in order; sqrt checkpointing cuts them into about sqrt(n) segments."""

        def __init__(self, layers):
            super().__init__()
            self.layers = nn.ModuleList(layers)

        def forward(self, x, ckpt=False):
            if not ckpt:
                for layer in self.layers:
                    x = layer(x)
                return x
            from torch.utils.checkpoint import checkpoint
            n = len(self.layers)
            per = math.ceil(n / max(1, round(math.sqrt(n))))
            for start in range(0, n, per):
                seg = nn.Sequential(*self.layers[start:start + per])
                # the last segment's activations are needed at once by backward: no point recomputing them
                x = seg(x) if start + per >= n else checkpoint(seg, x, use_reentrant=False)
            return x

    class Block(nn.Module):
        """A CIFAR ResNet basic block, 1x1 conv + BN shortcut when the shape changes (as make_references)."""

        def __init__(self, cin, cout, stride):
            super().__init__()
            self.conv1, self.bn1 = nn.Conv2d(cin, cout, 3, stride, 1), nn.BatchNorm2d(cout)
            self.conv2, self.bn2 = nn.Conv2d(cout, cout, 3, 1, 1), nn.BatchNorm2d(cout)
            self.down = None
            if stride != 1 or cin != cout:
                self.down = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, 0), nn.BatchNorm2d(cout))

        def forward(self, x):
            y = self.bn2(self.conv2(F.relu(self.bn1(self.conv1(x)))))
            return F.relu(y + (self.down(x) if self.down is not None else x))

    class Pool(nn.Module):
        def forward(self, x):
            return x.mean(dim=(2, 3))

    def resnet20():
        layers = [nn.Conv2d(3, 16, 3, 1, 1), nn.BatchNorm2d(16), nn.ReLU()]
        cin = 16
        for s, cout in enumerate((16, 32, 64), start=1):
            for b in range(1, 4):
                layers.append(Block(cin, cout, 2 if (b == 1 and s > 1) else 1))
                cin = cout
        return Seq(layers + [Pool(), nn.Linear(64, 10)])

    def double(cin, c):
        return nn.Sequential(nn.Conv2d(cin, c, 3, 1, 1), nn.GroupNorm(8, c), nn.ReLU(),
                             nn.Conv2d(c, c, 3, 1, 1), nn.GroupNorm(8, c), nn.ReLU())

    class UNet(nn.Module):
        """Levels 16/32/64/128, bottleneck 256; skips concatenated before the up-sampled channels."""

        def __init__(self):
            super().__init__()
            widths = (16, 32, 64, 128)
            self.enc = nn.ModuleList(double(cin, c) for cin, c in zip((1,) + widths[:-1], widths))
            self.mid = double(128, 256)
            self.up = nn.ModuleList(nn.ConvTranspose2d(2 * c, c, 2, 2) for c in reversed(widths))
            self.dec = nn.ModuleList(double(2 * c, c) for c in reversed(widths))
            self.head = nn.Conv2d(16, 2, 1)

        def forward(self, x, ckpt=False):
            from torch.utils.checkpoint import checkpoint

            # sqrt: the skips cross any sequential cut, so each double-conv block is its own segment
            def run(block, h):
                return checkpoint(block, h, use_reentrant=False) if ckpt else block(h)

            skips = []
            for block in self.enc:
                x = run(block, x)
                skips.append(x)
                x = F.max_pool2d(x, 2)
            x = run(self.mid, x)
            for up, block, skip in zip(self.up, self.dec, reversed(skips)):
                x = run(block, torch.cat([skip, up(x)], dim=1))
            return self.head(x)

    class Embed(nn.Module):
        def __init__(self):
            super().__init__()
            self.wte, self.wpe = nn.Embedding(256, 256), nn.Embedding(256, 256)

        def forward(self, tok):
            return self.wte(tok) + self.wpe.weight[: tok.shape[1]]

    class GPTBlock(nn.Module):
        def __init__(self, d=256, heads=4):
            super().__init__()
            self.heads = heads
            self.ln1, self.qkv, self.proj = nn.LayerNorm(d), nn.Linear(d, 3 * d), nn.Linear(d, d)
            self.ln2, self.fc, self.fc2 = nn.LayerNorm(d), nn.Linear(d, 4 * d), nn.Linear(4 * d, d)
            self.register_buffer("mask", torch.ones(256, 256, dtype=torch.bool).tril(), persistent=False)

        def forward(self, h):
            B, T, C = h.shape
            D = C // self.heads
            q, k, v = (t.reshape(B, T, self.heads, D).transpose(1, 2) for t in self.qkv(self.ln1(h)).split(C, 2))
            s = (q @ k.transpose(-1, -2)) / math.sqrt(D)
            s = s.masked_fill(~self.mask[:T, :T], float("-inf"))
            h = h + self.proj((s.softmax(-1) @ v).transpose(1, 2).reshape(B, T, C))
            return h + self.fc2(F.gelu(self.fc(self.ln2(h))))

    class Head(nn.Module):
        """Final LayerNorm and the output head tied to the token embedding."""

        def __init__(self, embed):
            super().__init__()
            self.ln_f = nn.LayerNorm(256)
            self.embed = [embed]  # a plain list: the weight belongs to the embedding, once

        def forward(self, h):
            return F.linear(self.ln_f(h), self.embed[0].wte.weight)

    if name == "mlp":
        return Seq([nn.Flatten(), nn.Linear(784, 1024), nn.ReLU(), nn.Linear(1024, 1024), nn.ReLU(),
                    nn.Linear(1024, 10)])
    if name == "cnn":
        return Seq([nn.Conv2d(1, 32, 3, 1, 1), nn.ReLU(), nn.MaxPool2d(2), nn.Conv2d(32, 64, 3, 1, 1), nn.ReLU(),
                    nn.MaxPool2d(2), nn.Flatten(), nn.Linear(3136, 128), nn.ReLU(), nn.Linear(128, 10)])
    if name == "resnet20":
        return resnet20()
    if name == "unet":
        return UNet()
    embed = Embed()
    return Seq([embed] + [GPTBlock() for _ in range(4)] + [Head(embed)])


def synthetic(name, batch):
    """Inputs and targets of one global batch, the distributions of bench/harness/data.c."""
    import torch
    g = torch.Generator().manual_seed(1)
    if name == "gpt":
        return (torch.randint(0, 256, (batch, 256), generator=g), torch.randint(0, 256, (batch, 256), generator=g))
    shape, classes, per_pixel = {"mlp": ((1, 28, 28), 10, False), "cnn": ((1, 28, 28), 10, False),
                                 "resnet20": ((3, 32, 32), 10, False), "unet": ((1, 256, 256), 2, True)}[name]
    x = torch.rand((batch,) + shape, generator=g) * 2 - 1
    y = torch.randint(0, classes, (batch, 256, 256) if per_pixel else (batch,), generator=g)
    return x, y


def step_flops(name, batch):
    """Forward + backward FLOPs of one step, counted as the planner counts them: 3x the forward multiply-adds
    x 2 of the matrix products and convolutions (the other ops are a few percent), less the input gradient of the
    first layer, which neither framework computes (the data needs none). Only for the GFLOP/s column;
    compare.py reports the ratio of samples/s, which needs no FLOP count."""
    def conv(cin, cout, k, hw):
        return 2 * cin * cout * k * k * hw * hw

    first = {"mlp": 2 * 784 * 1024, "cnn": conv(1, 32, 3, 28), "resnet20": conv(3, 16, 3, 32),
             "unet": conv(1, 16, 3, 256)}.get(name, 0)  # gpt starts with an embedding: no product
    if name == "mlp":
        f = 2 * (784 * 1024 + 1024 * 1024 + 1024 * 10)
    elif name == "cnn":
        f = conv(1, 32, 3, 28) + conv(32, 64, 3, 14) + 2 * (3136 * 128 + 128 * 10)
    elif name == "resnet20":
        f = conv(3, 16, 3, 32) + 6 * conv(16, 16, 3, 32) + conv(16, 32, 3, 16) + 5 * conv(32, 32, 3, 16) \
            + conv(16, 32, 1, 16) + conv(32, 64, 3, 8) + 5 * conv(64, 64, 3, 8) + conv(32, 64, 1, 8) + 2 * 640
    elif name == "unet":
        f, hw, cin = 0, 256, 1
        for c in (16, 32, 64, 128):
            f += conv(cin, c, 3, hw) + conv(c, c, 3, hw)
            cin, hw = c, hw // 2
        f += conv(128, 256, 3, hw) + conv(256, 256, 3, hw)
        for c in (128, 64, 32, 16):
            hw *= 2
            f += 2 * (2 * c) * c * 4 * (hw // 2) ** 2 + conv(2 * c, c, 3, hw) + conv(c, c, 3, hw)
        f += conv(16, 2, 1, 256)
    else:
        T, d = 256, 256
        f = 4 * (2 * T * d * 12 * d + 2 * 2 * T * T * d) + 2 * T * d * 256
    return (3.0 * f - first) * batch


# ---- one measurement ----
# --precision bf16: torch.autocast("cpu", dtype=torch.bfloat16) around the forward (PyTorch's bf16-mixed)
AUTOCAST = False


def loss_of(name, model, x, y, ckpt, items):
    import torch
    import torch.nn.functional as F
    with torch.autocast("cpu", dtype=torch.bfloat16, enabled=AUTOCAST):
        out = model(x, ckpt=ckpt)
        if name == "gpt":
            out, y = out.reshape(-1, 256), y.reshape(-1)
        # summed over the items and divided by those of the whole global batch, as snug normalises
        return F.cross_entropy(out.float(), y, reduction="sum") / items


def gradient_gap(args):
    """--gradient-gap: the relative L2 distance between a model's bf16 (autocast) and float32 gradients at
    initialisation, and between float32's and float32's with the input rounded to bfloat16, on one synthetic
    batch (the yardstick of tests/test_precision.c)."""
    import torch
    global AUTOCAST
    torch.set_num_threads(args.threads)
    for name in WORKLOADS if args.workload == "all" else [args.workload]:
        torch.manual_seed(11)
        model = build(name)
        x, y = synthetic(name, 4)
        grads = []
        for autocast, rounded in ((False, False), (True, False), (False, True)):
            AUTOCAST = autocast
            model.zero_grad(set_to_none=True)
            xin = x.to(torch.bfloat16).float() if rounded and x.is_floating_point() else x
            loss_of(name, model, xin, y, False, y.numel()).backward()
            grads.append(torch.cat([p.grad.flatten() for p in model.parameters() if p.grad is not None]))
        AUTOCAST = False
        gap = lambda a: float((a - grads[0]).norm() / grads[0].norm())
        print("pytorch %-9s gradient rel L2: autocast bf16 %.2e, float32 with its input rounded %.2e"
              % (name, gap(grads[1]), gap(grads[2])))
    return 0


def train_step(name, model, opt, x, y, m, ckpt):
    items = y.numel()
    opt.zero_grad(set_to_none=True)
    for start in range(0, x.shape[0], m):
        loss_of(name, model, x[start:start + m], y[start:start + m], ckpt, items).backward()
    opt.step()


def sgemm_gflops(n, tries=3):
    import torch
    a, b = torch.rand(n, n), torch.rand(n, n)
    best = 0.0
    for t in range(tries + 1):
        t0 = time.perf_counter()
        torch.mm(a, b)
        s = time.perf_counter() - t0
        if t:
            best = max(best, 2.0 * n ** 3 / s * 1e-9)
    return best


class Trainer:
    """One workload's model, optimizer and batch in one variant, ready to step (as snug's bench_case)."""

    def __init__(self, args):
        import torch
        torch.set_num_threads(args.threads)
        torch.backends.mkldnn.enabled = True
        self.name, variant = args.workload, args.variant
        self.batch, optim, self.states, _ = WORKLOADS[self.name]
        self.m = {"full": self.batch, "sqrt": self.batch, "accum4": math.ceil(self.batch / 4), "micro1": 1}[variant]
        self.sgemm = sgemm_gflops(args.sgemm_size)  # also starts the BLAS's threads and buffers, as snug's probe
        self.x, self.y = synthetic(self.name, self.batch)
        release_freed()
        self.rss_start, _ = rss()  # as snug's: the data exist, the model does not
        torch.manual_seed(1)
        self.model = build(self.name)
        if args.config == "channels_last":
            self.model = self.model.to(memory_format=torch.channels_last)
            self.x = self.x.contiguous(memory_format=torch.channels_last)
        params = list(self.model.parameters())
        self.numel = sum(p.numel() for p in params)
        if optim == "sgd":
            self.opt = torch.optim.SGD(params, lr=0.01, momentum=0.9)
        else:
            self.opt = torch.optim.AdamW(params, lr=1e-3, weight_decay=0.01)
        self.model.train()
        self.rss_before, _ = rss()
        self.ckpt = variant == "sqrt"

    def run(self, steps):
        """Seconds that `steps` optimizer steps took."""
        t0 = time.perf_counter()
        for _ in range(steps):
            train_step(self.name, self.model, self.opt, self.x, self.y, self.m, self.ckpt)
        return time.perf_counter() - t0

    def warm_up(self, warmup, steps, target_seconds, min_steps):
        """`warmup` untimed steps (at least one where steps is 0); the timed steps per repeat: `steps`, or where
        it is 0 as many as take about target_seconds by the last warm-up step (snug's bench_case_warm_up)."""
        if warmup > 1:
            self.run(warmup - 1)
        last = self.run(1) if warmup > 0 or steps == 0 else 0.0
        return steps or int(min(max(math.ceil(target_seconds / max(last, 1e-9)), min_steps), AUTO_MAX_STEPS))


def turns(args):
    """--turns: the protocol of `snug-bench --turns` (bench/harness/turns.c): "ready STEPS" once warm, then for
    every "go" line one untimed step and a block of timed steps, "block STEPS SECONDS"; ends at the end of
    input. Returns the exit status."""
    tr = Trainer(args)
    steps = tr.warm_up(args.warmup, args.steps, BLOCK_SECONDS, 1)
    print("ready %d" % steps, flush=True)
    for line in sys.stdin:
        if line.strip() != "go":
            print("pytorch_bench.py --turns: expected \"go\" or the end of input, got %r" % line.strip()[:40],
                  file=sys.stderr)
            return 2
        tr.run(1)
        print("block %d %.9f" % (steps, tr.run(steps)), flush=True)
    return 0


def measure(args):
    import torch
    tr = Trainer(args)
    name, variant, batch, m, sgemm = tr.name, args.variant, tr.batch, tr.m, tr.sgemm
    steps = tr.warm_up(args.warmup, args.steps, AUTO_REPEAT_SECONDS, AUTO_MIN_STEPS)
    reset_peak()
    ms = statistics.median(1e3 * tr.run(steps) / steps for _ in range(args.repeats))
    _, peak = rss()
    flops = step_flops(name, batch)
    gflops = flops * 1e-9 / (ms * 1e-3)
    persistent = tr.numel * 4 * (2 + tr.states)  # parameters, gradients and optimizer state
    return {
        "framework": "pytorch", "workload": name, "variant": variant, "batch": batch, "micro_batch": m,
        "micro_batches": math.ceil(batch / m), "threads": args.threads, "params": tr.numel, "steps": steps,
        "repeats": args.repeats, "ms_per_step": "%.4f" % ms, "samples_per_s": "%.3f" % (1e3 * batch / ms),
        "step_gflop": "%.6f" % (flops * 1e-9), "gflops": "%.3f" % gflops, "sgemm_gflops": "%.3f" % sgemm,
        "sgemm_fraction": "%.4f" % (gflops / sgemm if sgemm else 0), "planned_total_bytes": "",
        "planned_activation_bytes": "", "persistent_bytes": persistent, "rss_start_bytes": tr.rss_start,
        "rss_before_bytes": tr.rss_before, "rss_peak_bytes": peak,
        "activation_rss_bytes": max(0, peak - tr.rss_start - persistent),
        "config": "torch %s, %s, mkldnn%s, OPENBLAS_CORETYPE=%s" % (
            torch.__version__, args.config, ", autocast bf16" if AUTOCAST else "",
            os.environ.get("OPENBLAS_CORETYPE", "unset")),
        "machine": "%s, %d cores, %d threads, PyTorch %s" % (cpu_model(), os.cpu_count() or 0, args.threads,
                                                             torch.__version__),
    }


# ---- the parent: one child process per measurement ----
def child(args, workload, variant, config, steps=None, repeats=None, warmup=None):
    cmd = [sys.executable, os.path.abspath(__file__), "--child", "--workload", workload, "--variant", variant,
           "--config", config, "--threads", str(args.threads), "--sgemm-size", str(args.sgemm_size),
           "--steps", str(args.steps if steps is None else steps),
           "--repeats", str(args.repeats if repeats is None else repeats),
           "--warmup", str(args.warmup if warmup is None else warmup), "--precision", args.precision]
    out = subprocess.run(cmd, check=True, stdout=subprocess.PIPE, text=True).stdout
    return list(csv.DictReader(io.StringIO(out)))[0]


def choose_config(args, workload):
    """The faster memory format for a convolution workload, timed on the full batch."""
    if args.config != "auto":
        return args.config
    if not WORKLOADS[workload][3]:
        return "contiguous"
    times = {c: float(child(args, workload, "full", c, steps=2, repeats=1, warmup=1)["ms_per_step"])
             for c in ("contiguous", "channels_last")}
    return min(times, key=times.get)


def check_shapes():
    """Every parameter shape of the resnet20, unet and gpt modules equals the reference's, in order."""
    import torch
    sys.path.insert(0, os.path.join(HERE, "..", "tests", "reference"))
    import make_references as ref
    bad = 0
    for name, run in (("resnet20", lambda P: ref.resnet20(P, ref.uniform_inputs(P, (1, 3, 32, 32)))),
                      ("unet", lambda P: ref.unet(P, ref.uniform_inputs(P, (1, 1, 256, 256)))),
                      ("gpt", lambda P: ref.gpt(P, torch.zeros(1, 256, dtype=torch.long)))):
        P = ref.Params(1, torch.float32)
        with torch.no_grad():
            run(P)
        want = [tuple(t.shape) for (_, t, is_buffer, _, _) in P.entries if not is_buffer]
        # snug's conv-transpose weight is (C, Co, k, k), as PyTorch's; the UNet's ModuleLists are ordered by
        # kind, so compare the multisets
        have = [tuple(p.shape) for p in build(name).parameters()]
        ok = sorted(want) == sorted(have)
        bad += not ok
        print("%s: %d parameter tensors, %d elements: %s" % (name, len(have), sum(math.prod(s) for s in have),
                                                             "same shapes as make_references.py" if ok else
                                                             "DIFFERENT from make_references.py"))
    return 1 if bad else 0


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--workload", default="all", choices=list(WORKLOADS) + ["all"])
    p.add_argument("--variant", default="all", choices=list(VARIANTS) + ["all"])
    p.add_argument("--steps", type=int, default=0, help="timed steps per repeat; 0: about one second's worth")
    p.add_argument("--warmup", type=int, default=2)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    p.add_argument("--sgemm-size", type=int, default=2048)
    p.add_argument("--config", default="auto", choices=("auto", "contiguous", "channels_last"))
    p.add_argument("--csv", help="write the rows here (default: stdout)")
    p.add_argument("--check-shapes", action="store_true", help="compare the models with tests/reference's")
    p.add_argument("--choose-config", action="store_true", help="print the configuration --config auto picks")
    p.add_argument("--turns", action="store_true",
                   help="take turns with another process: one workload and variant, a block of steps timed for "
                        "every \"go\" line on standard input (the protocol of snug-bench --turns)")
    p.add_argument("--precision", default="fp32", choices=("fp32", "bf16"),
                   help="bf16: the forward under torch.autocast(\"cpu\", dtype=torch.bfloat16)")
    p.add_argument("--gradient-gap", action="store_true",
                   help="print how far each model's bf16 gradient lies from its float32 one, and exit")
    p.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = p.parse_args()
    global AUTOCAST
    AUTOCAST = args.precision == "bf16"
    if args.steps < 0 or args.warmup < 0 or args.repeats < 1 or args.threads < 1:
        p.error("--steps and --warmup must be >= 0, --repeats and --threads >= 1")
    set_blas_kernel()
    if args.gradient_gap:
        return gradient_gap(args)
    if args.check_shapes:
        return check_shapes()
    if args.choose_config:
        print(choose_config(args, args.workload if args.workload != "all" else "cnn"))
        return 0
    if args.turns:
        if args.workload == "all" or args.variant == "all" or args.config == "auto":
            p.error("--turns times one trainer: choose one --workload, one --variant and a --config")
        return turns(args)
    if args.child:
        rows = [measure(args)]
    else:
        rows = []
        for w in WORKLOADS if args.workload == "all" else [args.workload]:
            config = choose_config(args, w)
            for v in VARIANTS if args.variant == "all" else [args.variant]:
                rows.append(child(args, w, v, config))
                print("pytorch %-9s %-7s %10s ms/step %10s samples/s" % (w, v, rows[-1]["ms_per_step"],
                                                                         rows[-1]["samples_per_s"]),
                      file=sys.stderr)
    out = open(args.csv, "w", newline="") if args.csv else sys.stdout
    writer = csv.DictWriter(out, fieldnames=COLUMNS)
    writer.writeheader()
    writer.writerows(rows)
    if args.csv:
        out.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
