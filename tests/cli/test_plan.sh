#!/usr/bin/env bash
# End-to-end tests of `snug plan` (the plan table, --layers, --json, the memory timeline as SVG and CSV) and of the
# `snug train` flags that choose plans (--checkpoint, --micro-batch auto, auto fit under --mem). Planning needs no
# data, so those cases run against an empty data folder; the training runs need the real MNIST in DATA_DIR.
#
# usage: tests/cli/test_plan.sh SNUG_BINARY DATA_DIR
set -u

# shellcheck source=tests/cli/harness.sh
. "$(dirname "$0")/harness.sh"

EMPTY=$TMP/empty-data
mkdir -p "$EMPTY"
PY=$(command -v python3 || true)

# plan NAME ARGS...: `snug plan ARGS` with SNUG_DATA_DIR on an empty folder, so any data access would fail.
plan() {
    local name=$1
    shift
    run_env "$name" "SNUG_DATA_DIR=$EMPTY" -- plan "$@"
}

# The rows of the plan table marked as chosen.
starred_rows() { grep -c '^\* ' "$OUT"; }

# py_check DESCRIPTION SCRIPT [ARGS...]: a python3 check that exits non-zero on failure (skipped without python3).
py_check() {
    local what=$1
    shift
    [ -z "$PY" ] && return
    "$PY" - "$@" >"$TMP/py.log" 2>&1 || fail "$what: $(tail -n 3 "$TMP/py.log" | tr '\n' ' ')"
}

# ---------------------------------------------------------------------------------------------------------
# help
run "plan --help lists every flag" plan --help
expect_rc 0
for phrase in "usage: snug plan" --model --batch --mem --micro-batch --checkpoint every:N --optim --momentum \
    --layers --json --timeline FILE.svg --threads; do
    expect_in "$OUT" "$phrase"
done
expect_empty "$ERR"

run "help plan" help plan
expect_rc 0
expect_in "$OUT" "--timeline"

run "the command list names plan" --help
expect_rc 0
expect_in "$OUT" "plan "

# ---------------------------------------------------------------------------------------------------------
# sparing and pending rows
plan "sqrt on the cnn: its one segment saves nothing and is kept whole" --model cnn --batch 64 --micro-batch 64 \
    --checkpoint sqrt
expect_rc 0
expect_in "$OUT" "spared: 1 segment kept whole"
expect_in "$OUT" "recompute: none"

# (pending rows come with snug's own AVX-512 product; elsewhere every update goes straight to dW)
if grep -qw avx512f /proc/cpuinfo 2>/dev/null; then
    plan "micro-batch 1 of the cnn: its wide linear layer keeps pending rows, counted as grads" --model cnn \
        --batch 64 --micro-batch 1
    expect_rc 0
    expect_in "$OUT" "of pending rows"
fi

plan "micro-batch 64: no pending rows" --model cnn --batch 64 --micro-batch 64
expect_rc 0
expect_not_in "$OUT" "of pending rows"

# ---------------------------------------------------------------------------------------------------------
# usage errors: exit 2, nothing on stdout
usage_error "plan --checkpoint every:0" "--checkpoint" plan --checkpoint every:0
usage_error "plan --checkpoint foo" "--checkpoint" plan --checkpoint foo
usage_error "plan --checkpoint empty" "--checkpoint" plan --checkpoint=
usage_error "plan --timeline x.png" "--timeline must name a .svg or a .csv file, got 'x.png'" plan --timeline x.png
usage_error "plan --timeline without a name" "--timeline must name" plan --timeline .svg
usage_error "plan --micro-batch auto without --mem" "--micro-batch auto needs --mem" plan --micro-batch auto
usage_error "plan --checkpoint auto without --mem" "--checkpoint auto needs --mem" plan --checkpoint auto
usage_error "plan --micro-batch > --batch" "--micro-batch 65 is larger than --batch 64" plan --micro-batch 65
usage_error "plan --micro-batch abc" "--micro-batch must be a whole number >= 1 or auto, got 'abc'" \
    plan --micro-batch abc
