#!/usr/bin/env bash
# The model zoo's data sets, metrics and weights end to end: every --data value (with small model files written
# here, so the runs take seconds), the metrics of each kind of model, --save as safetensors (the layout read
# back by a tiny Python reader when python3 is there), snug eval on saved weights, --init, the BatchNorm warning
# under accumulation, and the errors: bad --data values (exit 2), data that does not fit the model, weights of
# another model or cut short (exit 1). Cases that need MNIST, the Brown corpus or resnet20 skip cleanly without.
#
# usage: tests/cli/test_zoo.sh SNUG_BINARY DATA_DIR
set -u

# shellcheck source=tests/cli/harness.sh
. "$(dirname "$0")/harness.sh"

# ---------------------------------------------------------------------------------------------------------
# Small models: a byte-level language model (context 16), a segmentation net without and with BatchNorm.
cat >"$TMP/tinygpt.ini" <<'EOF'
[model]
name = tinygpt
input = tokens 16

[wte]
type = embedding
vocab = 256
dim = 16

[wpe]
type = position_embedding
max_len = 16

[ln1]
type = layernorm
eps = 1e-5

[qkv]
type = linear
out = 48

[attn]
type = self_attention
heads = 2
causal = true

[proj]
type = linear
out = 16

[add1]
type = add
inputs = wpe, proj

[ln_f]
type = layernorm
eps = 1e-5

[head]
type = linear_tied
embedding = wte

[loss]
type = softmax_cross_entropy
EOF

seg_model() { # NAME NORM_SECTION: a 1x16x16 -> 2-class per-pixel net, with an optional normalisation layer
    cat <<EOF
[model]
name = $1
input = image 1 16 16

[conv1]
type = conv2d
out_channels = 8
kernel = 3
stride = 1
padding = 1
$2
[relu1]
type = relu

[out]
type = conv2d
out_channels = 2
kernel = 1
stride = 1
padding = 0

[loss]
type = softmax_cross_entropy
EOF
}
seg_model tinyseg "" >"$TMP/tinyseg.ini"
seg_model tinybn $'\n[bn1]\ntype = batchnorm2d\neps = 1e-5\nmomentum = 0.1\n' >"$TMP/tinybn.ini"

# A text of 40 KB: 36 KB to train on, 4 KB held out.
for i in $(seq 1 400); do
    echo "line $i: the quick brown fox jumps over the lazy dog, then naps under the old oak tree."
done >"$TMP/corpus.txt"

FAST=(--progress off --threads 1)

# ---------------------------------------------------------------------------------------------------------
# help and usage errors: exit 2
run "eval --help lists its flags" eval --help
expect_rc 0
for phrase in "usage: snug eval" --model --weights --data --data-dir --batch --mem --threads; do
    expect_in "$OUT" "$phrase"
done
expect_empty "$ERR"

run "help lists eval" --help
expect_in "$OUT" "eval"

run "train --help lists the data sets and the new flags" train --help
for phrase in mnist32 brown text:FILE shapes segmentation:DIR --train-samples --init safetensors; do
    expect_in "$OUT" "$phrase"
done

usage_error "--data unknown" "--data: unknown data set 'cifar' (choose from mnist, mnist32, brown" \
    train --data cifar
usage_error "--eval-every negative" "--eval-every must be a whole number >= 0, got '-1'" train --eval-every -1
usage_error "--eval-samples not a number" "--eval-samples must be a whole number" train --eval-samples many
usage_error "--data text: without a file" "--data: data set text: needs a path after the colon (text:FILE)" train --data text:
usage_error "--data segmentation: without a folder" "needs a path after the colon (segmentation:DIR)" \
    train --data segmentation:
usage_error "--data empty" "--data needs a non-empty value" train --data=
usage_error "--train-samples 0" "--train-samples must be a whole number >= 1" train --train-samples 0
usage_error "--init empty" "--init needs a non-empty value" train --init=
usage_error "eval without --weights" "--weights FILE is required" eval --model cnn
usage_error "eval, --data unknown" "unknown data set 'imagenet'" eval --weights x --data imagenet
usage_error "eval, unknown flag" "unknown flag '--epochs'" eval --weights x --epochs 2
usage_error "eval, error points at its help" "(see 'snug eval --help')" eval --batch 0 --weights x

