#!/usr/bin/env bash
# The zoo's gpt written as a PyTorch module (scripts/gpt_twin.py: nn.Embedding, wpe[:T], nn.LayerNorm, one qkv
# nn.Linear split into heads, q k^T / sqrt(D), masked_fill(~tril, -inf), softmax, nn.GELU, the head tied to wte)
# and exported by torch.onnx.export at opsets 13 (LayerNorm as ReduceMean ... Add) and 17 (LayerNormalization)
# by the CTest fixture onnx_gpt_export. Each export must plan as the zoo's gpt: at batch 16 inside 2 GiB and
# inside 100 MiB, every candidate's micro-batch, micro-batches, resolved checkpoint, bytes per category
# (params, grads, optim, activations, workspace, data), total, activation arena, live and overall peak, FLOPs
# and recompute equal, and the same candidate chosen (only the model's and layers' names differ: the peak's
# layer is "/h3/Reshape_3" here, "h3.attn" there). Equal activations mean the attention was fused into
# snug_self_attention (unfused, its H T^2 scores would be kept). Then opset 13 trains two steps with --save
# and its weights load into the module with load_state_dict(strict=True).
. "$(dirname "$0")/harness.sh"
. "$(dirname "$0")/onnx_twin.sh"

DIR=${SNUG_ONNX_TORCH_DIR:-}
PY=${SNUG_PYTHON3:-/usr/bin/python3}
if [ -z "$DIR" ] || [ ! -f "$DIR/gpt_opset13.onnx" ] || [ ! -f "$DIR/gpt_opset17.onnx" ]; then
    echo "FAIL: no exported gpt in '$DIR': run through ctest, whose fixture onnx_gpt_export makes it" \
         "(it needs python3-torch and python3-onnx: make deps)"
    exit 1
fi

for mem in 2GiB 100MiB; do
    "$SNUG" plan --model gpt --batch 16 --mem $mem --json >"$TMP/zoo_$mem.json" 2>/dev/null
    for opset in 13 17; do
        run "gpt opset $opset plans as the zoo's gpt at batch 16 inside $mem" plan --model "$DIR/gpt_opset$opset.onnx" \
            --batch 16 --mem $mem --json
        expect_rc 0
        cp "$OUT" "$TMP/onnx.json"
        "$PY" - "$TMP/onnx.json" "$TMP/zoo_$mem.json" >"$OUT" 2>"$ERR" <<'PY'
import json, sys
onnx, zoo = (json.load(open(p)) for p in sys.argv[1:3])
NAMES = {"peak_op", "model"}  # layer and model names: the exporter's, not the INI's
def strip(d):
    if isinstance(d, dict):
        return {k: strip(v) for k, v in d.items() if k not in NAMES}
    if isinstance(d, list):
        return [strip(v) for v in d]
    return d
a, b = strip(onnx["candidates"]), strip(zoo["candidates"])
assert len(a) == len(b), (len(a), len(b))
for x, y in zip(a, b):
    assert x == y, {k: (x[k], y.get(k)) for k in x if x[k] != y.get(k)}
assert strip(onnx["chosen"]) == strip(zoo["chosen"])
print(f"{len(a)} candidates equal; chosen micro-batch {onnx['chosen']['micro_batch']}, checkpoint "
      f"{onnx['chosen']['resolved_checkpoint']}, {onnx['chosen']['total']} bytes")
PY
        RC=$?
        expect_rc 0
        expect_in "$OUT" "candidates equal"
    done
done

# Two steps on a text of bytes (the gpt reads 256-byte windows), the weights saved under the module's names and
# loaded back into it.
expect_trains_into_module "$DIR/gpt_opset13.onnx" "gpt_twin.Gpt()"

finish_tests