usage_error "plan rejects train-only flags" "unknown flag '--epochs'" plan --epochs 2
usage_error "plan --model unknown" "unknown model 'resnet9000'" plan --model resnet9000
usage_error "plan --json takes no value" "--json takes no value" plan --json=yes
usage_error "plan --mem 0" "--mem" plan --mem 0
usage_error "plan points at its help" "(see 'snug plan --help')" plan --batch 0
usage_error "train --checkpoint foo" "--checkpoint" train --checkpoint foo
usage_error "train --checkpoint every:0" "--checkpoint" train --checkpoint every:0
usage_error "train --micro-batch auto without --mem" "--micro-batch auto needs --mem" train --micro-batch auto
usage_error "train --micro-batch abc" "or auto, got 'abc'" train --micro-batch abc

# ---------------------------------------------------------------------------------------------------------
# the plan table: no data needed
for model in mlp cnn; do
    plan "plan $model: table with one chosen row, no data read" --model "$model"
    expect_rc 0
    expect_in "$OUT" "plans for model $model, batch 64"
    for phrase in checkpoint params grads optim activations workspace data total "peak in use at" \
        recompute fits "chosen plan (*)" backward; do
        expect_in "$OUT" "$phrase"
    done
    [ "$(starred_rows)" -eq 1 ] || fail "expected exactly one row marked '*'"
    # without --mem the chosen plan is m = B without checkpointing
    grep -qE '^\* +64 +1 +none ' "$OUT" || fail "the chosen row is not 'm 64, k 1, none'"
    for m in 1 2 4 8 16 32 64; do
        grep -qE "^[* ] +$m +[0-9]+ +none " "$OUT" || fail "no row for m = $m without checkpointing"
        grep -qE "^[* ] +$m +[0-9]+ +sqrt " "$OUT" || fail "no row for m = $m with sqrt"
    done
    expect_not_in "$OUT" "auto:"
    expect_empty "$ERR"
done

# the budget bounds the process: the runtime's 2 MiB a thread (2 threads here) are planned beside the model
plan "plan with a budget: auto rows, fits column, the chosen row fits" --model cnn --batch 256 --mem 12MiB \
    --threads 2
expect_rc 0
expect_in "$OUT" "budget 12.00 MiB"
expect_in "$OUT" "of the 12.00 MiB budget"
expect_in "$OUT" "the data set is not counted (give --data"
expect_in "$OUT" "the runtime's 4.00 MiB (workspace, 2 MiB a thread) is"
expect_in "$OUT" "the best fit for the budget, as training chooses it"
[ "$(starred_rows)" -eq 1 ] || fail "expected exactly one row marked '*'"
grep -qE '^\* .* yes$' "$OUT" || fail "the chosen row does not fit"
grep -qE ' no$' "$OUT" || fail "no row is over the budget at batch 256 in 12 MiB"
expect_empty "$ERR"

plan "plan: an auto row that repeats another row is left out" --model cnn --batch 64 --mem 64MiB --threads 2
expect_rc 0
# a row: [*] m k policy (an auto row: "auto: POLICY") ... total ...; one (m, policy, total) per row
rows=$(grep -E '^\*? +[0-9]+ +[0-9]+ ' "$OUT" | sed -e 's/^\*//' -e 's/auto: //' |
    awk '{ n = 0; for (i = 4; i <= NF; i++) if ($i ~ /^(B|KiB|MiB|GiB)$/ && ++n == 7) total = $(i-1) $i
           print $1, $3, total }')
[ -n "$rows" ] || fail "no rows"
[ "$(echo "$rows" | sort | uniq -d)" = "" ] || fail "repeated rows: $(echo "$rows" | sort | uniq -d | head -n 2)"

plan "plan: a chosen micro-batch that is no power of two gets its own row" --model cnn --batch 100 \
    --micro-batch 24 --checkpoint every:2