# ---------------------------------------------------------------------------------------------------------
# data that does not fit the model, missing files: exit 1 before any output
run "text data for an image model" train --model "$TMP/tinyseg.ini" --data "text:$TMP/corpus.txt" "${FAST[@]}"
expect_rc 1
expect_in "$ERR" "byte-level text for a language model"
expect_in "$ERR" "(1, 16, 16)"
expect_empty "$OUT"

run "shapes for a token model" train --model "$TMP/tinygpt.ini" --data shapes "${FAST[@]}"
expect_rc 1
expect_in "$ERR" "data set shapes draws 1-channel images"
expect_empty "$OUT"

run "shapes for a 10-class model: the trainer's check, before any output" train --model cnn --data shapes \
    --train-samples 4 "${FAST[@]}"
expect_rc 1
expect_in "$ERR" "the data has 784 targets per sample but model 'cnn' scores 1"
expect_in "$ERR" "--data shapes does not fit this model"
expect_empty "$OUT"

run "text file missing" train --model "$TMP/tinygpt.ini" --data "text:$TMP/no-such.txt" "${FAST[@]}"
expect_rc 1
expect_in "$ERR" "$TMP/no-such.txt"
expect_empty "$OUT"

mkdir -p "$TMP/empty"
run "brown missing: says how to get it" train --model "$TMP/tinygpt.ini" --data brown --data-dir "$TMP/empty" \
    "${FAST[@]}"
expect_rc 1
expect_in "$ERR" "$TMP/empty/brown.txt"
expect_in "$ERR" "make data"
expect_empty "$OUT"

run "segmentation folder missing" train --model "$TMP/tinyseg.ini" --data "segmentation:$TMP/no-such" "${FAST[@]}"
expect_rc 1
expect_in "$ERR" "$TMP/no-such"
expect_empty "$OUT"

# ---------------------------------------------------------------------------------------------------------
# A language model on text:FILE: loss in nats and bits per byte on the held-out 10%; saved weights score the
# same under snug eval; --init starts from them.
run "text:FILE, tiny GPT: held-out nats and bits per byte, --save" train --model "$TMP/tinygpt.ini" \
    --data "text:$TMP/corpus.txt" --batch 16 --micro-batch 4 --max-steps 30 --optim adamw --lr 3e-3 \
    --eval-every 10 --eval-samples 50 --save "$TMP/gpt.safetensors" "${FAST[@]}"
expect_rc 0
# --eval-every: a held-out score at steps 10 and 20 on 50 evenly spaced windows (all full: 800 bytes); the last
# step is scored once, on the whole part, below
expect_in "$OUT" "step 10: held-out loss "
expect_in "$OUT" "step 20: held-out loss "
expect_not_in "$OUT" "step 30: held-out"
[ "$(grep -c '^step [12]0: held-out loss .* on 800 bytes$' "$OUT")" = 2 ] || fail "periodic scores not on 800 bytes"

expect_in "$OUT" "model tinygpt: 5,504 parameters"
# 35,492 bytes: windows of 16 over the first 31,942 and the last 3,550 (the last window of each part short)
expect_in "$OUT" "data text: 1,997 training and 222 held-out windows of 16 bytes from $TMP/corpus.txt"
expect_in "$OUT" "batch 16 = 4 micro-batches of 4"
expect_not_in "$OUT" "WARNING: model"
expect_in "$OUT" "trained 30 steps (480 samples)"
expect_in "$OUT" "parameters saved to $TMP/gpt.safetensors (safetensors, "
TRAIN_LINE=$(grep '^held-out loss ' "$OUT")
[ -n "$TRAIN_LINE" ] || fail "no 'held-out loss' line"
# bits = nats / ln 2, and 30 steps learn something (a uniform guess is ln 256 = 5.545 nats)
echo "$TRAIN_LINE" | awk '/nats\/byte .*bits\/byte\), next-byte accuracy [0-9.]+% on 3,549 bytes$/ {
    nats = $3; bits = substr($5, 2); if (bits - nats / log(2) > 1e-3 || nats / log(2) - bits > 1e-3 || nats >= 5.0)
    exit 1; ok = 1 } END { exit !ok }' || fail "bad held-out line: $TRAIN_LINE"
