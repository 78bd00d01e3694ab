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