expect_rc 0
[ "$(starred_rows)" -eq 1 ] || fail "expected exactly one row marked '*'"
grep -qE '^\* +24 +5 +every:2 ' "$OUT" || fail "the chosen row is not 'm 24, k 5, every:2'"
expect_in "$OUT" "5 micro-batches of 24 (the last one 4)"
grep -qE '^  +100 +1 +none ' "$OUT" || fail "no row for m = B = 100"

plan "plan --checkpoint cheap: fewer activations for unet, replaying only cheap layers" \
    --model unet --batch 4 --micro-batch 4 --checkpoint cheap --json
expect_rc 0
py_check "cheap saves activations at almost no recompute" "$OUT" <<'PYEOF'
import json, sys
d = json.load(open(sys.argv[1]))
rows = {(r["micro_batch"], r["checkpoint"]): r for r in d["candidates"]}
none, cheap = rows[(4, "none")], rows[(4, "cheap")]
assert d["chosen"]["checkpoint"] == "cheap", d["chosen"]["checkpoint"]
# the concatenations replay from their upsampled halves; the normalised outputs are regenerated either way
assert cheap["bytes"]["activations"] <= 0.97 * none["bytes"]["activations"], (cheap["bytes"], none["bytes"])
assert 0 < cheap["recompute_percent"] < 1, cheap["recompute_percent"]
PYEOF

if own_products; then
    plan "plan: gpt's products regenerate the LayerNorm and GELU outputs only they read" \
        --model gpt --batch 8 --micro-batch 8 --json
    expect_rc 0
    py_check "12 inputs regenerated: 2 LayerNorms and a GELU in each of 4 blocks" "$OUT" <<'PYEOF'
import json, sys
d = json.load(open(sys.argv[1]))
c = d["chosen"]
assert c["regenerated_inputs"] == 12, c["regenerated_inputs"]
# per block 2 x (8 x 256 x 256) + (8 x 256 x 1024) floats
assert c["regenerated_bytes"] == 4 * (2 * 8 * 256 * 256 + 8 * 256 * 1024) * 4, c["regenerated_bytes"]
PYEOF
else
    echo "skip: gpt's regenerated inputs: this CPU has no AVX-512, the linear layers' products are the BLAS's"
fi

plan "plan: resnet20's convolutions regenerate the normalised inputs only they read, without any policy" \
    --model resnet20 --batch 16 --micro-batch 16 --json
expect_rc 0
py_check "9 inputs regenerated, their bytes not in the activations, cheap adds nothing" "$OUT" <<'PYEOF'
import json, sys
d = json.load(open(sys.argv[1]))
rows = {(r["micro_batch"], r["checkpoint"]): r for r in d["candidates"]}
none, cheap = rows[(16, "none")], rows[(16, "cheap")]
assert d["chosen"]["regenerated_inputs"] == 9, d["chosen"]["regenerated_inputs"]
# per block one 16x32x32, 32x16x16 or 64x8x8 tensor: 1, 1/2 or 1/4 MiB at m = 16, 3 blocks a stage
assert d["chosen"]["regenerated_bytes"] == 3 * (2**20 + 2**19 + 2**18), d["chosen"]["regenerated_bytes"]
assert cheap["bytes"]["activations"] == none["bytes"]["activations"], (cheap["bytes"], none["bytes"])
PYEOF
plan "plan: the regenerated inputs in the table" --model resnet20 --batch 16 --micro-batch 16
expect_rc 0
expect_in "$OUT" "regenerated: 9 inputs (5.25 MiB) rebuilt sample by sample in backward"

plan "plan --optim adamw doubles the optimizer state" --model mlp --optim adamw --json
expect_rc 0
py_check "adamw state is twice the params" "$OUT" <<'PYEOF'
import json, sys
d = json.load(open(sys.argv[1]))
b = d["chosen"]["bytes"]
assert d["optimizer"] == "adamw", d["optimizer"]
assert b["optim"] == 2 * b["params"], (b["optim"], b["params"])
PYEOF

