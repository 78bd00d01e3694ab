#!/usr/bin/env bash
# The zoo's resnet20 as a PyTorch module, exported by PyTorch at the zoo's input 1x32x32 (the CTest fixture
# onnx_resnet20_export writes $SNUG_ONNX_TORCH_DIR/resnet20.onnx; scripts/resnet20_reference.py): its Conv,
# BatchNormalization, Relu, residual Add, GlobalAveragePool, Flatten and Gemm become the zoo's layers, so `snug plan
# --json` of the file is `--model resnet20`'s byte for byte but for the model's name (its first two lines): every
# candidate's bytes per category, total and peak, micro-batch and checkpoint, and the choice, with no budget,
# inside the whole batch's one-pass plan and inside a fifth above the smallest that fits (both as this build
# plans them). Then it trains two steps on gray images with --save, and the file loads into the PyTorch module with
# load_state_dict(strict=True). The gradients are test_onnx_resnet20's.
. "$(dirname "$0")/harness.sh"
. "$(dirname "$0")/onnx_twin.sh"

MODEL=${SNUG_ONNX_TORCH_DIR:-}/resnet20.onnx
PY=${SNUG_PYTHON3:-/usr/bin/python3}
if [ -z "${SNUG_ONNX_TORCH_DIR:-}" ] || [ ! -f "$MODEL" ]; then
    echo "FAIL: no exported resnet20 ('$MODEL'): run through ctest, whose fixture onnx_resnet20_export makes it" \
         "(it needs python3-torch and python3-onnx: make deps)"
    exit 1
fi

# The budgets, as this build plans the zoo's resnet20 at batch 128: its one-pass plan, and a fifth above the
# smallest that fits, where it needs micro-batches.
zoo_budgets resnet20 128

for budget in none "$WHOLE" "$TIGHT"; do
    expect_plan_as_zoo resnet20 "$MODEL" 128 "$budget"
done

run "the exported resnet20 inside $TIGHT needs micro-batches" plan --model "$MODEL" --batch 128 --mem "$TIGHT"
expect_rc 0
expect_not_in "$OUT" "one pass of 128"

# Two steps on a folder of 32x32 gray images of 10 classes.
"$PY" "$(dirname "$0")/make_image_folder.py" "$TMP/images" 10 2 1 32 >/dev/null
run "train the exported resnet20 two steps and save" train --model "$MODEL" --data "images:$TMP/images" \
    --batch 16 --max-steps 2 --evaluate off --threads 2 --save "$TMP/resnet20.safetensors"
expect_rc 0
expect_in "$OUT" "parameters saved to $TMP/resnet20.safetensors"

finish_case
CASE="the trained weights load into the PyTorch resnet20 with strict=True"
CASE_OK=1
"$PY" - "$TMP/resnet20.safetensors" "$(dirname "$0")/../../scripts" "$(dirname "$0")" >"$OUT" 2>"$ERR" <<'PY'
import sys
import torch
sys.path[:0] = sys.argv[2:4]
import resnet20_reference
import safetensors_state

state, metadata = safetensors_state.load(sys.argv[1])
net = resnet20_reference.resnet20_module(torch)
before = net.state_dict()["fc.bias"].clone()
net.load_state_dict(state, strict=True)  # raises on a missing or extra key or a wrong shape
assert not torch.equal(before, net.fc.bias.detach()), "the saved weights are the initial ones: not trained"
assert int(net.bn1.num_batches_tracked) == 2, int(net.bn1.num_batches_tracked)  # one micro-batch per step
print("loaded", len(state), "tensors")
PY
RC=$?
expect_rc 0
expect_in "$OUT" "loaded 149 tensors"

finish_tests