expect_empty "$ERR"

run "eval: the saved weights score what training reported" eval --model "$TMP/tinygpt.ini" \
    --data "text:$TMP/corpus.txt" --weights "$TMP/gpt.safetensors" --batch 32 --threads 1
expect_rc 0
expect_in "$OUT" "model tinygpt:"
expect_in "$OUT" "weights from $TMP/gpt.safetensors"
expect_in "$OUT" "data text: 222 held-out windows of 16 bytes"
EVAL_LINE=$(grep '^held-out loss ' "$OUT")
awk -v a="$(echo "$TRAIN_LINE" | cut -d' ' -f3)" -v b="$(echo "$EVAL_LINE" | cut -d' ' -f3)" \
    'BEGIN { d = a - b; exit !(a != "" && b != "" && d < 2e-4 && d > -2e-4) }' ||
    fail "eval '$EVAL_LINE' differs from training's '$TRAIN_LINE'"
expect_empty "$ERR"

run "eval with --mem: a batch that fits, no optimizer state" eval --model "$TMP/tinygpt.ini" \
    --data "text:$TMP/corpus.txt" --weights "$TMP/gpt.safetensors" --batch 64 --mem 4MiB --threads 1
expect_rc 0
expect_in "$OUT" "held-out loss"
expect_in "$OUT" "(budget 4.00 MiB)"

# --init: the same weights again; a run of one AdamW step at lr 1e-30 then scores what they scored.
run "--init loads the weights" train --model "$TMP/tinygpt.ini" --data "text:$TMP/corpus.txt" --batch 16 \
    --max-steps 1 --optim adamw --lr 1e-30 --init "$TMP/gpt.safetensors" "${FAST[@]}"
expect_rc 0
expect_in "$OUT" "initial weights from $TMP/gpt.safetensors"
INIT_LINE=$(grep '^held-out loss ' "$OUT")
[ "$(echo "$INIT_LINE" | cut -d' ' -f3)" = "$(echo "$TRAIN_LINE" | cut -d' ' -f3)" ] ||
    fail "--init run scored '$INIT_LINE', the saved weights '$TRAIN_LINE'"

run "--init with another model's weights" train --model "$TMP/tinyseg.ini" --data shapes \
    --init "$TMP/gpt.safetensors" "${FAST[@]}"
expect_rc 1
expect_in "$ERR" "does not hold the weights of model 'tinyseg'"
expect_in "$ERR" "missing ('conv1.weight', 'conv1.bias', 'out.weight', 'out.bias')"
expect_in "$ERR" "not in the model ('wte.weight'"
expect_empty "$OUT"

head -c 1000 "$TMP/gpt.safetensors" >"$TMP/cut.safetensors"
run "eval of a file cut short" eval --model "$TMP/tinygpt.ini" --data "text:$TMP/corpus.txt" \
    --weights "$TMP/cut.safetensors"
expect_rc 1
expect_in "$ERR" "$TMP/cut.safetensors"
expect_in "$ERR" "truncated"
expect_empty "$OUT"

run "eval of a missing file" eval --model "$TMP/tinygpt.ini" --data "text:$TMP/corpus.txt" \
    --weights "$TMP/none.safetensors"
expect_rc 1
expect_in "$ERR" "cannot open the weights file '$TMP/none.safetensors'"

# The layout, read by a reader written from the format's description: 8-byte little-endian length, JSON,
# 8-byte alignment, F32 tensors tiling the data in order, the tied head stored once.
if command -v python3 >/dev/null 2>&1; then
    run_python "safetensors layout (python reader)" "$TMP/gpt.safetensors" <<'EOF'
import json, struct, sys
from array import array
data = open(sys.argv[1], "rb").read()
(n,) = struct.unpack("<Q", data[:8])
assert (8 + n) % 8 == 0, "data not 8-byte aligned"
text = data[8:8 + n].decode("utf-8")
assert text.rstrip(" ") == text.rstrip(), "padding is not spaces"
header = json.loads(text)
meta = header.pop("__metadata__")
assert meta["format"] == "pt" and meta["model"] == "tinygpt", meta
assert all(isinstance(v, str) for v in meta.values())
names = list(header)
assert names[0] == "wte.weight" and "head.weight" not in header, names
at = 0
for name in names:
    t = header[name]
    assert t["dtype"] == "F32", name
    count = 1
    for d in t["shape"]:
        count *= d
    begin, end = t["data_offsets"]
    assert begin == at and end - begin == 4 * count, name
    values = array("f", data[8 + n + begin:8 + n + end])
    assert all(v == v for v in values), name + " has NaN"
    at = end