plan "plan --momentum 0 drops the momentum buffer" --model mlp --momentum 0 --json
expect_rc 0
py_check "no optimizer state without momentum" "$OUT" <<'PYEOF'
import json, sys
d = json.load(open(sys.argv[1]))
assert d["chosen"]["bytes"]["optim"] == 0, d["chosen"]["bytes"]
PYEOF

plan "plan --layers lists the buffers of the chosen plan" --model cnn --batch 32 --layers
expect_rc 0
expect_in "$OUT" "buffers of the chosen plan"
for phrase in layer what category bytes offset steps conv1 conv2 output gradient activations; do
    expect_in "$OUT" "$phrase"
done

plan "plan: too small a budget says the smallest that fits" --model cnn --mem 1MiB
expect_rc 1
expect_in "$ERR" "smallest budget"
expect_in "$ERR" "--mem"
expect_empty "$OUT"

# ---------------------------------------------------------------------------------------------------------
# absurd sizes: refused before planning, or answered with a few dozen plans however large the batch
plan "plan: a batch too large to plan in one pass is refused, saying what fits" --model cnn \
    --batch 9223372036854775807
expect_rc 1
expect_in "$ERR" "batch 9223372036854775807 of model 'cnn' is too large to plan"
expect_in "$ERR" "over 1 EiB"
expect_in "$ERR" "plan at most"
expect_empty "$OUT"

plan "plan: a micro-batch too large to plan is refused" --model cnn --batch 9223372036854775807 \
    --micro-batch 10000000000000
expect_rc 1
expect_in "$ERR" "micro-batch 10000000000000 of model 'cnn' is too large to plan"
expect_empty "$OUT"

# (a search over k = 1, 2, ... micro-batches would plan millions of candidates for these)
for batch in 4294967296 1099511627776 9223372036854775807; do
    plan "plan: --batch $batch under --mem 1GiB chooses a micro-batch that fits" --model cnn --batch "$batch" \
        --mem 1GiB
    expect_rc 0
    grep -qE '^chosen plan \(\*\): micro-batch [0-9]+, [0-9]+ micro-batches of [0-9]+' "$OUT" ||
        fail "no chosen micro-batch"
    expect_in "$OUT" "of the 1.00 GiB budget"
    expect_empty "$ERR"
done

# ---------------------------------------------------------------------------------------------------------
# --json
plan "plan --json: one document with the chosen plan" --model cnn --batch 256 --mem 12MiB --threads 2 --json
expect_rc 0
expect_empty "$ERR"
if [ -n "$PY" ]; then
    "$PY" -c 'import json, sys; json.load(sys.stdin)' <"$OUT" || fail "stdout is not one JSON document"
