#!/usr/bin/env bash
# The zoo's unet as a PyTorch module, exported by PyTorch at the zoo's input 1x256x256 (the CTest fixture
# onnx_unet_export writes $SNUG_ONNX_TORCH_DIR/unet.onnx; scripts/unet_reference.py): ConvTranspose, Concat of
# the skips and the GroupNorm PyTorch exports become the zoo's layers, so `snug plan --json` of the file is the
# zoo unet's byte for byte but for the model's name (its first two lines): every candidate's bytes per category,
# total and peak, micro-batch and checkpoint, and the choice, with no budget and inside two budgets that this
# build derives from its own plans of the zoo unet (its one-pass plan, and a fifth above the smallest budget that
# fits, where it needs checkpoints). Then it trains two steps
# on synthetic shapes with --save, and the file loads into the PyTorch module with load_state_dict(strict=True).
# The gradients are test_onnx_unet's.
. "$(dirname "$0")/harness.sh"
. "$(dirname "$0")/onnx_twin.sh"

MODEL=${SNUG_ONNX_TORCH_DIR:-}/unet.onnx
if [ -z "${SNUG_ONNX_TORCH_DIR:-}" ] || [ ! -f "$MODEL" ]; then
    echo "FAIL: no exported unet ('$MODEL'): run through ctest, whose fixture onnx_unet_export makes it" \
         "(it needs python3-torch and python3-onnx: make deps)"
    exit 1
fi

zoo_budgets unet 8

for budget in none "$WHOLE" "$TIGHT"; do
    expect_plan_as_zoo unet "$MODEL" 8 "$budget"
done

run "the exported unet a fifth above the smallest budget ($TIGHT) needs checkpoints" plan --model "$MODEL" \
    --batch 8 --mem "$TIGHT"
expect_rc 0
expect_in "$OUT" "per step, checkpoint auto: "

run "train the exported unet two steps on shapes and save" train --model "$MODEL" --data shapes --train-samples 8 \
    --batch 4 --max-steps 2 --evaluate off --threads 2 --save "$TMP/unet.safetensors"
expect_rc 0
expect_in "$OUT" "parameters saved to $TMP/unet.safetensors"

finish_case
CASE="the trained weights load into the PyTorch unet with strict=True"
CASE_OK=1
"${SNUG_PYTHON3:-/usr/bin/python3}" - "$TMP/unet.safetensors" "$(dirname "$0")/../../scripts" "$(dirname "$0")" \
    >"$OUT" 2>"$ERR" <<'PY'
import sys
import torch
sys.path[:0] = sys.argv[2:4]
import safetensors_state
import unet_reference

state, _ = safetensors_state.load(sys.argv[1])
net = unet_reference.unet_module(torch)
before = net.state_dict()["head.bias"].clone()
net.load_state_dict(state, strict=True)  # raises on a missing or extra key or a wrong shape
assert not torch.equal(before, net.head.bias.detach()), "the saved weights are the initial ones: not trained"
print("loaded", len(state), "tensors")
PY
[ $? -eq 0 ] || fail "load_state_dict(strict=True) failed"
expect_in "$OUT" "loaded 82 tensors"

finish_tests