assert 8 + n + at == len(data), "trailing bytes"
assert header["wte.weight"]["shape"] == [256, 16] and header["wpe.weight"]["shape"] == [16, 16]
print("layout ok:", len(names), "tensors")
EOF
    expect_rc 0
    expect_in "$OUT" "layout ok: 10 tensors"
else
    echo "skip: no python3: the safetensors layout check is skipped"
fi

# ---------------------------------------------------------------------------------------------------------
# Segmentation on synthetic shapes at the model's 16x16: pixel accuracy, mean IoU, foreground IoU.
run "shapes, tiny segmentation net: pixel metrics" train --model "$TMP/tinyseg.ini" --data shapes \
    --train-samples 256 --batch 8 --micro-batch 8 --epochs 2 --optim adamw --lr 3e-2 \
    --save "$TMP/seg.safetensors" "${FAST[@]}"
expect_rc 0
expect_in "$OUT" "data shapes: 256 training and 500 evaluation images of 16x16 from synthetic shapes"
expect_in "$OUT" "64 steps in all"
expect_in "$OUT" "trained 64 steps (512 samples)"
SEG_LINE=$(grep '^evaluation pixel accuracy ' "$OUT")
echo "$SEG_LINE" | grep -qE '^evaluation pixel accuracy [0-9.]+%, mean IoU 0\.[0-9]{4}, foreground IoU 0\.[0-9]{4} \(loss [0-9.]+\) on 128,000 pixels$' ||
    fail "bad pixel line: '$SEG_LINE'"
# two epochs find some of the foreground; the background's IoU is higher, so the mean is above the foreground's
echo "$SEG_LINE" | awk '{ mean = $7 + 0; fg = $10 + 0; exit !(fg > 0.05 && mean > fg && mean < 1) }' ||
    fail "implausible IoUs: '$SEG_LINE'"
expect_empty "$ERR"

run "eval: segmentation weights" eval --model "$TMP/tinyseg.ini" --data shapes --weights "$TMP/seg.safetensors" \
    --threads 1
expect_rc 0
expect_in "$OUT" "data shapes: 500 evaluation images of 16x16"
[ "$(grep '^evaluation pixel accuracy ' "$OUT" | sed 's/ (loss.*//')" = "$(echo "$SEG_LINE" | sed 's/ (loss.*//')" ] ||
    fail "eval's pixel line differs from training's '$SEG_LINE'"

# A --batch past the data set: the plan is for the samples there are (not gigabytes for a million), and the header
# says so.
run "eval: a --batch past the evaluation set plans for the set" eval --model "$TMP/tinyseg.ini" --data shapes \
    --weights "$TMP/seg.safetensors" --batch 1000000 --threads 1
expect_rc 0
expect_in "$OUT" "batch 500 per forward pass (--batch 1000000 is more than the 500 evaluation images of 16x16)"
[ "$(grep '^evaluation pixel accuracy ' "$OUT" | sed 's/ (loss.*//')" = "$(echo "$SEG_LINE" | sed 's/ (loss.*//')" ] ||
    fail "eval's pixel line differs from training's '$SEG_LINE'"
expect_empty "$ERR"

run "eval: a --batch past the evaluation set under --mem" eval --model "$TMP/tinyseg.ini" --data shapes \
    --weights "$TMP/seg.safetensors" --batch 1000000 --mem 4MiB --threads 1
expect_rc 0
expect_in "$OUT" "(--batch 1000000 is more than the 500 evaluation images of 16x16)"
expect_in "$OUT" "(budget 4.00 MiB)"
expect_empty "$ERR"

run "train: a --batch past the training set plans for the set" train --model "$TMP/tinyseg.ini" --data shapes \
    --train-samples 16 --batch 100000 --micro-batch 100000 --mem 8MiB --max-steps 1 "${FAST[@]}"
