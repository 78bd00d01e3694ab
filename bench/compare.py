#!/usr/bin/env python3
"""Runs the benchmark workloads in snug and in PyTorch in the same run, interleaved (snug, PyTorch, snug, ...
per workload and variant, so that drift in the machine's load hits both), and writes
bench/results/workloads.csv and workloads.md: snug's figures with their PyTorch ratios, the machine, the SGEMM
rate, the geometric mean of the full-batch ratios and the must-shows, met or not. Standard library only.

    python3 bench/compare.py run --bench build/bench/snug-bench --out bench/results   # what `make bench` does
    python3 bench/compare.py merge SNUG.csv TORCH.csv [--paired PAIRED.csv] [--duel DUEL.csv] --out DIR
                                                                             # only merge CSV files

Every measurement is a fresh process, 3 per framework for each workload and variant, alternating (--processes;
the median process is reported: a whole process can land in a slow mode on a small virtual machine), in rounds
that run every variant of a workload in turn; the must-shows that compare a variant with full batch take the
median of the rounds' ratios (snug-bench --workload W --variant V; pytorch_bench.py the same), so no
measurement's resident memory includes another's. Those must-shows (4 micro-batches, micro-batch 1, sqrt against
full batch) come from a third kind of snug process per round and variant, `snug-bench --paired`: both trainers in
one process, blocks of steps alternating, so that each ratio compares steps run within a second of each other
rather than processes a minute apart on a host whose speed changes in between (workloads_paired.csv). The
full-batch must-shows against PyTorch come the same way from a duel per round and workload (bench/duel.py): a
live snug process and a live PyTorch process taking turns in blocks of steps on the same cores
(workloads_duel.csv); the separate processes' ratios are listed beside. Both run under the same
OMP_WAIT_POLICY: by default the variable is unset, so the OpenMP runtime spins briefly between parallel regions
and then sleeps (what a user gets, and PyTorch's fastest setting on a quiet machine); `--wait-policy passive`
(threads sleep at once, kinder to a shared machine) is the configuration for a machine shared with other work
(docs/performance.md).
"""
import argparse
import csv
import math
import os
import statistics
import subprocess
import sys
import tempfile

import duel

HERE = os.path.dirname(os.path.abspath(__file__))
WORKLOADS = ("mlp", "cnn", "resnet20", "unet", "gpt")
VARIANTS = ("full", "cheap", "accum4", "sqrt", "micro1")
# The variants whose must-shows compare them with full batch: measured paired too (snug-bench --paired).
PAIRED_VARIANTS = ("accum4", "sqrt", "micro1")
# Untimed steps before a duel's process reports ready: enough that its first block's length is sized on a warm
# step (PyTorch's second step still creates state).
DUEL_WARMUP = 5
# PyTorch has no counterpart of snug's cheap policy (replaying norms and element-wise layers): its row there is
# PyTorch's full batch, measured again right after snug's.
TORCH_VARIANT = {"cheap": "full"}
TORCH_PYTHON = "/usr/bin/python3"  # Debian's python3-torch lives there, whatever python3 is first on PATH
MIB = 1024.0 * 1024.0


def read_rows(path):
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


# A round trip between two threads above this many ns: their cores do not share a last-level cache (~50 ns where
# they do; ~340 ns on the machine of docs/performance.md where its host placed the two vCPUs apart).
APART_NS = 150.0
# The states a pair or process is judged in when its probe agreed before and after ('mixed' otherwise).
STATES = ("shared", "apart")


def cache_state(probe):
    """'shared' or 'apart' (bench_cache_pair's round trip right now), or '' without a probe."""
    if not probe:
        return ""
    out = subprocess.run([probe], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True).stdout.split()
    if len(out) != 2:
        return ""
    return "apart" if float(out[1]) > APART_NS else "shared"


def fma_peak(bench, threads):
    """GFLOP/s of fused multiply-adds from registers (bench_fma_peak beside snug-bench in the build), or None."""
    peak = os.path.join(os.path.dirname(os.path.abspath(bench)), "bench_fma_peak")
    if not os.access(peak, os.X_OK):
        return None
    out = subprocess.run([peak, str(threads)], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True).stdout
    words = out.split()
    return float(words[1]) if len(words) >= 2 and words[0] == "fma_peak_gflops" else None


def timed(cmd, env, probe):
    """Runs one measured process; the cache state before and after it: 'shared', 'apart', or 'mixed' where the
    host moved the threads' cores during it."""
    before = cache_state(probe)
    subprocess.run(cmd, env=env, check=True, stdout=subprocess.DEVNULL)
    after = cache_state(probe)
    return before if before == after else "mixed"


