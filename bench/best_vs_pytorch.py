#!/usr/bin/env python3
"""snug's best precision against PyTorch's best, workload by workload, taking turns on the same cores.

    python3 bench/best_vs_pytorch.py --bench build/bench/snug-bench --duels 6 --out bench/results

Each framework trains every workload at full batch in float32 and in bfloat16 (snug: --precision bf16, its
planned bf16 activations and products; PyTorch: its forward under torch.autocast("cpu", dtype=torch.bfloat16),
PyTorch's bf16 mixed precision). Every pairing of the two (snug fp32 or bf16 against PyTorch fp32 or bf16) is
one duel (bench/duel.py: one live process of each, blocks of steps alternating), so every ratio compares two
processes in the same state of the host. With r(s, t) the median of snug's samples/s over PyTorch's for snug in
precision s against PyTorch in t, snug's best over PyTorch's best is max over s of min over t of r(s, t): the
fastest snug against the fastest PyTorch, whichever precision each is fastest in. Writes best_vs_pytorch.csv
(every pair) and best_vs_pytorch.md (the table, the geometric mean, the machine) under --out. Standard library
only; PyTorch runs under Debian's /usr/bin/python3 unless --python names another interpreter.
"""
import argparse
import math
import os
import statistics
import subprocess

import duel

HERE = os.path.dirname(os.path.abspath(__file__))
WORKLOADS = ("mlp", "cnn", "resnet20", "unet", "gpt")
PRECISIONS = ("fp32", "bf16")
TORCH_PYTHON = "/usr/bin/python3"  # Debian's python3-torch; --python for another
WARMUP = 5  # untimed steps before a process reports ready (PyTorch's second step still creates state)


def cpu_line():
    """The CPU's model name and whether it has AVX-512 and AVX512_BF16: the figures depend on both."""
    name, flags = "unknown CPU", set()
    try:
        with open("/proc/cpuinfo") as fh:
            for line in fh:
                key, _, value = line.partition(":")
                if key.strip() == "model name" and name == "unknown CPU":
                    name = value.strip()
                elif key.strip() == "flags":
                    flags = set(value.split())
                    break
    except OSError:
        pass
    has = [f for f in ("avx2", "avx512f", "avx512_bf16", "amx_bf16") if f in flags]
    return "%s, %d CPUs, %s" % (name, os.cpu_count() or 1, " ".join(has) or "no AVX2")


def peaks(bench, threads):
    """bench_fma_peak's float32 and bf16 lines (GFLOP/s from registers), as printed, or []."""
    exe = os.path.join(os.path.dirname(os.path.abspath(bench)), "bench_fma_peak")
    if not os.access(exe, os.X_OK):
        return []
    out = subprocess.run([exe, str(threads)], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True).stdout
    return [line.strip() for line in out.splitlines() if "peak_gflops" in line]


def pairing_rows(args, env, w, s, t):
    """The pairs of one duel: snug-bench in precision s against pytorch_bench.py in precision t."""
    turns = ["--workload", w, "--variant", "full", "--turns", "--threads", str(args.threads), "--steps", "0",
             "--warmup", str(WARMUP)]
    config = subprocess.run([args.python, os.path.join(HERE, "pytorch_bench.py"), "--choose-config", "--workload",
                             w, "--threads", str(args.threads)], env=env, check=True, stdout=subprocess.PIPE,
                            text=True).stdout.strip()
    rows = duel.duel([args.bench, "--precision", s] + turns,
                     [args.python, os.path.join(HERE, "pytorch_bench.py"), "--config", config, "--precision", t]
                     + turns, env, args.duels, lambda: "", w, "full", "%s/%s" % (s, t))
    return rows


def best_ratio(medians):
    """max over snug's precisions of min over PyTorch's: snug's fastest over PyTorch's fastest. A precision a
    framework cannot train the workload in (None: PyTorch 1.13's autocast on the GroupNorm UNet) is no
    candidate for its best."""
    return max(min(medians[(s, t)] for t in PRECISIONS if medians[(s, t)] is not None) for s in PRECISIONS)


def markdown(args, table, pairs_csv):
    lines = ["# snug's best against PyTorch's best", "",
             "CPU: %s. %d threads. `python3 bench/best_vs_pytorch.py --bench %s --threads %d --duels %d`; every pair "
             "in %s." % (cpu_line(), args.threads, args.bench, args.threads, args.duels, pairs_csv), ""]
    lines += ["Register peaks, one thread (`bench_fma_peak 1`): %s." % ("; ".join(args.peaks) or "not built"), ""]
    lines += ["Median of snug's samples/s over PyTorch's per pairing (snug precision / PyTorch precision), and snug's "
              "best over PyTorch's best (max over snug's precision of min over PyTorch's; \"fails\": PyTorch could "
              "not train the workload in that precision, so it is no candidate for PyTorch's best):", "",
              "| workload | fp32/fp32 | fp32/bf16 | bf16/fp32 | bf16/bf16 | best/best |",
              "|---|--:|--:|--:|--:|--:|"]
    for w, medians in table:
        cells = ["fails" if medians[(s, t)] is None else "%.2f" % medians[(s, t)] for s in PRECISIONS
                 for t in PRECISIONS]
        lines.append("| %s | %s | **%.2f** |" % (w, " | ".join(cells), best_ratio(medians)))
    gm = math.exp(statistics.mean(math.log(best_ratio(m)) for _, m in table))
    lines += ["", "Geometric mean of best/best over %d workloads: **%.2f**." % (len(table), gm), ""]
    return "\n".join(lines), gm


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--bench", default="build/bench/snug-bench")
    p.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    p.add_argument("--duels", type=int, default=6, help="pairs of blocks per pairing")
    p.add_argument("--workloads", nargs="+", default=list(WORKLOADS), choices=WORKLOADS)
    p.add_argument("--out", default=os.path.join(HERE, "results"))
    p.add_argument("--python", default=TORCH_PYTHON, help="the Python interpreter that has PyTorch")
    args = p.parse_args()
    env = dict(os.environ)
    args.peaks = peaks(args.bench, 1)
    all_rows, table = [], []
    for w in args.workloads:
        medians, failing = {}, set()
        for s in PRECISIONS:
            for t in PRECISIONS:
                if t in failing:
                    medians[(s, t)] = None
                    continue
                try:
                    rows = pairing_rows(args, env, w, s, t)
                except RuntimeError as e:  # PyTorch cannot train w in t: say so, and its best is the other
                    if not str(e).startswith("pytorch_bench.py"):
                        raise
                    print("%-9s PyTorch %s fails: %s" % (w, t, e), flush=True)
                    failing.add(t)
                    medians[(s, t)] = None
                    continue
                all_rows += rows
                medians[(s, t)] = statistics.median(float(r["ratio"]) for r in rows)
                print("%-9s snug %s against PyTorch %s: %.3f" % (w, s, t, medians[(s, t)]), flush=True)
        table.append((w, medians))
        print("%-9s snug's best over PyTorch's best: %.3f" % (w, best_ratio(medians)), flush=True)
    os.makedirs(args.out, exist_ok=True)
    pairs_csv = os.path.join(args.out, "best_vs_pytorch.csv")
    duel.write_csv(pairs_csv, all_rows)
    text, gm = markdown(args, table, os.path.basename(pairs_csv))
    with open(os.path.join(args.out, "best_vs_pytorch.md"), "w") as fh:
        fh.write(text)
    print("geometric mean of snug's best over PyTorch's best: %.3f" % gm)


if __name__ == "__main__":
    main()