expect_rc 0
expect_in "$OUT" "--batch 100000 is more than the 16 training images of 16x16: each step takes them all"
expect_in "$OUT" "batch 16 in one forward/backward pass per optimizer step"
expect_in "$OUT" "trained 1 steps (16 samples)"
expect_empty "$ERR"

# BatchNorm: a warning before training when one step accumulates several micro-batches, none otherwise.
run "BatchNorm under accumulation: a warning" train --model "$TMP/tinybn.ini" --data shapes --train-samples 16 \
    --batch 8 --micro-batch 2 --max-steps 2 --save "$TMP/bn.safetensors" "${FAST[@]}"
expect_rc 0
expect_in "$OUT" "WARNING: model tinybn has 1 BatchNorm layer, and this run computes each step's gradient from 4 micro-batches of 2"
expect_in "$OUT" "not exactly training with batch 8"
expect_in "$OUT" "GroupNorm"
[ "$(grep -c 'WARNING: model' "$OUT")" -eq 1 ] || fail "the warning is not printed exactly once"
[ "$(grep -n 'WARNING: model' "$OUT" | cut -d: -f1)" -lt "$(grep -n '^epoch 1/1' "$OUT" | head -1 | cut -d: -f1)" ] ||
    fail "the warning comes after training started"

run "BatchNorm in one pass per step: no warning" train --model "$TMP/tinybn.ini" --data shapes --train-samples 16 \
    --batch 8 --max-steps 1 "${FAST[@]}"
expect_rc 0
expect_not_in "$OUT" "WARNING: model"

if command -v python3 >/dev/null 2>&1; then
    run_python "BatchNorm running statistics are saved as buffers" "$TMP/bn.safetensors" <<'EOF'
import json, struct, sys
data = open(sys.argv[1], "rb").read()
(n,) = struct.unpack("<Q", data[:8])
h = json.loads(data[8:8 + n])
for name in ("bn1.weight", "bn1.bias", "bn1.running_mean", "bn1.running_var"):
    assert h[name]["shape"] == [8], name
mean = struct.unpack("<8f", data[8 + n + h["bn1.running_mean"]["data_offsets"][0]:][:32])
assert any(v != 0.0 for v in mean), "running mean never updated"
print("buffers ok")
EOF
    expect_rc 0
    expect_in "$OUT" "buffers ok"
fi

# ---------------------------------------------------------------------------------------------------------
# segmentation:DIR from PNGs (written with Python's zlib: 8-bit grayscale images, 0/1 masks)
if command -v python3 >/dev/null 2>&1; then
    python3 - "$TMP/seg" <<'EOF'
import os, struct, sys, zlib
def png(path, rows):
    raw = b"".join(b"\0" + bytes(r) for r in rows)
    chunk = lambda t, d: struct.pack(">I", len(d)) + t + d + struct.pack(">I", zlib.crc32(t + d) & 0xffffffff)
    ihdr = struct.pack(">IIBBBBB", len(rows[0]), len(rows), 8, 0, 0, 0, 0)
    open(path, "wb").write(b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + chunk(b"IDAT", zlib.compress(raw)) +
                           chunk(b"IEND", b""))
for part, count in (("", 6), ("val", 2)):
    for sub in ("images", "masks"):
        os.makedirs(os.path.join(sys.argv[1], part, sub), exist_ok=True)
    for i in range(count):
        mask = [[1 if (x - 4 - i) ** 2 + (y - 8) ** 2 < 16 else 0 for x in range(16)] for y in range(16)]
        png(os.path.join(sys.argv[1], part, "images", "s%d.png" % i), [[40 + 150 * m for m in r] for r in mask])
        png(os.path.join(sys.argv[1], part, "masks", "s%d.png" % i), mask)
