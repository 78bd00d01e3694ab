#!/usr/bin/env bash
# End-to-end tests of --precision (docs/precision.md): the plan's bytes and formats in bf16, a bad value, a bf16
# training run, and a resumed run that asks for the other precision.
#
# usage: tests/cli/test_precision.sh SNUG_BINARY DATA_DIR
set -u

# shellcheck source=tests/cli/harness.sh
. "$(dirname "$0")/harness.sh"

EMPTY=$TMP/empty-data
mkdir -p "$EMPTY"

plan() {
    local name=$1
    shift
    run_env "$name" "SNUG_DATA_DIR=$EMPTY" -- plan "$@"
}

plan "resnet20 at batch 128 in fp32: 152.01 MiB of activations" --model resnet20 --batch 128 --micro-batch 128
expect_rc 0
expect_in "$OUT" "precision fp32"
expect_in "$OUT" "activations 152.01 MiB"
FP32_ACTIVATIONS=$(grep -oE 'activations [0-9.]+ MiB' "$OUT" | head -1 | awk '{print $2}')

# resnet20's peak is made of kept outputs, which halve in their packed copies: at most 0.55 of float32's
# (docs/precision.md)
plan "the same in bf16: the outputs kept packed, at most 0.55 of the activations" --model resnet20 --batch 128 \
    --micro-batch 128 --precision bf16 --layers
expect_rc 0
expect_in "$OUT" "precision bf16"
BF16_ACTIVATIONS=$(grep -oE 'activations [0-9.]+ MiB' "$OUT" | head -1 | awk '{print $2}')
awk -v b="$BF16_ACTIVATIONS" -v f="$FP32_ACTIVATIONS" 'BEGIN { exit !(b > 0 && b <= 0.55 * f) }' ||
    fail "bf16 activations ${BF16_ACTIVATIONS:-none} MiB, not at most 0.55 of fp32's ${FP32_ACTIVATIONS:-none} MiB"
grep -qE -- ' packed output +bf16' "$OUT" || fail "--layers lists no packed bf16 output"
# every reader of a kept output after forward takes its packed copy here (the convolutions, the ReLU's mask,
# the classifier's weight gradient): no float32 instance is unpacked
expect_not_in "$OUT" "unpacked output"
expect_in "$OUT" "dtype"

# attention reads its input (the qkv projection's output) as float32: an instance unpacked for its backward
plan "gpt in bf16: attention's input unpacked for backward" --model gpt --batch 8 --micro-batch 8 --precision bf16 \
    --layers
expect_rc 0
grep -qE -- 'qkv +unpacked output +fp32' "$OUT" || fail "--layers lists no unpacked fp32 output for attention"

# The cnn at batch 64 plans 19.98 MiB in bf16 with float32 activation gradients and 19.40 with them packed, but a
# sample's gradients are at most 98 KiB, which a core's cache holds: packing would add time and save no memory
# traffic (plan_packed_grads_pay), so it is taken only where a budget needs it; unet's, megabytes a sample, are
# packed without one (docs/precision.md)
plan "cnn at batch 64 in bf16: float32 activation gradients where a sample's fit a cache" --model cnn --batch 64 \
    --micro-batch 64 --optim sgd --precision bf16 --layers
expect_rc 0
grep -qE -- ' packed gradient +bf16' "$OUT" && fail "--layers lists a packed bf16 gradient without a budget"
# the budget: 1 KiB under that plan's total (this build's, on this CPU), which only the packed plan meets
plan "the cnn's total in bf16, for the budget below" --model cnn --batch 64 --micro-batch 64 --optim sgd \
    --precision bf16 --json
FLAT_KIB=$(python3 -c 'import json, sys; print(json.load(sys.stdin)["chosen"]["total"] // 1024 - 1)' <"$OUT")
plan "the same under a budget only packed gradients meet: stored in bfloat16" --model cnn --batch 64 \
    --micro-batch 64 --optim sgd --precision bf16 --layers --mem "${FLAT_KIB}KiB"
expect_rc 0
grep -qE -- ' packed gradient +bf16' "$OUT" || fail "--layers lists no packed bf16 gradient"
expect_in "$OUT" " budget ("
plan "unet at batch 8 in bf16: its gradients packed without a budget" --model unet --batch 8 --micro-batch 8 \
    --optim adamw --precision bf16 --layers
expect_rc 0
grep -qE -- ' packed gradient +bf16' "$OUT" || fail "--layers lists no packed bf16 gradient"

plan "--json names the precision" --model cnn --batch 16 --precision bf16 --json
expect_rc 0
expect_in "$OUT" '"precision":	"bf16"'
expect_in "$OUT" '"products":	"auto"'

run_env "SNUG_GEMM=blas goes into the request, and the plan records it" "SNUG_DATA_DIR=$EMPTY" "SNUG_GEMM=blas" -- \
    plan --model mlp --batch 16 --precision bf16 --json
expect_rc 0
expect_in "$OUT" '"products":	"blas"'
expect_in "$OUT" '"linear_product":	"blas"'

run_env "SNUG_GEMM=snug: the bfloat16 product on any CPU" "SNUG_DATA_DIR=$EMPTY" "SNUG_GEMM=snug" -- \
    plan --model mlp --batch 16 --precision bf16 --json
expect_rc 0
expect_in "$OUT" '"linear_product":	"snug bf16"'

usage_error "an unknown precision" "--precision must be one of fp32, bf16, got 'fp16'" plan --precision fp16

if ! have_mnist; then
    echo "skip: the training cases need MNIST in $DATA"
    finish_tests
    exit $?
fi

STATE=$TMP/state
run "a bf16 run trains, says so, and keeps its state" train --model mlp --data-dir "$DATA" --batch 64 \
    --max-steps 30 --precision bf16 --state "$STATE" --state-every 10 --evaluate off --progress off
expect_rc 0
expect_in "$OUT" "precision bf16: every output rounded to bfloat16"
expect_in "$OUT" "trained 30 steps"

run "resumed in fp32: refused, naming the flag" train --resume "$STATE" --precision fp32 --max-steps 40
expect_rc 1
expect_in "$ERR" "precision differs (bf16 in the state, fp32 in this run)"
expect_in "$ERR" "--precision defines the result"

run "resumed as it was: continues in bf16" train --resume "$STATE" --max-steps 40 --progress off
expect_rc 0
expect_in "$OUT" "precision bf16"
expect_in "$OUT" "trained"

finish_tests
