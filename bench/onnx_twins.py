#!/usr/bin/python3
"""An exported twin against its zoo model: `snug train` of the zoo name and of the PyTorch export of the same
network (scripts/export_onnx.py --unet / --gpt / --resnet20 writes them), run in turns with the same flags, as
pairs in alternating order (zoo, onnx, onnx, zoo, ...; a drift in the machine's speed during a pair hits each
side alike over two pairs). A pair's ratio is the export's samples/s over the zoo's, both read from `snug
train`'s "trained N steps (...) in ... (S s)" line, which times the training steps alone; the result per model is
the median of its pairs' ratios.

    /usr/bin/python3 bench/onnx_twins.py build/snug build/onnx [--pairs 5] [--models unet,gpt,resnet20]
                                         [--data-dir data] [--threads 2]
"""
import argparse
import re
import statistics
import subprocess
import sys

# model: (the zoo's name, the export in ONNX_DIR, data flags given DATA_DIR, batch, steps)
TWINS = {
    "resnet20": ("resnet20", "resnet20.onnx", lambda d: ["--data", "mnist32", "--data-dir", f"{d}/mnist"], 128, 4),
    "unet": ("unet", "unet.onnx", lambda d: ["--data", "shapes"], 8, 2),
    "gpt": ("gpt", "gpt_opset13.onnx", lambda d: ["--data", "brown", "--data-dir", f"{d}/brown"], 8, 10),
}
TRAINED = re.compile(r"trained (\d+) steps .* \(([0-9.]+) s\), ")


def seconds_of(snug, model, data, batch, steps, threads):
    cmd = [snug, "train", "--model", model, *data, "--batch", str(batch), "--max-steps", str(steps),
           "--evaluate", "off", "--threads", str(threads), "--seed", "1"]
    out = subprocess.run(cmd, capture_output=True, text=True)
    m = TRAINED.search(out.stdout)
    if out.returncode != 0 or not m or int(m.group(1)) != steps:
        sys.exit(f"{' '.join(cmd)}: exit status {out.returncode}\n{out.stdout[-2000:]}{out.stderr[-2000:]}")
    return float(m.group(2))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("snug")
    ap.add_argument("onnx_dir")
    ap.add_argument("--pairs", type=int, default=5)
    ap.add_argument("--models", default="unet,gpt,resnet20")
    ap.add_argument("--data-dir", default="data")
    ap.add_argument("--threads", type=int, default=2)
    a = ap.parse_args()
    print("model,pair,first,zoo_s,onnx_s,ratio")
    for name in a.models.split(","):
        zoo, onnx, data, batch, steps = TWINS[name]
        sides = {"zoo": zoo, "onnx": f"{a.onnx_dir}/{onnx}"}
        ratios = []
        for i in range(a.pairs):
            order = ("zoo", "onnx") if i % 2 == 0 else ("onnx", "zoo")
            took = {s: seconds_of(a.snug, sides[s], data(a.data_dir), batch, steps, a.threads) for s in order}
            ratios.append(took["zoo"] / took["onnx"])
            print(f"{name},{i},{order[0]},{took['zoo']:.2f},{took['onnx']:.2f},{ratios[-1]:.4f}", flush=True)
        print(f"# {name}: batch {batch}, {steps} steps per run, {a.pairs} pairs: the export's samples/s over the "
              f"zoo's, median {statistics.median(ratios):.3f} (min {min(ratios):.3f}, max {max(ratios):.3f})",
              flush=True)


if __name__ == "__main__":
    main()