EOF
    run "segmentation:DIR with val/" train --model "$TMP/tinyseg.ini" --data "segmentation:$TMP/seg" --batch 3 \
        --max-steps 4 --optim adamw --lr 1e-2 --save "$TMP/png.safetensors" "${FAST[@]}"
    expect_rc 0
    expect_in "$OUT" "data segmentation: 6 training and 2 validation images from $TMP/seg (evaluation: val/)"
    expect_in "$OUT" "validation pixel accuracy"
    expect_in "$OUT" "on 512 pixels"
    expect_empty "$ERR"

    run "eval: segmentation:DIR scores val/" eval --model "$TMP/tinyseg.ini" --data "segmentation:$TMP/seg" \
        --weights "$TMP/png.safetensors"
    expect_rc 0
    expect_in "$OUT" "validation pixel accuracy"
    expect_in "$OUT" "on 512 pixels"

    mv "$TMP/seg/val" "$TMP/seg-val"
    run "segmentation:DIR without val/: trained, not evaluated" train --model "$TMP/tinyseg.ini" \
        --data "segmentation:$TMP/seg" --batch 3 --max-steps 1 "${FAST[@]}"
    expect_rc 0
    expect_in "$OUT" "data segmentation: 6 training images from $TMP/seg (no val/ folder: not evaluated)"
    expect_in "$OUT" "not evaluated: --data segmentation:$TMP/seg has no evaluation part"
    expect_not_in "$OUT" "pixel accuracy"

    run "eval: segmentation:DIR without val/ scores DIR itself" eval --model "$TMP/tinyseg.ini" \
        --data "segmentation:$TMP/seg" --weights "$TMP/png.safetensors"
    expect_rc 0
    expect_in "$OUT" "training-set pixel accuracy"
    expect_in "$OUT" "on 1,536 pixels"
else
    echo "skip: no python3 to write PNG files: the segmentation:DIR cases are skipped"
fi

# ---------------------------------------------------------------------------------------------------------
# The Brown corpus (make data), when it is next to MNIST
BROWN=$DATA/../brown
if [ -s "$BROWN/brown.txt" ]; then
    run "brown: byte-level windows at the model's context" train --model "$TMP/tinygpt.ini" --data brown \
        --data-dir "$BROWN" --batch 8 --max-steps 2 --evaluate off "${FAST[@]}"
    expect_rc 0
    expect_in "$OUT" "data brown: "
    expect_in "$OUT" "held-out windows of 16 bytes from $BROWN/brown.txt"
    expect_in "$OUT" "step 2/2"
else
    echo "skip: no Brown corpus in '$BROWN' (make data): the brown case is skipped"
fi

# ---------------------------------------------------------------------------------------------------------
# MNIST padded to 32x32, and the BatchNorm warning for resnet20 (when the built-in model exists)
if have_mnist; then
    if "$SNUG" plan --model resnet20 --batch 4 >/dev/null 2>&1; then
        run "resnet20 on mnist32, 2 micro-batches: the BatchNorm warning" train --model resnet20 --data mnist32 \
            --data-dir "$DATA" --batch 4 --micro-batch 2 --max-steps 1 --evaluate off "${FAST[@]}"
        expect_rc 0
        expect_in "$OUT" "data mnist32: 60,000 training and 10,000 test images from $DATA"
        expect_in "$OUT" "WARNING: model resnet20 has"
        expect_in "$OUT" "--model resnet20-gn"
        expect_empty "$ERR"

        run "resnet20 on 28x28 mnist: the hint names mnist32" train --model resnet20 --data mnist \
            --data-dir "$DATA" "${FAST[@]}"
        expect_rc 1
        expect_in "$ERR" "(1, 32, 32)"
        expect_in "$ERR" "use --data mnist32"
        expect_empty "$OUT"
    else
        echo "skip: no built-in resnet20: its cases are skipped"
    fi

    run "mnist: the classification line and eval of saved weights" train --model cnn --data-dir "$DATA" \
        --batch 64 --max-steps 5 --save "$TMP/cnn.safetensors" "${FAST[@]}"
    expect_rc 0
    CNN_LINE=$(grep '^test accuracy ' "$OUT")
    run "eval: cnn on the test set" eval --model cnn --data-dir "$DATA" --weights "$TMP/cnn.safetensors" --batch 500
    expect_rc 0
    expect_in "$OUT" "data mnist: 10,000 test images from $DATA"
    [ "$(grep '^test accuracy ' "$OUT" | sed 's/ (loss.*//')" = "$(echo "$CNN_LINE" | sed 's/ (loss.*//')" ] ||
        fail "eval's accuracy differs from training's '$CNN_LINE'"
else
    echo "skip: no real MNIST in '$DATA' (make data): the mnist and mnist32 cases are skipped"
fi

finish_tests