fi
py_check "the JSON holds the chosen plan" "$OUT" <<'PYEOF'
import json, sys
d = json.load(open(sys.argv[1]))
assert d["model"] == "cnn" and d["batch"] == 256 and d["budget"] == 12 * 1024 * 1024, d
c = d["chosen"]
assert c["chosen_by"] == "budget", c["chosen_by"]
assert isinstance(c["total"], (int, float)) and 0 < c["total"] <= d["budget"], c["total"]
assert c["total"] == sum(c["bytes"].values()), (c["total"], c["bytes"])
assert set(c["bytes"]) == {"params", "grads", "optim", "activations", "workspace", "data"}, c["bytes"]
assert c["fits"] is True and c["chosen"] is True
assert "buffers" not in c, "buffers without --layers"
chosen = [r for r in d["candidates"] if r["chosen"]]
assert len(chosen) == 1, len(chosen)
assert chosen[0]["micro_batch"] == c["micro_batch"] and chosen[0]["total"] == c["total"]
ms = sorted({r["micro_batch"] for r in d["candidates"]})
assert {1, 2, 4, 8, 16, 32, 64, 128, 256} <= set(ms), ms
for r in d["candidates"]:
    assert r["fits"] == (r["total"] <= d["budget"]), r
    assert r["micro_batches"] == -(-256 // r["micro_batch"]), r
assert c["baseline"]["resolved_checkpoint"] == "none", c["baseline"]
PYEOF

plan "plan --json --layers adds the buffers" --model mlp --json --layers
expect_rc 0
py_check "the JSON lists buffers" "$OUT" <<'PYEOF'
import json, sys
d = json.load(open(sys.argv[1]))
c = d["chosen"]
assert d["budget"] is None and c["fits"] is None and c["chosen_by"] == "flags", d
bufs = c["buffers"]
assert len(bufs) > 0
for b in bufs:
    assert b["first_step"] <= b["last_step"] < c["schedule_steps"], b
    assert b["bytes"] > 0, b
assert {b["category"] for b in bufs} >= {"params", "grads", "optim", "activations", "workspace", "data"}, bufs
owned = [b for b in bufs if not b["in_place"] and b["category"] == "activations"]
assert max(b["offset"] + b["bytes"] for b in owned) <= c["bytes"]["activations"], "a buffer outside the arena"
PYEOF

# ---------------------------------------------------------------------------------------------------------
# the memory timeline
xml_well_formed() {
    if command -v xmllint >/dev/null 2>&1; then
        xmllint --noout "$1" 2>"$TMP/xml.log" || fail "$1 is not well-formed XML: $(head -n 2 "$TMP/xml.log")"
    elif [ -n "$PY" ]; then
        "$PY" -c 'import sys, xml.dom.minidom as m; m.parse(sys.argv[1])' "$1" 2>"$TMP/xml.log" ||
            fail "$1 is not well-formed XML: $(tail -n 1 "$TMP/xml.log")"
    fi
}

SVG=$TMP/timeline.svg
plan "plan --timeline FILE.svg writes a well-formed SVG" --model cnn --batch 256 --mem 12MiB --threads 2 \
    --timeline "$SVG"
expect_rc 0
expect_in "$OUT" "memory timeline written to $SVG"
if [ ! -s "$SVG" ]; then
    fail "no $SVG"
else
    [ "$(head -c 4 "$SVG")" = "<svg" ] || fail "the SVG does not start with <svg"
    [ "$(tail -c 7 "$SVG" | tr -d '\n')" = "</svg>" ] || fail "the SVG does not end with </svg>"
    xml_well_formed "$SVG"
    for phrase in params grads optim activations workspace data "peak " forward backward update MiB \
        "budget 12.00 MiB" "Chosen plan"; do
        grep -qF -- "$phrase" "$SVG" || fail "the SVG lacks '$phrase'"
    done
    grep -qiF "no checkpointing" "$SVG" || fail "the SVG has no panel without checkpointing"
fi
[ ! -e "$SVG.tmp" ] || fail "$SVG.tmp was left behind"

# check_csv CSV JSON: the header, then one row per schedule step of each plan, totals that add up.
check_csv() {
    py_check "the CSV timeline" "$1" "$2" <<'PYEOF'
import csv, json, sys
rows = list(csv.reader(open(sys.argv[1])))
d = json.load(open(sys.argv[2]))["chosen"]
header = ["plan", "step", "layer", "phase", "params", "grads", "optim", "activations", "workspace", "data", "total"]
assert rows[0] == header, rows[0]
for plan, steps in (("checkpointed", d["schedule_steps"]), ("baseline", d["baseline"]["schedule_steps"])):
    mine = [r for r in rows[1:] if r[0] == plan]
    assert len(mine) == steps, (plan, len(mine), steps)
    assert [int(r[1]) for r in mine] == list(range(steps)), plan
    for r in mine:
        assert r[3] in ("forward", "recompute", "backward", "update"), r
        assert int(r[10]) == sum(int(x) for x in r[4:10]), r
    assert mine[0][3] == "forward" and mine[-1][3] == "update", plan
    if plan == "baseline":
        assert not any(r[3] == "recompute" for r in mine), "recompute in the baseline"
    elif d["segments"] > 0:
        assert any(r[3] == "recompute" for r in mine), "no recompute step in a checkpointed plan"
assert len(rows) == 1 + d["schedule_steps"] + d["baseline"]["schedule_steps"], len(rows)
PYEOF
}

CSV=$TMP/timeline.csv
plan "plan --timeline FILE.csv (checkpointed): one row per step of each plan" --model cnn --batch 64 \
    --micro-batch 16 --checkpoint every:2 --json --timeline "$CSV"
expect_rc 0
cp "$OUT" "$TMP/plan.json"
[ -s "$CSV" ] || fail "no $CSV"
check_csv "$CSV" "$TMP/plan.json"

# The plan's peak is one figure: the table's chosen row, the summary, the JSON, the timeline's CSV and its SVG
# give the same bytes at the same step, layer and phase, and the --layers rows live at that step add up to it.
# unet-hires under 8 GiB recomputes every third layer: its activations peak at one step, its memory in use
# (activations with that step's workspace) at another; resnet50 the same without a budget.
for args in "unet-hires --batch 4 --mem 8GiB" "resnet50 --batch 32" "unet --batch 8 --mem 400MiB"; do
    # shellcheck disable=SC2086
    plan "plan $args: the table's peak is the timeline's" --model $args --threads 2 --timeline "$TMP/peak.svg"
    expect_rc 0
    cp "$OUT" "$TMP/peak.txt"
    # shellcheck disable=SC2086
    plan "plan $args --json --layers: the JSON's peak is the CSV timeline's, the buffers add up to it" \
        --model $args --threads 2 --json --layers --timeline "$TMP/peak.csv"
    expect_rc 0
    py_check "one peak" "$OUT" "$TMP/peak.csv" "$TMP/peak.txt" "$TMP/peak.svg" <<'PYEOF'
import csv, json, re, sys
c = json.load(open(sys.argv[1]))["chosen"]
rows = [r for r in csv.DictReader(open(sys.argv[2])) if r["plan"] == "checkpointed"]
top = max(int(r["total"]) for r in rows)
first = next(r for r in rows if int(r["total"]) == top)
place = (c["peak"], c["peak_step"], c["peak_op"], c["peak_phase"])
assert place == (top, int(first["step"]), first["layer"], first["phase"]), (place, first)
live = {}
for b in c["buffers"]:
    if not b["in_place"] and b["first_step"] <= c["peak_step"] <= b["last_step"]:
        live[b["category"]] = live.get(b["category"], 0) + b["bytes"]
assert sum(live.values()) == c["peak"], (live, c["peak"])
for cat, n in live.items():
    assert n == int(first[cat]), (cat, n, first[cat])
text = open(sys.argv[3]).read()
said = re.search(r"peak in use: (\S+ \S+) at (\S+) (\S+) \(schedule step (\d+)", text)
assert said and (int(said.group(4)), said.group(2), said.group(3)) == place[1:], (said, place)
row = [l for l in text.splitlines() if l.startswith("* ")][0]
assert "%s %s %s" % (said.group(1), c["peak_op"], c["peak_phase"]) in row, (row, said.group(0))
svg = open(sys.argv[4]).read()
label = "peak %s: %s %s (step %d)" % (said.group(1), c["peak_op"], c["peak_phase"], c["peak_step"])
assert label in svg, (label, re.findall(r"peak [^<]*", svg))
PYEOF
done

plan "plan --timeline FILE.CSV (upper-case extension, no checkpointing)" --model mlp --json --timeline "$TMP/t.CSV"
expect_rc 0
cp "$OUT" "$TMP/plan2.json"
check_csv "$TMP/t.CSV" "$TMP/plan2.json"

plan "plan --timeline into a missing folder: exit 1, the path named" --model mlp \
    --timeline "$TMP/no-such-dir/t.svg"
expect_rc 1
expect_in "$ERR" "$TMP/no-such-dir/t.svg"
expect_empty "$OUT"

plan "plan --timeline over an existing file replaces it" --model mlp --timeline "$CSV"
expect_rc 0
grep -q '^baseline,' "$CSV" || fail "the CSV has no baseline rows"

# ---------------------------------------------------------------------------------------------------------
# resmlp, the deep residual model for checkpointing (when the build has it)
HAVE_RESMLP=0
plan "plan resmlp (or skip: unknown model)" --model resmlp --batch 64 --json
if grep -qF "unknown model" "$ERR"; then
    CASE_OK=1
    echo "skip: no resmlp model in this build: its cases are skipped"
else
    HAVE_RESMLP=1
    expect_rc 0
    py_check "sqrt checkpointing saves activations on resmlp" "$OUT" <<'PYEOF'
import json, sys
d = json.load(open(sys.argv[1]))
rows = {(r["micro_batch"], r["checkpoint"]): r for r in d["candidates"]}
none, sqrt = rows[(64, "none")], rows[(64, "sqrt")]
assert sqrt["segments"] > 0 and sqrt["recompute_flops"] > 0, sqrt
assert sqrt["bytes"]["activations"] < none["bytes"]["activations"], (sqrt["bytes"], none["bytes"])
PYEOF
fi

# ---------------------------------------------------------------------------------------------------------
# training with the chosen plans (needs MNIST)

# to_bytes "7.91 MiB": bytes (as a float), for comparing the memory report's lines.
to_bytes() {
    awk -v v="$1" -v u="$2" 'BEGIN {
        f["B"] = 1; f["KiB"] = 1024; f["MiB"] = 1048576; f["GiB"] = 1073741824
        if (!(u in f)) exit 1
        printf "%.0f\n", v * f[u] }'
}