def median_row(rows):
    """The row of the median process by samples/s (the lower middle one for an even count), with every
    process's samples/s attached: on a 2-vCPU virtual machine a whole process can run in a slow mode (the same
    binary at 14 or 21 ms per step), which the repeats inside one process cannot see."""
    ranked = sorted(rows, key=lambda r: float(r["samples_per_s"]))
    row = dict(ranked[(len(ranked) - 1) // 2])
    row["process_samples_per_s"] = " ".join("%.1f" % float(r["samples_per_s"]) for r in rows)
    row["process_caches"] = " ".join(r.get("caches") or "-" for r in rows)
    return row


def run(args):
    env = dict(os.environ)
    if args.wait_policy == "default":
        env.pop("OMP_WAIT_POLICY", None)
    else:
        env["OMP_WAIT_POLICY"] = args.wait_policy
    common = ["--threads", str(args.threads), "--repeats", str(args.repeats), "--steps", str(args.steps)]
    probe = args.cache_probe or os.path.join(os.path.dirname(os.path.abspath(args.bench)), "bench_cache_pair")
    probe = probe if args.threads > 1 and os.access(probe, os.X_OK) else ""
    snug_rows, torch_rows, paired_rows, duel_rows = [], [], [], []
    paired = [v for v in PAIRED_VARIANTS if v in args.variants] if args.pairs > 0 else []
    duels = [v for v in duel.DUEL_VARIANTS if v in args.variants] if args.duels > 0 else []
    with tempfile.TemporaryDirectory() as tmp:
        for w in args.workloads:
            config = subprocess.run([TORCH_PYTHON, os.path.join(HERE, "pytorch_bench.py"), "--choose-config",
                                     "--workload", w, "--threads", str(args.threads)], env=env, check=True,
                                    stdout=subprocess.PIPE, text=True).stdout.strip()
            # Rounds of every variant in turn (full, cheap, accum4, ... then again), so that a slow spell of the
            # machine, which can last minutes, hits each variant of a workload alike: the must-shows compare
            # variants with full batch round by round (paired_ratio). Within a round snug's variants run back to
            # back, then PyTorch's: this host flips between two states every few minutes (full batch 6300 or
            # 9400 samples/s on the cnn, micro-batch 1 3700 or 6000), and a round whose full batch and
            # micro-batch 1 ran eight processes apart measured the flip (0.40) instead of snug (0.60-0.64).
            snug_runs = {v: [] for v in args.variants}
            torch_runs = {v: [] for v in args.variants}
            for rnd in range(args.processes):
                for v in args.variants:
                    out = os.path.join(tmp, "snug.csv")
                    caches = timed([args.bench, "--workload", w, "--variant", v, "--csv", out] + common,
                                   env, probe)
                    snug_runs[v] += [dict(r, caches=caches) for r in read_rows(out)]
                for v in paired:
                    out = os.path.join(tmp, "paired.csv")
                    caches = timed([args.bench, "--workload", w, "--variant", v, "--paired", "--repeats",
                                    str(args.pairs), "--steps", str(args.steps), "--threads", str(args.threads),
                                    "--csv", out], env, probe)
                    paired_rows += [dict(r, caches=caches) for r in read_rows(out)]
                for v in args.variants:
                    out = os.path.join(tmp, "torch.csv")
                    caches = timed([TORCH_PYTHON, os.path.join(HERE, "pytorch_bench.py"), "--child", "--workload",
                                    w, "--variant", TORCH_VARIANT.get(v, v), "--config", config, "--csv", out]
                                   + common, env, probe)
                    torch_runs[v] += [dict(r, variant=v, caches=caches) for r in read_rows(out)]
                for v in duels:
                    turns = ["--workload", w, "--variant", v, "--turns", "--threads", str(args.threads), "--steps",
                             str(args.steps), "--warmup", str(DUEL_WARMUP)]
                    duel_rows += duel.duel([args.bench] + turns,
                                           [TORCH_PYTHON, os.path.join(HERE, "pytorch_bench.py"), "--config",
                                            config] + turns, env, args.duels, lambda: cache_state(probe), w, v, rnd)
            for v in args.variants:
                snug_rows.append(median_row(snug_runs[v]))
                torch_rows.append(median_row(torch_runs[v]))
                s, t = snug_rows[-1], torch_rows[-1]
                print("%-9s %-7s snug %10.1f samples/s   pytorch %10.1f samples/s   ratio %.2f   (processes: %s | %s;"
                      " caches: %s | %s)"
                      % (w, v, float(s["samples_per_s"]), float(t["samples_per_s"]),
                         float(s["samples_per_s"]) / float(t["samples_per_s"]), s["process_samples_per_s"],
                         t["process_samples_per_s"], s["process_caches"], t["process_caches"]), flush=True)
            for v in duels:
                rs = [r for r in duel_rows if r["workload"] == w and r["variant"] == v]
                print("%-9s %-7s snug against PyTorch, taking turns: %s (caches: %s)" % (
                    w, v, " ".join(r["ratio"] for r in rs), " ".join(r["caches"] or "-" for r in rs)), flush=True)
            for v in paired:
                rs = [r for r in paired_rows if r["workload"] == w and r["variant"] == v]
                print("%-9s %-7s against full batch, paired in one process: %s (caches: %s)" % (
                    w, v, " | ".join(r["pair_ratios"] for r in rs), " ".join(r["caches"] or "-" for r in rs)),
                    flush=True)
    return snug_rows, torch_rows, paired_rows, duel_rows


def f(row, key):
    return float(row[key]) if row and row.get(key) not in (None, "") else float("nan")


def merge(snug_rows, torch_rows):
    torch_by = {(r["workload"], r["variant"]): r for r in torch_rows}
    merged = []
    for s in snug_rows:
        t = torch_by.get((s["workload"], s["variant"]))
        if t and t["params"] != s["params"]:
            print("compare: %s has %s parameters in snug and %s in PyTorch: the models differ" % (
                s["workload"], s["params"], t["params"]), file=sys.stderr)
        merged.append({
            "workload": s["workload"], "variant": s["variant"], "batch": s["batch"], "micro_batch": s["micro_batch"],
            "ms_per_step": f(s, "ms_per_step"), "samples_per_s": f(s, "samples_per_s"), "gflops": f(s, "gflops"),
            "sgemm_fraction": f(s, "sgemm_fraction"), "planned_mib": f(s, "planned_total_bytes") / MIB,
            "planned_activation_mib": f(s, "planned_activation_bytes") / MIB,
            "rss_before_mib": f(s, "rss_before_bytes") / MIB, "rss_peak_mib": f(s, "rss_peak_bytes") / MIB,
            "activation_rss_mib": f(s, "activation_rss_bytes") / MIB,
            "torch_ms_per_step": f(t, "ms_per_step"), "torch_samples_per_s": f(t, "samples_per_s"),
            "torch_activation_rss_mib": f(t, "activation_rss_bytes") / MIB,
            "speed_ratio": f(s, "samples_per_s") / f(t, "samples_per_s"),
            "activation_rss_ratio": f(s, "activation_rss_bytes") / f(t, "activation_rss_bytes")
            if f(t, "activation_rss_bytes") > 0 else float("nan"),
            "torch_config": t["config"] if t else "",
            "snug_process_samples_per_s": s.get("process_samples_per_s", ""),
            "torch_process_samples_per_s": t.get("process_samples_per_s", "") if t else "",
            "snug_process_caches": s.get("process_caches", ""),
            "torch_process_caches": t.get("process_caches", "") if t else "",
        })
    return merged


def pair_ratios(paired, w, v, state=None):
    """Every pair's ratio of variant v of w against full batch (snug-bench --paired), from the processes whose
    cache state was `state` (any where None)."""
    out = []
    for r in paired:
        if r["workload"] == w and r["variant"] == v and (state is None or r.get("caches") == state):
            out += [float(x) for x in r["pair_ratios"].split()]
    return out


def must_shows(rows, paired=(), duels=()):
    """(text, met) per must-show of the issue, each with its numbers."""
    by = {(r["workload"], r["variant"]): r for r in rows}

    def get(w, v, key):
        r = by.get((w, v))
        return r[key] if r else float("nan")

    out = []

    def gm(xs):
        return math.exp(sum(math.log(x) for x in xs) / len(xs)) if all(x > 0 for x in xs) else float("nan")

    def per_state(what, ws, ratios_of, inv=False):
        """A line per cache state in which any pair ran: each workload's median pair there (its inverse with
        inv), ratios_of(w, state) listing the pairs."""
        for state in STATES:
            vals = [(w, ratios_of(w, state)) for w in ws]
            if any(xs for _, xs in vals):
                out.append(("the same from the %s whose cores %s: %s" % (
                    what, "shared a last-level cache" if state == "shared" else "were apart", ", ".join(
                        "%s %.2f (%d pairs)" % (w, (1.0 / statistics.median(xs)) if inv else statistics.median(xs),
                                               len(xs)) if xs else "%s -" % w for w, xs in vals)), None))

    def full_batch(ratios, how, judged):
        mean, worst = gm(ratios), min(ratios)
        out.append(("full batch%s: geometric mean of snug/PyTorch samples/s over the five workloads %.2f (>= 1.5), "
                    "lowest %.2f (%s; >= 1.1)" % (how, mean, worst, WORKLOADS[ratios.index(worst)]),
                    (mean >= 1.5 and worst >= 1.1 if mean == mean else False) if judged else None))

    separate = [get(w, "full", "speed_ratio") for w in WORKLOADS]
    duelled = [duel.ratios(duels, w) for w in WORKLOADS]
    if all(duelled):
        full_batch([statistics.median(xs) for xs in duelled], " (median over the pairs of blocks taking turns with "
                   "PyTorch's process on the same cores, snug-bench --turns, whatever the cache state)", True)
        per_state("pairs", WORKLOADS, lambda w, state: duel.ratios(duels, w, state=state))
        full_batch(separate, " from separate processes (the median process of each framework; %s)" % ", ".join(
            "%s %.2f" % wx for wx in zip(WORKLOADS, separate)), False)
    else:
        full_batch(separate, "", True)
    def best_ratio(w):
        r = by.get((w, "full"))
        sp, tp = (r or {}).get("snug_process_samples_per_s", ""), (r or {}).get("torch_process_samples_per_s", "")
        if not sp or not tp:
            return float("nan")
        return max(float(x) for x in sp.split()) / max(float(x) for x in tp.split())
    best = [best_ratio(w) for w in WORKLOADS]
    if all(x == x for x in best):
        out.append(("the same from each framework's best process (a slow mode of the machine can take whole "
                    "processes): %.2f (%s)" % (gm(best),
                                              ", ".join("%s %.2f" % wb for wb in zip(WORKLOADS, best))), None))
    def round_ratios(a_row, a_who, b_row, b_who):
        """(a's samples/s over b's, whether both processes ran in one cache state) per round, from the process
        lists of two merged rows (a_who, b_who: "snug" or "torch"); None where they are not listed alike."""
        a = (a_row or {}).get(a_who + "_process_samples_per_s", "").split()
        b = (b_row or {}).get(b_who + "_process_samples_per_s", "").split()
        ca = (a_row or {}).get(a_who + "_process_caches", "").split()
        cb = (b_row or {}).get(b_who + "_process_caches", "").split()
        if not a or len(a) != len(b):
            return None
        same = [len(ca) == len(a) and len(cb) == len(a) and x == y and x in STATES
                for x, y in zip(ca, cb)] if ca else [False] * len(a)
        return [(float(x) / float(y), s) for x, y, s in zip(a, b, same)]

    def same_state_full(w):
        """snug's full batch over PyTorch's in the rounds whose two processes ran in one cache state, and how many
        rounds did: a process whose cores were apart against one whose cores shared a cache measures the host."""
        r = by.get((w, "full"))
        kept = [x for x, same in round_ratios(r, "snug", r, "torch") or [] if same]
        return (statistics.median(kept) if kept else float("nan")), len(kept)
    same = [same_state_full(w) for w in WORKLOADS]
    if any(n for _, n in same):
        out.append(("the same from the rounds whose snug and PyTorch processes ran in one cache state: %s" % ", ".join(
            "%s %.2f (%d of %d rounds)" % (w, x, n, len((by.get((w, "full")) or {}).get(
                "snug_process_samples_per_s", "").split())) if n else "%s -" % w
            for w, (x, n) in zip(WORKLOADS, same)), None))
    frac = get("mlp", "full", "sgemm_fraction")
    out.append(("GEMM-shaped work (mlp, full batch: only matrix products) at %.0f%% of the SGEMM rate (>= 70%%)"
                % (100 * frac), frac >= 0.70))

    def per_workload(title, workloads, value, ok):
        vals = [(w, value(w)) for w in workloads]
        met = all(ok(x) for _, x in vals)
        out.append(("%s: %s" % (title, ", ".join("%s %.2f" % wv for wv in vals)), met))

    def rounds(w, v):
        """(variant v's samples/s over full batch's, whether both processes ran in one cache state) per round
        (each round ran every variant of w in turn); None where the processes are not listed."""
        return round_ratios(by.get((w, v)), "snug", by.get((w, "full")), "snug")

    def paired_ratio(w, v):
        """The median of the rounds' ratios over the rounds whose two processes ran in one cache state (where
        the host moved the threads' cores between them the ratio measures the host: the cnn's full batch ran
        6.5 or 10.5 ms a step), over every round where no round did, or the median rows' ratio."""
        r = rounds(w, v)
        if r is None:
            return get(w, v, "samples_per_s") / get(w, "full", "samples_per_s")
        kept = [x for x, same in r if same] or [x for x, _ in r]
        return statistics.median(kept)

    def all_rounds(w, v):
        r = rounds(w, v)
        return statistics.median(x for x, _ in r) if r else paired_ratio(w, v)

    def same_state_note(ws, v):
        counts = [(w, rounds(w, v)) for w in ws]
        return "; rounds in one cache state: " + ", ".join(
            "%s %d of %d" % (w, sum(s for _, s in r), len(r)) for w, r in counts if r)

    def in_one_process(w, v):
        """The median pair of snug-bench --paired over every process, whatever its cache state; the rounds of
        separate processes where no paired measurement was made."""
        xs = pair_ratios(paired, w, v)
        return statistics.median(xs) if xs else paired_ratio(w, v)

    method = ("median over the pairs of blocks of steps alternating with full batch in one process (snug-bench "
              "--paired), whatever the cache state" if paired else
              "median of the rounds' ratios, rounds whose two processes ran in one cache state")
    musts = (("accum4", "4 micro-batches keep >= 0.95 of full-batch samples/s", WORKLOADS, False, 0.95),
             ("micro1", "micro-batch 1 keeps >= 0.50 of full-batch samples/s (cnn, unet, gpt)",
              ("cnn", "unet", "gpt"), False, 0.50),
             ("sqrt", "sqrt checkpointing step time / full <= 1.35", WORKLOADS, True, 1.35))
    for v, title, ws, inv, bar in musts:
        value = (lambda w, v=v: 1.0 / in_one_process(w, v)) if inv else (lambda w, v=v: in_one_process(w, v))
        ok = (lambda x, bar=bar: x <= bar) if inv else (lambda x, bar=bar: x >= bar)
        per_workload("%s (%s%s)" % (title, method, "" if paired else same_state_note(ws, v)), ws, value, ok)
        if paired:
            per_state("processes", ws, lambda w, state, v=v: pair_ratios(paired, w, v, state), inv)
            out.append(("the same from separate processes, the rounds whose two processes ran in one cache state "
                        "(%s): %s" % (same_state_note(ws, v)[2:], ", ".join("%s %.2f" % (w, 1.0 / paired_ratio(w, v) if inv else
                                                  paired_ratio(w, v)) for w in ws)), None))
    for v, title, inv in (("accum4", "4 micro-batches / full", False), ("micro1", "micro-batch 1 / full", False),
                          ("sqrt", "sqrt step time / full", True)):
        ws = ("cnn", "unet", "gpt") if v == "micro1" else WORKLOADS
        out.append(("separate processes, every round, whatever the cache states: %s %s" % (title, ", ".join(
            "%s %.2f" % (w, 1.0 / all_rounds(w, v) if inv else all_rounds(w, v)) for w in ws)), None))
    per_workload("activation RSS snug/PyTorch at the full batch, cheap policy (norms and element-wise layers "
                 "replayed) <= 0.60", WORKLOADS, lambda w: get(w, "cheap", "activation_rss_ratio"),
                 lambda x: x <= 0.60)
    per_workload("activation RSS snug/PyTorch at the full batch, nothing replayed <= 0.60", WORKLOADS,
                 lambda w: get(w, "full", "activation_rss_ratio"), lambda x: x <= 0.60)
    per_workload("cheap policy step time / full (its price; no threshold)", WORKLOADS,
                 lambda w: get(w, "cheap", "ms_per_step") / get(w, "full", "ms_per_step"), lambda x: True)
    out[-1] = (out[-1][0], None)
    return out


COLUMNS = ("workload", "variant", "batch", "micro_batch", "ms_per_step", "samples_per_s", "gflops",
           "sgemm_fraction", "planned_mib", "planned_activation_mib", "rss_before_mib", "rss_peak_mib",
           "activation_rss_mib", "torch_ms_per_step", "torch_samples_per_s", "torch_activation_rss_mib",
           "speed_ratio", "activation_rss_ratio", "torch_config", "snug_process_samples_per_s",
           "torch_process_samples_per_s", "snug_process_caches", "torch_process_caches")


def write_csv(path, rows):
    with open(path, "w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=COLUMNS)
        w.writeheader()
        for r in rows:
            w.writerow({k: ("%.4g" % v if isinstance(v, float) else v) for k, v in r.items()})


PAIRED_COLUMNS = ("workload", "variant", "batch", "micro_batch", "pairs", "full_steps", "steps", "full_ms_per_step",
                  "ms_per_step", "ratio", "ratio_lowest", "ratio_highest", "pair_ratios", "caches")


def write_paired_csv(path, paired):
    with open(path, "w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=PAIRED_COLUMNS, extrasaction="ignore")
        w.writeheader()
        for r in paired:
            w.writerow(r)


def state_cells(ratios_of):
    """Table cells, one per cache state: the median pair and how many ('-' where none), ratios_of(state) listing
    the pairs."""
    return ["%.3f (%d)" % (statistics.median(ys), len(ys)) if ys else "-" for ys in map(ratios_of, STATES)]


def paired_table(paired):
    """Markdown lines: per workload and variant, the median pair over every paired process and per cache state."""
    lines = ["## Variants against full batch in one process", "",
             "`snug-bench --workload W --variant V --paired`: the full-batch trainer and the variant's in one "
             "process, blocks of about a quarter second alternating (full, V, V, full, ...), each after one untimed "
             "step; a pair's ratio is V's samples/s over full batch's (for sqrt, its inverse is the step-time "
             "ratio). One such process per round; its cache state probed before and after it (workloads_paired.csv "
             "lists every pair).", "",
             "| workload | variant | m | pairs | median | lowest | highest | cores shared: median (pairs) | cores "
             "apart: median (pairs) |", "|---|---|--:|--:|--:|--:|--:|--:|--:|"]
    keys = []
    for r in paired:
        if (r["workload"], r["variant"]) not in keys:
            keys.append((r["workload"], r["variant"]))
    for w, v in keys:
        xs = pair_ratios(paired, w, v)
        m = next(r["micro_batch"] for r in paired if r["workload"] == w and r["variant"] == v)
        cells = state_cells(lambda state: pair_ratios(paired, w, v, state))
        lines.append("| %s | %s | %s | %d | %.3f | %.3f | %.3f | %s | %s |" % (
            w, v, m, len(xs), statistics.median(xs), min(xs), max(xs), cells[0], cells[1]))
    return lines + [""]


def duel_table(duels):
    """Markdown lines: per workload, the median pair of snug against PyTorch taking turns, per cache state too."""
    lines = ["## snug against PyTorch, taking turns on the same cores", "",
             "`snug-bench --workload W --variant full --turns` and `pytorch_bench.py ... --turns`: one live process "
             "of each, blocks of about a quarter second alternating between them (snug, PyTorch, PyTorch, snug, "
             "...), each after one untimed step; a pair's ratio is snug's samples/s over PyTorch's in two blocks "
             "run within a second of each other, so both frameworks are measured in the same state of the host. One "
             "duel per round; the cache state probed before and after each pair (workloads_duel.csv lists every "
             "pair).", "",
             "| workload | variant | pairs | snug ms/step | PyTorch ms/step | median | lowest | highest | cores "
             "shared: median (pairs) | cores apart: median (pairs) |", "|---|---|--:|--:|--:|--:|--:|--:|--:|--:|"]
    for w in WORKLOADS:
        for v in duel.DUEL_VARIANTS:
            rs = [r for r in duels if r["workload"] == w and r["variant"] == v]
            if not rs:
                continue
            xs = duel.ratios(duels, w, v)
            cells = state_cells(lambda state: duel.ratios(duels, w, v, state))
            lines.append("| %s | %s | %d | %.1f | %.1f | %.3f | %.3f | %.3f | %s | %s |" % (
                w, v, len(xs), statistics.median(float(r["snug_ms_per_step"]) for r in rs),
                statistics.median(float(r["torch_ms_per_step"]) for r in rs), statistics.median(xs), min(xs),
                max(xs), cells[0], cells[1]))
    return lines + [""]


def write_markdown(path, rows, snug_rows, torch_rows, wait_policy, processes, paired=(), duels=(), peak=None):
    sgemm = statistics.median(float(r["sgemm_gflops"]) for r in snug_rows)
    torch_sgemm = statistics.median(float(r["sgemm_gflops"]) for r in torch_rows) if torch_rows else float("nan")
    lines = ["# Benchmark workloads: snug and PyTorch", "",
             "Machine: %s." % snug_rows[0]["machine"], "",
             "PyTorch: %s." % (torch_rows[0]["config"].split(",")[0] if torch_rows else "not run"), "",
             "SGEMM 2048x2048 measured in this run: %.1f GFLOP/s in snug's processes (the faster of its BLAS and its "
             "own product; median over the snug processes), %.1f GFLOP/s through torch.mm." % (sgemm, torch_sgemm)
             + (" The cores' FMA peak (bench/bench_fma_peak: chains of vector FMAs in registers, the same threads) "
                "at the start of the run: %.1f GFLOP/s, so the SGEMM rate is %.0f%% of it." % (peak, 100 * sgemm / peak)
                if peak else ""), "",
             "Every (workload, variant) ran as %s fresh snug processes alternating with %s fresh PyTorch "
             "processes, in rounds that run every variant of a workload in turn (snug's back to back, then "
             "PyTorch's); each process reports the median "
             "of its %s repeats, and each figure below is the median process's (samples/s of every process, in "
             "round order: the CSV's *_process_samples_per_s). Ratios are snug / PyTorch; the must-shows that "
             "compare a variant with full batch take the median of the rounds' ratios, or where `snug-bench "
             "--paired` ran its pairs' (below), and the full-batch must-shows against PyTorch the median of the "
             "duels' pairs where they ran (below: both frameworks taking turns on the same cores)."
             % (processes, processes, snug_rows[0]["repeats"]), "",
             "Cache state: before and after every process a probe (bench/bench_cache_pair) times a cache line's "
             "round trip between two threads: 'shared' where the cores share a last-level cache (~50 ns), "
             "'apart' where they do not (above %.0f ns: on a virtual machine the host can move its vCPUs onto "
             "two chiplets, and back, within minutes), 'mixed' where it changed during the process (the CSV's "
             "*_process_caches, in round order). Where the cores are apart every cache line one thread wrote and "
             "the other reads or overwrites crosses between the caches, and a step can take half as long again; "
             "the must-shows that compare a variant with full batch use the rounds whose two processes ran in "
             "one state (all rounds where none did), and list the median over every round beside them."
             % APART_NS, "",
             "OpenMP wait policy, the same for both: %s." % wait_policy, "",
             "OPENBLAS_CORETYPE in the run's environment: %s (unset: each OpenBLAS picks its own kernel, and "
             "pytorch_bench.py gives PyTorch SkylakeX on AVX-512 CPUs)." % os.environ.get("OPENBLAS_CORETYPE", "unset"),
             "",
             "| workload | variant | B | m | ms/step | samples/s | GFLOP/s | of SGEMM | planned MiB | planned act. MiB "
             "| peak RSS MiB | act. RSS MiB | PyTorch samples/s | speed ratio | PyTorch act. RSS MiB | act. RSS "
             "ratio |",
             "|---|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|"]
    for r in rows:
        lines.append("| %s | %s | %s | %s | %.1f | %.1f | %.1f | %.0f%% | %.1f | %.1f | %.1f | %.1f | %.1f | %.2f | "
                     "%.1f | %.2f |" % (r["workload"], r["variant"], r["batch"], r["micro_batch"], r["ms_per_step"],
                                         r["samples_per_s"], r["gflops"], 100 * r["sgemm_fraction"],
                                         r["planned_mib"], r["planned_activation_mib"], r["rss_peak_mib"],
                                         r["activation_rss_mib"], r["torch_samples_per_s"], r["speed_ratio"],
                                         r["torch_activation_rss_mib"], r["activation_rss_ratio"]))
    lines += ["", "PyTorch configurations: " + "; ".join(
        sorted({"%s: %s" % (r["workload"], r["torch_config"].split(", ")[1]) for r in rows if r["torch_config"]})),
        ""]
    if duels:
        lines += duel_table(duels)
    if paired:
        lines += paired_table(paired)
    lines += ["## Must-shows", ""]
    for text, met in must_shows(rows, paired, duels):
        lines.append("- %s%s" % (text, "" if met is None else (": **met**" if met else ": **not met**")))
    lines += ["", "Activation RSS: peak RSS over the timed steps minus the memory the model keeps between steps; "
              "for both, minus the RSS once the data existed but not the model, and minus the parameters, "
              "gradients and optimizer state (snug reserves and touches all its planned memory before the first "
              "step, PyTorch creates gradients and optimizer state during it, so the RSS just before the first "
              "step does not compare).", ""]
    with open(path, "w") as fh:
        fh.write("\n".join(lines))


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run", help="measure both, interleaved, then merge")
    r.add_argument("--bench", default="build/bench/snug-bench",
                   help="the benchmark program snug-bench; its probes bench_cache_pair and bench_fma_peak are "
                        "looked for beside it")
    r.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    r.add_argument("--repeats", type=int, default=3)
    r.add_argument("--steps", type=int, default=0)
    r.add_argument("--processes", type=int, default=3,
                   help="fresh processes per framework, workload and variant, alternating; the median is reported")
    r.add_argument("--workloads", nargs="+", default=list(WORKLOADS), choices=WORKLOADS)
    r.add_argument("--variants", nargs="+", default=list(VARIANTS), choices=VARIANTS)
    r.add_argument("--wait-policy", default="default", choices=("default", "passive", "active"),
                   help="OMP_WAIT_POLICY for both frameworks; default: unset (the OpenMP runtime's own spin-then-sleep)")
    r.add_argument("--pairs", type=int, default=6,
                   help="pairs of blocks per paired process (snug-bench --paired; one per round for accum4, sqrt "
                        "and micro1); 0: no paired processes, the must-shows then compare separate processes")
    r.add_argument("--duels", type=int, default=6,
                   help="pairs of blocks per duel (snug-bench --turns against pytorch_bench.py --turns, one per round "
                        "and workload at full batch); 0: none, the full-batch must-shows then compare separate "
                        "processes")
    r.add_argument("--cache-probe", default="",
                   help="a program printing 'round_trip_ns N' between two threads, run before and after every "
                        "process (default: bench_cache_pair beside --bench, where it exists)")
    r.add_argument("--out", default=os.path.join(HERE, "results"))
    m = sub.add_parser("merge", help="merge a snug CSV and a PyTorch CSV")
    m.add_argument("snug_csv")
    m.add_argument("torch_csv")
    m.add_argument("--paired", default="", help="a CSV of snug-bench --paired (with a caches column, or without)")
    m.add_argument("--duel", default="", help="a workloads_duel.csv of an earlier run")
    m.add_argument("--out", default=os.path.join(HERE, "results"))
    args = p.parse_args()
    if args.cmd == "run" and (args.processes < 1 or args.repeats < 1 or args.pairs < 0 or args.duels < 0):
        p.error("--processes and --repeats need at least 1, --pairs and --duels at least 0 (got %d, %d, %d and %d)"
                % (args.processes, args.repeats, args.pairs, args.duels))
    if args.cmd == "run":
        if not os.access(args.bench, os.X_OK):
            p.error("--bench %s is not an executable: build snug-bench first (make build), or name it with --bench"
                    % args.bench)
        if subprocess.run([TORCH_PYTHON, "-c", "import torch"], capture_output=True).returncode != 0:
            p.error("%s cannot import torch: install Debian's python3-torch (scripts/install-deps.sh --bench, as root)"
                    " or use `snug-bench` for snug alone" % TORCH_PYTHON)
        peak = fma_peak(args.bench, args.threads)
        snug_rows, torch_rows, paired, duels = run(args)
    else:
        peak = None
        snug_rows, torch_rows = read_rows(args.snug_csv), read_rows(args.torch_csv)
        paired = read_rows(args.paired) if args.paired else []
        duels = read_rows(args.duel) if args.duel else []
    if not snug_rows:
        p.error("no snug results to report")
    os.makedirs(args.out, exist_ok=True)
    rows = merge(snug_rows, torch_rows)
    write_csv(os.path.join(args.out, "workloads.csv"), rows)
    policy = ("OMP_WAIT_POLICY unset (the runtime's spin-then-sleep)" if args.wait_policy == "default" else
              "OMP_WAIT_POLICY=" + args.wait_policy) if args.cmd == "run" else "not recorded (merged files)"
    processes = args.processes if args.cmd == "run" else "?"
    if paired:
        write_paired_csv(os.path.join(args.out, "workloads_paired.csv"), paired)
    if duels:
        duel.write_csv(os.path.join(args.out, "workloads_duel.csv"), duels)
    write_markdown(os.path.join(args.out, "workloads.md"), rows, snug_rows, torch_rows, policy, processes, paired,
                   duels, peak)
    with open(os.path.join(args.out, "workloads.md")) as fh:
        print(fh.read())
    return 0


if __name__ == "__main__":
    sys.exit(main())
