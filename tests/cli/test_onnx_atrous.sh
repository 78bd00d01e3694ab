#!/usr/bin/env bash
# Dilated and rectangular convolutions as a PyTorch module (scripts/atrous_reference.py: DeepLab-style atrous
# 3x3s, a strided dilated one, groups, an even kernel, a 1x3 and a 3x1 with a stride and padding per axis),
# exported by the CTest fixture onnx_atrous_export: planned with them as conv2d layers, trained two steps on
# images with --save, and the saved weights loaded into the module with load_state_dict(strict=True). The
# gradients are test_onnx_atrous's.
. "$(dirname "$0")/harness.sh"
. "$(dirname "$0")/onnx_twin.sh"

MODEL=${SNUG_ONNX_TORCH_DIR:-}/atrous.onnx
require_export "$MODEL" onnx_atrous_export

run "plan the exported model: the dilated convolutions as conv2d layers" plan --model "$MODEL" --batch 8 --layers
expect_rc 0
expect_in "$OUT" "atrous2"
expect_in "$OUT" "down"
expect_in "$OUT" "column"

expect_trains_into_module "$MODEL" "atrous_reference.net()" 16

finish_tests