# report_bytes NAME: the bytes of the line "  NAME  X UNIT" of the final memory report.
report_bytes() {
    local line
    line=$(sed -n '/^memory by category:/,$p' "$OUT" | grep -E "^  $1 " | head -n 1)
    # shellcheck disable=SC2086
    to_bytes $(echo "$line" | awk '{ print $2, $3 }')
}

if have_mnist; then
    run "train --mem, no --micro-batch: auto fit, peak within the budget" train --mem 14MiB --model cnn \
        --batch 256 --max-steps 5 --progress off --data-dir "$DATA"
    expect_rc 0
    expect_in "$OUT" "auto: micro-batch "
    expect_in "$OUT" "fits: planned "
    expect_in "$OUT" "of the 14.00 MiB budget"
    expect_in "$OUT" "checkpoint "
    expect_in "$OUT" "step 5/5"
    peak=$(report_bytes peak) budget=$(report_bytes budget)
    if [ -z "$peak" ] || [ -z "$budget" ]; then
        fail "no peak or budget line in the memory report"
    elif [ "$budget" -ne 14680064 ] || [ "$peak" -gt "$budget" ]; then
        fail "peak $peak bytes is over the budget $budget"
    fi
    expect_empty "$ERR"

    # What `snug plan --data` predicts is what `snug train` reserves: both build the request with
    # snug_plan_request_for_data (the data set's bytes, MNIST's labels, the epoch order, the runtime's 2 MiB a
    # thread), so the same micro-batch, checkpoint policy and total. Two budgets a model, from plan itself: its
    # refusal of a tiny budget names the smallest that fits; just above it and twice it.
    for spec in "cnn mnist 64" "mlp mnist 256" "resnet20 mnist32 64"; do
        read -r model data batch <<<"$spec"
        flags=(--model "$model" --batch "$batch" --data "$data" --data-dir "$DATA" --threads 2)
        run "plan $model --data $data: the smallest budget" plan "${flags[@]}" --mem 1KiB
        expect_rc 1
        least=$(sed -n 's/.*the smallest budget that fits is \([0-9.]*\) MiB.*/\1/p' "$ERR")
        [ -n "$least" ] || { fail "no smallest budget in MiB named"; continue; }
        for budget in $(awk -v l="$least" 'BEGIN { printf "%d %d", l * 1.05 * 1048576, l * 2 * 1048576 }'); do
            run "plan $model --data $data --mem $budget --json" plan "${flags[@]}" --mem "$budget" --json
            expect_rc 0
            cp "$OUT" "$TMP/predicted.json"
            run "train $model reserves what plan --data predicted at --mem $budget" train "${flags[@]}" \
                --mem "$budget" --max-steps 1 --evaluate off --progress off
            expect_rc 0
            py_check "train's micro-batch, policy and total are plan's" "$TMP/predicted.json" "$OUT" <<'PYEOF'
