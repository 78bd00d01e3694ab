#!/usr/bin/env bash
# Broadcasting arithmetic as PyTorch exports it (scripts/se_reference.py: a per-channel normalisation by
# constants, SiLU, squeeze-excitation, a residual Sub and Div; the CTest fixture onnx_se_export writes
# $SNUG_ONNX_TORCH_DIR/se.onnx): snug plans it with the arithmetic as its own layers and the normalisation's
# constants as no parameter, trains it two steps on images with --save, and the file loads into the PyTorch
# module with load_state_dict(strict=True): the constants (persistent=False buffers) are not in it. The
# gradients are test_onnx_se's.
. "$(dirname "$0")/harness.sh"

MODEL=${SNUG_ONNX_TORCH_DIR:-}/se.onnx
PY=${SNUG_PYTHON3:-/usr/bin/python3}
if [ -z "${SNUG_ONNX_TORCH_DIR:-}" ] || [ ! -f "$MODEL" ]; then
    echo "FAIL: no exported se model ('$MODEL'): run through ctest, whose fixture onnx_se_export makes it" \
         "(it needs python3-torch and python3-onnx: make deps)"
    exit 1
fi

run "plan the exported model: the arithmetic as layers" plan --model "$MODEL" --batch 8 --layers
expect_rc 0
expect_in "$OUT" "/Mul_1"
expect_in "$OUT" "/Div_1"

# Two steps on a folder of 16x16 gray images of 10 classes (copied into the three channels).
"$PY" "$(dirname "$0")/make_image_folder.py" "$TMP/images" 10 2 1 16 >/dev/null
run "train the exported model two steps and save" train --model "$MODEL" --data "images:$TMP/images" \
    --batch 8 --max-steps 2 --evaluate off --threads 2 --save "$TMP/se.safetensors"
expect_rc 0
expect_in "$OUT" "parameters saved to $TMP/se.safetensors"

finish_case
CASE="the trained weights load into the PyTorch module with strict=True, without the constants"
CASE_OK=1
"$PY" - "$TMP/se.safetensors" "$(dirname "$0")/../../scripts" "$(dirname "$0")" >"$OUT" 2>"$ERR" <<'PY'
import sys
import torch
sys.path[:0] = sys.argv[2:4]
import se_reference
import safetensors_state

state, metadata = safetensors_state.load(sys.argv[1])
assert "mean" not in state and "std" not in state, sorted(state)
net = se_reference.se_module(torch)
before = net.state_dict()["fc.bias"].clone()
net.load_state_dict(state, strict=True)  # raises on a missing or extra key or a wrong shape
assert not torch.equal(before, net.fc.bias.detach()), "the saved weights are the initial ones: not trained"
print("loaded", len(state), "tensors")
PY
RC=$?
expect_rc 0
expect_in "$OUT" "loaded 10 tensors"

finish_tests
