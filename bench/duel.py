"""snug and PyTorch taking turns on the same cores: one live process of each (`snug-bench --turns`,
`pytorch_bench.py --turns`), blocks of steps of about a quarter second alternating between them (snug, PyTorch,
PyTorch, snug, ...), each block after one untimed step. A pair's ratio is PyTorch's ms per step over snug's in
two blocks run within a second of each other: snug's samples/s over PyTorch's, both in the same state of the
host. Separate processes a minute apart can see two machines on a small virtual host (its vCPUs move between
cores that share a last-level cache and cores on two chiplets, and a step can take half as long again in the
second state), so their ratio measures the host as much as the frameworks; compare.py runs one duel per round
and workload, and reports both.
"""
import csv
import subprocess

# The variants whose must-shows compare snug with PyTorch: full batch only.
DUEL_VARIANTS = ("full",)
COLUMNS = ("workload", "variant", "round", "pair", "first", "snug_steps", "snug_ms_per_step", "torch_steps",
           "torch_ms_per_step", "ratio", "caches")


class Turns:
    """One framework's process speaking the --turns protocol: "ready STEPS" once warm, then "block STEPS
    SECONDS" for every "go"."""

    def __init__(self, who, cmd, env):
        self.who = who
        self.p = subprocess.Popen(cmd, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        self.steps = int(self._expect("ready")[1])

    def _expect(self, word):
        words = self.p.stdout.readline().split()
        if not words or words[0] != word:
            self.p.kill()
            raise RuntimeError("%s --turns: expected a '%s' line, got %r (exit status %s)"
                               % (self.who, word, " ".join(words), self.p.wait()))
        return words

    def block(self):
        """ms per step of one block."""
        self.p.stdin.write("go\n")
        self.p.stdin.flush()
        words = self._expect("block")
        return 1e3 * float(words[2]) / int(words[1])

    def close(self):
        self.p.stdin.close()
        rc = self.p.wait()
        if rc != 0:
            raise RuntimeError("%s --turns ended with exit status %d" % (self.who, rc))


def duel(snug_cmd, torch_cmd, env, pairs, state, workload, variant, rnd):
    """Rows of `pairs` pairs of blocks, snug first in even pairs; state() is the host's cache state right now
    ('shared', 'apart' or ''), probed before and after each pair. snug is built and warmed up before PyTorch
    starts, so that neither's warm-up (which sizes its blocks) runs beside the other's."""
    snug = Turns("snug-bench", snug_cmd, env)
    try:
        torch = Turns("pytorch_bench.py", torch_cmd, env)
    except BaseException:
        snug.p.kill()
        snug.p.wait()
        raise
    rows = []
    try:
        for i in range(pairs):
            before = state()
            order = (snug, torch) if i % 2 == 0 else (torch, snug)
            ms = {t.who: t.block() for t in order}
            after = state()
            s, t = ms[snug.who], ms[torch.who]
            rows.append({"workload": workload, "variant": variant, "round": rnd, "pair": i,
                         "first": "snug" if i % 2 == 0 else "pytorch", "snug_steps": snug.steps,
                         "snug_ms_per_step": "%.4f" % s, "torch_steps": torch.steps, "torch_ms_per_step": "%.4f" % t,
                         "ratio": "%.4f" % (t / s), "caches": before if before == after else "mixed"})
    finally:
        snug.close()
        torch.close()
    return rows


def ratios(rows, workload, variant="full", state=None):
    """Every pair's snug/PyTorch ratio for workload, from the pairs whose cache state was `state` (any where
    None)."""
    return [float(r["ratio"]) for r in rows if r["workload"] == workload and r["variant"] == variant
            and (state is None or r.get("caches") == state)]


def write_csv(path, rows):
    with open(path, "w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=COLUMNS, extrasaction="ignore")
        w.writeheader()
        w.writerows(rows)