import json, re, sys
c = json.load(open(sys.argv[1]))["chosen"]
out = open(sys.argv[2]).read()
m = re.search(r"^auto: micro-batch (\d+) .* with checkpoint (.+) fits: planned", out, re.M)
assert m and int(m.group(1)) == c["micro_batch"], (m and m.group(0), c["micro_batch"])
policy = m.group(2).removeprefix("auto: ").split()  # e.g. "auto: every:22 selective"
assert policy[0] == c["resolved_checkpoint"] and ("selective" in policy) == c["selective"], (policy, c)
total = re.search(r"memory reserved before the first step:\n(?:  .*\n)*?  total +([0-9.]+) (B|KiB|MiB|GiB)", out)
scale = {"B": 1, "KiB": 1024, "MiB": 1024**2, "GiB": 1024**3}
assert f"{c['total'] / scale[total.group(2)]:.2f}" == total.group(1), (total.group(1), c["total"])
PYEOF
        done
    done

    run "plan --data: the batch larger than the training part is planned for it all, as train does" plan \
        --model unet --data shapes --train-samples 40 --batch 64 --threads 2 --mem 1GiB
    expect_rc 0
    expect_in "$OUT" "batch 64 is more than the 40 training samples of --data shapes: planned for them all"
    expect_in "$OUT" "counted as snug train --data shapes reserves it"

    run "plan warns about BatchNorm under accumulation as train does" plan --model resnet20 --batch 128 \
        --micro-batch 32 --data mnist32 --data-dir "$DATA" --threads 2
    expect_rc 0
    expect_in "$OUT" "WARNING: model resnet20 has 21 BatchNorm layers, and this run computes each step's gradient from 4"

    run "train --mem with a fixed policy: auto fit of the micro-batch under it" train --mem 14MiB \
        --checkpoint every:2 --model cnn --batch 64 --max-steps 2 --progress off --data-dir "$DATA"
    expect_rc 0
    expect_in "$OUT" "with checkpoint every:2 fits"
    expect_in "$OUT" "checkpoint every:2"

    run "train --micro-batch auto --mem" train --micro-batch auto --mem 64MiB --model mlp --batch 32 \
        --max-steps 2 --progress off --data-dir "$DATA"
    expect_rc 0
    expect_in "$OUT" "auto: micro-batch 32 (1 micro-batch of 32)"

    run "train without --mem: checkpoint none in the header, no auto fit" train --model mlp --batch 32 \
        --max-steps 2 --progress off --data-dir "$DATA"
    expect_rc 0
    expect_in "$OUT" "checkpoint none: every activation backward needs is kept"
    expect_not_in "$OUT" "auto: "

    if [ "$HAVE_RESMLP" -eq 1 ]; then
        # a small lr and clipping: 32 residual blocks at SGD's default lr can diverge in a few steps
        run "train --checkpoint sqrt on resmlp" train --checkpoint sqrt --model resmlp --batch 64 \
            --micro-batch 32 --max-steps 5 --lr 0.01 --clip 1 --progress off --data-dir "$DATA"
        expect_rc 0
        expect_in "$OUT" "model resmlp:"
        grep -qE '^checkpoint sqrt: [0-9]+ segments? recomputed in backward, [0-9.]+% of the FLOPs' "$OUT" ||
            fail "no 'checkpoint sqrt: N segments recomputed' line"
        expect_in "$OUT" "step 5/5"
        expect_in "$OUT" "test accuracy"
        expect_empty "$ERR"
    fi
else
    echo "skip: no real MNIST in '$DATA' (make data): the training runs are skipped"
fi

finish_tests
