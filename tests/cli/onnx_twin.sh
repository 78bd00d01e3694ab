# Shared by the CLI tests of a zoo model's PyTorch twin (sourced after harness.sh): the export must plan as the
# zoo model does.
# shellcheck shell=bash

# require_export FILE FIXTURE: the test stops (failed) unless the CTest fixture FIXTURE wrote FILE.
require_export() {
    if [ -z "${SNUG_ONNX_TORCH_DIR:-}" ] || [ ! -f "$1" ]; then
        echo "FAIL: no '$1': run through ctest, whose fixture $2 makes it (it needs python3-torch and" \
             "python3-onnx: make deps)"
        exit 1
    fi
}

# expect_plan_as_zoo ZOO MODEL BATCH BUDGET: `snug plan --json` of the file MODEL is the zoo model ZOO's byte
# for byte but for the model's name (the first two lines): every candidate's bytes per category, total and peak,
# micro-batch and checkpoint, and the choice. BUDGET "none" plans without --mem.
expect_plan_as_zoo() {
    local zoo=$1 model=$2 batch=$3 budget=$4 mem=()
    [ "$budget" = none ] || mem=(--mem "$budget")
    run "plan the zoo's $zoo at batch $batch, budget $budget" plan --model "$zoo" --batch "$batch" "${mem[@]}" --json
    expect_rc 0
    sed 1,2d "$OUT" >"$TMP/zoo.json"
    run "plan the exported $zoo at batch $batch, budget $budget: the zoo's plan" plan --model "$model" \
        --batch "$batch" "${mem[@]}" --json
    expect_rc 0
    sed 1,2d "$OUT" >"$TMP/onnx.json"
    expect_in "$OUT" "\"model\":	\"$model\""
    cmp -s "$TMP/zoo.json" "$TMP/onnx.json" || fail "the plans differ: $(diff "$TMP/zoo.json" "$TMP/onnx.json" |
        head -5)"
}

# zoo_budgets ZOO BATCH: sets WHOLE (the zoo model's one-pass plan at BATCH, in bytes) and TIGHT (a fifth above
# the smallest budget that fits, which the refusal of 1 KiB names), as this build plans them: budgets derived
# from the plan, never constants of one CPU.
zoo_budgets() {
    local zoo=$1 batch=$2 py=${SNUG_PYTHON3:-/usr/bin/python3} small
    WHOLE=$("$SNUG" plan --model "$zoo" --batch "$batch" --json |
            "$py" -c 'import json, sys; print(json.load(sys.stdin)["chosen"]["total"])')
    "$SNUG" plan --model "$zoo" --batch "$batch" --mem 1KiB >/dev/null 2>"$TMP/refusal.txt"
    small=$(grep -o 'smallest budget that fits is [0-9.]* [KMG]iB' "$TMP/refusal.txt" | awk '{print $6 $7}')
    TIGHT=$("$py" -c "import sys; v, u = float(sys.argv[1][:-3]), sys.argv[1][-3:]; print(f'{v * 1.2:.2f}{u}')" \
            "$small")
}

# expect_trains_into_module MODEL MODULE [SIDE]: two steps of MODEL with --save, and the saved weights loaded into
# MODULE (a Python expression over scripts/, e.g. gpt_twin.Gpt()) with load_state_dict(strict=True): no extra
# key, none missing, every shape right; its forward finite. Without SIDE, MODEL is a token model trained on a text
# of bytes (256 classes); with it, an image model of 3 x SIDE x SIDE trained on a folder of gray images of 10
# classes (copied into the three channels).
expect_trains_into_module() {
    local model=$1 module=$2 side=${3:-} py=${SNUG_PYTHON3:-/usr/bin/python3} data
    if [ -n "$side" ]; then
        "$py" "$SNUG_SOURCE_DIR/tests/cli/make_image_folder.py" "$TMP/images" 10 2 1 "$side" >/dev/null
        data="images:$TMP/images"
    else
        "$py" -c "import sys; sys.stdout.write(''.join(chr(32 + (i * 7919) % 95) for i in range(20000)))" \
            >"$TMP/text.txt"
        data="text:$TMP/text.txt"
    fi
    run "train $(basename "$model") two steps and save" train --model "$model" --data "$data" \
        --batch 4 --max-steps 2 --evaluate off --save "$TMP/twin.safetensors" --threads 2
    expect_rc 0
    expect_in "$OUT" "parameters saved to $TMP/twin.safetensors"
    finish_case
    CASE="the trained weights load into $module with strict=True"
    CASE_OK=1
    "$py" - "$TMP/twin.safetensors" "$SNUG_SOURCE_DIR/scripts" "$SNUG_SOURCE_DIR/tests/cli" "$module" "$side" \
        >"$OUT" 2>"$ERR" <<'PY'
import importlib, sys
import torch
sys.path[:0] = sys.argv[2:4]
import safetensors_state
state, metadata = safetensors_state.load(sys.argv[1])
module, make = sys.argv[4].split(".", 1)
net = eval(make, vars(importlib.import_module(module)))
net.load_state_dict(state, strict=True)  # raises on a missing or extra key or a wrong shape
if sys.argv[5]:
    side = int(sys.argv[5])
    x, lead = torch.zeros(1, 3, side, side), (1, 10)
else:
    context = net.wpe.weight.shape[0]
    x, lead = torch.zeros(1, context, dtype=torch.int64), (1, context)
with torch.no_grad():
    out = net(x)
assert out.shape[:2] == lead and torch.isfinite(out).all()
print(f"{len(state)} tensors loaded with strict=True after {metadata['steps']} steps")
PY
    RC=$?
    expect_rc 0
    expect_in "$OUT" "loaded with strict=True"
}
