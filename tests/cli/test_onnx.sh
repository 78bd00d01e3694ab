#!/usr/bin/env bash
# ONNX models end to end (docs/onnx.md), on the files scripts/export_onnx.py wrote into tests/data/onnx/: snug plan
# on one under a budget, snug train for two steps saving safetensors under the initializers' names (read back by
# a tiny Python reader when python3 is there), snug eval on the saved weights, and the refusals (exit 1, the
# node, its op and what to do). The train and eval cases need MNIST and skip cleanly without.
#
# usage: tests/cli/test_onnx.sh SNUG_BINARY DATA_DIR
set -u

# shellcheck source=tests/cli/harness.sh
. "$(dirname "$0")/harness.sh"

MODELS="$(cd "$(dirname "$0")/../data/onnx" && pwd)"
FAST=(--progress off --threads 1)

# Twice what the whole batch plans in one pass, as this build plans it: a budget it fits in on any CPU.
WHOLE=$("$SNUG" plan --model "$MODELS/cnn.onnx" --batch 64 --threads 1 --json |
        python3 -c 'import json, sys; print(json.load(sys.stdin)["chosen"]["total"])')
run "plan an ONNX model under a budget" plan --model "$MODELS/cnn.onnx" --batch 64 --mem $((2 * WHOLE)) --threads 1
expect_rc 0
expect_in "$OUT" "chosen plan (*): micro-batch"
expect_in "$OUT" "bn1 backward"

run "plan a name ending in .onnx, without a folder" plan --model cnn.onnx --batch 8
expect_rc 1
expect_in "$ERR" "cnn.onnx: cannot open the ONNX model"

for bad in unknown_op:"(Elu, opset 15)" bad_attribute:"one dilation for both axes" dynamic_shape:"dynamic" \
           old_opset:"opset_version=13" overpadded_maxpool:"at most half the kernel" truncated:"not an ONNX model" \
           garbage:"not an ONNX model" resize_linear:"(Resize, opset 15)" \
           conv_transpose_output_padding:"no output_padding" groupnorm_without_affine:"affine=True" \
           add_constant:"(Add, opset 15)" mul_batch_constant:"along the batch" softmax_batch:"(Softmax, opset 15)" \
           transpose_batch:"(Transpose, opset 15)" softmax_output:"without its final Softmax" \
           mul_per_channel:"persistent=False" slice_negative_step:"positive steps only" \
           split_batch:"along the batch axis" unsqueeze_batch:"(Unsqueeze, opset 15)"; do
    file=${bad%%:*} phrase=${bad#*:}
    run "refused: $file" plan --model "$MODELS/bad/$file.onnx" --batch 8
    expect_rc 1
    expect_in "$ERR" "$MODELS/bad/$file.onnx: "
    expect_in "$ERR" "$phrase"
    expect_empty "$OUT"
done

if have_mnist; then
    run "train an ONNX model two steps and save its weights" train --model "$MODELS/mlp.onnx" --data-dir "$DATA" \
        --batch 32 --max-steps 2 --evaluate off --save "$TMP/mlp.safetensors" "${FAST[@]}"
    expect_rc 0
    expect_in "$OUT" "parameters saved to $TMP/mlp.safetensors (safetensors, 4 tensors)"
    if command -v python3 >/dev/null 2>&1; then
        run_python "the saved weights carry the initializers' names" "$TMP/mlp.safetensors" <<'PY'
import json, struct, sys
with open(sys.argv[1], "rb") as f:
    n = struct.unpack("<Q", f.read(8))[0]
    header = json.loads(f.read(n))
names = sorted(k for k in header if k != "__metadata__")
want = sorted(["fc1.weight", "fc1.bias", "onnx::MatMul_20", "fc2.bias"])
assert names == want, names
assert header["fc1.weight"]["shape"] == [64, 784], header["fc1.weight"]
PY
        expect_rc 0
    else
        echo "skip: no python3: the safetensors names check is skipped"
    fi
    run "train a CNN with BatchNorm from ONNX" train --model "$MODELS/cnn.onnx" --data-dir "$DATA" --batch 32 \
        --max-steps 2 --evaluate off --save "$TMP/cnn.safetensors" "${FAST[@]}"
    expect_rc 0
    expect_in "$OUT" "(safetensors, 15 tensors)"
    run "evaluate the saved weights of an ONNX model" eval --model "$MODELS/cnn.onnx" --data-dir "$DATA" \
        --weights "$TMP/cnn.safetensors" --threads 1
    expect_rc 0
    expect_in "$OUT" "accuracy"
else
    echo "skip: no real MNIST in '$DATA' (make data): the train and eval cases are skipped"
fi

finish_tests
