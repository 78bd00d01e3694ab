#!/usr/bin/env bash
# Attention two ways as a PyTorch module (scripts/attention_twin.py: an encoder block without a mask, fused into a
# non-causal self_attention, and a block written by hand with Split, Slice, Transpose, batched MatMul and a Softmax
# over the queries), exported by the CTest fixture onnx_attention_export: planned, trained two steps with --save,
# and the saved weights loaded into the module with load_state_dict(strict=True) (no extra key, none missing,
# every shape right). The gradients themselves are test_onnx_attention's (against PyTorch's float64 reference).
. "$(dirname "$0")/harness.sh"
. "$(dirname "$0")/onnx_twin.sh"

MODEL=${SNUG_ONNX_TORCH_DIR:-}/attention.onnx
require_export "$MODEL" onnx_attention_export

run "plan the attention model at batch 8" plan --model "$MODEL" --batch 8
expect_rc 0
expect_in "$OUT" "chosen plan (*): micro-batch"

# Two steps on a text of bytes (the model reads windows of 16 bytes), the weights saved under the module's names
# and loaded back into it.
expect_trains_into_module "$MODEL" "attention_twin.Net()"

finish_tests
