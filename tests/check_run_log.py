#!/usr/bin/env python3
"""What tests/test_run_log.c cannot check in C: that a run log and its curve read as standard formats do.

  check_run_log.py jsonl FILE STEPS EVALS   every line parses with json; the counts of step and eval lines; each
                                            line's fields and their types; a non-finite loss is null
  check_run_log.py csv FILE STEPS EVALS     the csv module reads the header and the rows; the counts
  check_run_log.py svg FILE ID...           the picture parses as XML; each ID is an element of class "series"
                                            with a <title>; no other series

Exit status 0 when everything holds, 1 with what did not.
"""
import csv
import json
import sys
import xml.etree.ElementTree as ET

STEP_FIELDS = {"type": str, "step": int, "epoch": int, "loss": (float, int, type(None)), "lr": (float, int),
               "grad_norm": (float, int, type(None)), "skipped": bool, "items": int, "micro_batches": int,
               "samples_per_s": (float, int), "elapsed_s": (float, int), "memory_bytes": (int, type(None))}
EVAL_FIELDS = {"type": str, "step": int, "epoch": int, "set": str, "loss": (float, int, type(None)),
               "accuracy": (float, int), "items": int}
EVAL_OPTIONAL = {"mean_iou": (float, int), "foreground_iou": (float, int)}


def fail(why):
    print(f"check_run_log.py: {why}")
    sys.exit(1)


def check_jsonl(path, steps, evals):
    counts = {"step": 0, "eval": 0}
    with open(path, encoding="utf-8") as f:
        for no, line in enumerate(f, 1):
            obj = json.loads(line)
            want = STEP_FIELDS if obj["type"] == "step" else EVAL_FIELDS
            extra = set(obj) - set(want) - (set(EVAL_OPTIONAL) if obj["type"] == "eval" else set())
            if extra:
                fail(f"{path}:{no}: unexpected fields {sorted(extra)}")
            for name, kind in want.items():
                if name not in obj:
                    fail(f"{path}:{no}: no field {name}")
                if not isinstance(obj[name], kind) or (kind is int and isinstance(obj[name], bool)):
                    fail(f"{path}:{no}: {name} is {obj[name]!r}")
            counts[obj["type"]] += 1
    if counts != {"step": steps, "eval": evals}:
        fail(f"{path}: {counts}, expected {steps} steps and {evals} evaluations")


def check_csv(path, steps, evals):
    with open(path, newline="", encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    kinds = [r["type"] for r in rows]
    if kinds.count("step") != steps or kinds.count("eval") != evals:
        fail(f"{path}: {kinds.count('step')} steps and {kinds.count('eval')} evaluations")
    for r in rows:
        float(r["loss"])  # nan and inf included
        if r["type"] == "eval" and (r["lr"] or r["grad_norm"] or r["skipped"]):
            fail(f"{path}: an evaluation row with step columns: {r}")
        if r["type"] == "step" and (r["set"] or r["accuracy"]):
            fail(f"{path}: a step row with evaluation columns: {r}")


def check_svg(path, ids):
    root = ET.parse(path).getroot()
    ns = "{http://www.w3.org/2000/svg}"
    series = {e.get("id"): e for e in root.iter() if e.get("class") == "series"}
    if set(series) != set(ids):
        fail(f"{path}: series {sorted(series)}, expected {sorted(ids)}")
    for name, e in series.items():
        if e.find(ns + "title") is None or not e.find(ns + "title").text:
            fail(f"{path}: series {name} has no title")


def main():
    if len(sys.argv) < 3:
        fail(__doc__)
    mode, path = sys.argv[1], sys.argv[2]
    if mode == "jsonl":
        check_jsonl(path, int(sys.argv[3]), int(sys.argv[4]))
    elif mode == "csv":
        check_csv(path, int(sys.argv[3]), int(sys.argv[4]))
    elif mode == "svg":
        check_svg(path, sys.argv[3:])
    else:
        fail(f"unknown mode {mode}")


if __name__ == "__main__":
    main()
