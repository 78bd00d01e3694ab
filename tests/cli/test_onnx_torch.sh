#!/usr/bin/env bash
# torchvision's resnet18(num_classes=10), exported by PyTorch (the CTest fixture onnx_torch_export writes
# $SNUG_ONNX_TORCH_DIR/resnet18.onnx), from PyTorch to snug and back: planned under a budget, trained two steps
# with --save, and the saved weights loaded into torchvision.models.resnet18(num_classes=10) with
# load_state_dict(strict=True) (no extra key, none missing, every shape right), the trained values with them.
# The gradients themselves are test_onnx_torch's (against PyTorch's float64 reference).
. "$(dirname "$0")/harness.sh"

MODEL=${SNUG_ONNX_TORCH_DIR:-}/resnet18.onnx
PY=${SNUG_PYTHON3:-/usr/bin/python3}
if [ -z "${SNUG_ONNX_TORCH_DIR:-}" ] || [ ! -f "$MODEL" ]; then
    echo "FAIL: no exported resnet18 ('$MODEL'): run through ctest, whose fixture onnx_torch_export makes it" \
         "(it needs python3-torch and python3-torchvision: make deps)"
    exit 1
fi

# Twice what the whole batch plans in one pass, as this build plans it: room for it on any CPU.
WHOLE=$("$SNUG" plan --model "$MODEL" --batch 256 --json |
        "$PY" -c 'import json, sys; print(json.load(sys.stdin)["chosen"]["total"])')
run "plan resnet18 at batch 256 inside twice its one-pass plan" plan --model "$MODEL" --batch 256 --mem $((2 * WHOLE))
expect_rc 0
expect_in "$OUT" "chosen plan (*): micro-batch"
expect_in "$OUT" "layer4.1.conv2"

# A budget a fifth above the smallest that fits, as this build plans it (the refusal of 1 KiB names it): the
# weights, gradients and momentum fit, the activations of the whole batch do not.
run "a budget of 1 KiB is refused with the smallest that fits" plan --model "$MODEL" --batch 256 --mem 1KiB
SMALL=$(grep -o 'smallest budget that fits is [0-9.]* [KMG]iB' "$ERR" | awk '{print $6 $7}')
TIGHT=$("$PY" -c "import sys; v, u = float(sys.argv[1][:-3]), sys.argv[1][-3:]; print(f'{v * 1.2:.2f}{u}')" "$SMALL")
run "plan resnet18 at batch 256 inside $TIGHT: micro-batches and checkpoints" plan --model "$MODEL" \
    --batch 256 --mem "$TIGHT"
expect_rc 0
expect_in "$OUT" "chosen plan (*): micro-batch"
expect_not_in "$OUT" "one pass of 256"

# Two steps on a folder of 32x32 images of 10 classes (gray, copied into the model's three channels).
"$PY" "$(dirname "$0")/make_image_folder.py" "$TMP/images" 10 2 1 32 >/dev/null

run "train resnet18 from ONNX two steps and save" train --model "$MODEL" --data "images:$TMP/images" --batch 8 \
    --max-steps 2 --evaluate off --save "$TMP/resnet18.safetensors" --threads 2
expect_rc 0
expect_in "$OUT" "parameters saved to $TMP/resnet18.safetensors"

finish_case
CASE="the trained weights load into torchvision's resnet18 with strict=True"
CASE_OK=1
"$PY" - "$TMP/resnet18.safetensors" "$MODEL" "$(dirname "$0")" >"$OUT" 2>"$ERR" <<'PY'
import sys
import numpy as np
import onnx
import torch
import torchvision
from onnx import numpy_helper
sys.path.insert(0, sys.argv[3])
import safetensors_state

state, metadata = safetensors_state.load(sys.argv[1])
net = torchvision.models.resnet18(num_classes=10)
net.load_state_dict(state, strict=True)  # raises on a missing or extra key or a wrong shape
steps = int(metadata["steps"])
assert steps == 2, metadata
# one micro-batch of 8 per step (the plan's at batch 8 without a budget): PyTorch would have counted 2 forwards
assert int(net.bn1.num_batches_tracked) == 2, int(net.bn1.num_batches_tracked)
assert net.bn1.num_batches_tracked.dtype == torch.int64
start = {t.name: numpy_helper.to_array(t) for t in onnx.load(sys.argv[2]).graph.initializer}
moved = [k for k, v in start.items() if not np.array_equal(v, state[k].numpy())]
assert "fc.weight" in moved and "conv1.weight" in moved and "bn1.running_mean" in moved, moved
net.eval()
with torch.no_grad():
    out = net(torch.zeros(1, 3, 32, 32))
assert out.shape == (1, 10) and torch.isfinite(out).all()
print(f"{len(state)} tensors loaded with strict=True; {len(moved)} of {len(start)} initializers trained")
PY
RC=$?
expect_rc 0
expect_in "$OUT" "loaded with strict=True"

finish_tests
