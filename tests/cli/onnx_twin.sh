# Shared by the CLI tests of a zoo model's PyTorch twin (sourced after harness.sh): the export must plan as the
# zoo model does.
# shellcheck shell=bash

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
