#!/usr/bin/env bash
# End-to-end tests of your own data (docs/data.md): an image folder trained with augmentation and reading ahead,
# its log (read back line by line with Python's json module), its curve (parsed as XML with the expected series),
# the weights scored by `snug eval` with the per-class table; a resumed run's log; a CSV table; and the bad
# inputs: a corrupt image, an empty class folder, a bad cell, bad flag values, a missing log.
#
# usage: tests/cli/test_data.sh SNUG_BINARY DATA_DIR
set -u

# shellcheck source=tests/cli/harness.sh
. "$(dirname "$0")/harness.sh"

HERE=$(cd "$(dirname "$0")" && pwd)
IMAGES=$TMP/images
python3 "$HERE/make_image_folder.py" "$IMAGES" 10 8 3 28 || exit 2

run "an image folder: augmented, read ahead, logged, saved" train --model cnn --data "images:$IMAGES" --batch 8 \
    --epochs 3 --augment flip,crop:2,brightness:0.1 --lr 0.02 --log "$TMP/run.jsonl" --eval-every 4 \
    --save "$TMP/w.safetensors" --progress off
expect_rc 0
expect_in "$OUT" "10 classes; evaluation: val/"
expect_in "$OUT" "computed over the training images"
expect_in "$OUT" "augment flip,crop:2,brightness:0.1; 2 micro-batches read ahead by 1 thread"
expect_in "$OUT" "data: the steps waited"
expect_in "$OUT" "log: $TMP/run.jsonl"
python3 - "$TMP/run.jsonl" <<'PY' || fail "the log does not read back with json, line by line"
import json, sys
lines = [json.loads(l) for l in open(sys.argv[1])]
steps = [l["step"] for l in lines if l["type"] == "step"]
evals = [l for l in lines if l["type"] == "eval"]
assert steps == list(range(1, 31)), steps
assert all(e["set"] == "validation" and 0 <= e["accuracy"] <= 1 for e in evals) and len(evals) >= 6, evals
assert all(k in lines[0] for k in ("epoch", "loss", "lr", "grad_norm", "samples_per_s", "memory_bytes"))
PY

run "its curve" curve "$TMP/run.jsonl" -o "$TMP/run.svg"
expect_rc 0
python3 - "$TMP/run.svg" <<'PY' || fail "the curve is not XML with the expected series"
import sys, xml.etree.ElementTree as ET
ids = {e.get("id") for e in ET.parse(sys.argv[1]).iter() if e.get("id")}
assert {"train-loss", "train-loss-smoothed", "eval-loss", "eval-accuracy"} <= ids, ids
PY

run "snug eval: the weights' normalisation, a table per class" eval --model cnn --data "images:$IMAGES" \
    --weights "$TMP/w.safetensors"
expect_rc 0
expect_in "$OUT" "validation accuracy"
expect_in "$OUT" "as in training (the weights' metadata)"
expect_in "$OUT" "class-9"
expect_in "$OUT" "confusion matrix"

python3 "$HERE/make_image_folder.py" "$TMP/large" 10 1 1 40 || exit 2
cp -r "$IMAGES" "$TMP/mixed"
cp "$TMP/large/train/class-3/000.png" "$TMP/mixed/train/class-3/zz-large.png"
run "images of mixed sizes are resized" train --model cnn --data "images:$TMP/mixed" --batch 8 --max-steps 2 \
    --progress off --evaluate off
expect_rc 0

python3 "$HERE/make_image_folder.py" "$TMP/three" 3 8 3 28 || exit 2
run "3 classes on a 10-class zoo model: refused with the way out" train --model cnn --data "images:$TMP/three" \
    --batch 8 --max-steps 1 --progress off
expect_rc 1
expect_in "$ERR" "the data has 3 classes but model 'cnn' predicts 10 (give --classes 3"
run "--classes 3: the zoo model predicts the data's classes" train --model cnn --classes 3 \
    --data "images:$TMP/three" --batch 8 --max-steps 2 --progress off --save "$TMP/three.safetensors"
expect_rc 0
run "--classes on snug eval" eval --model cnn --classes 3 --data "images:$TMP/three" --weights "$TMP/three.safetensors"
expect_rc 0
expect_in "$OUT" "validation accuracy"
run "--classes on snug plan: 7 fewer outputs of fc2, 7 x (128 + 1) fewer parameters" plan --model cnn --classes 3 \
    --json
expect_rc 0
cp "$OUT" "$TMP/three.json"
run "snug plan without --classes: the file's 10" plan --model cnn --json
expect_rc 0
python3 - "$TMP/three.json" "$OUT" <<'PY' || fail "snug plan --classes 3 does not plan 7 x 129 fewer parameters"
import json, sys
three, ten = (json.load(open(p))["chosen"]["bytes"]["params"] for p in sys.argv[1:])
# fc2's weight exactly; its bias of 10 or 3 floats within the blocks' alignment
assert 7 * 128 * 4 <= ten - three <= 7 * 129 * 4, (ten, three)
PY

run "a run stopped and resumed keeps one log line per step" train --model cnn --data "images:$IMAGES" --batch 8 \
    --epochs 2 --max-steps 5 --augment flip --log "$TMP/resumed.jsonl" --state "$TMP/state" --state-every 2 \
    --progress off --evaluate off
expect_rc 0
run "... continued" train --resume "$TMP/state" --max-steps 12 --progress off
expect_rc 0
python3 -c "
import json, sys
steps = [json.loads(l)['step'] for l in open(sys.argv[1]) if '\"step\"' in l]
assert steps == list(range(1, 13)), steps" "$TMP/resumed.jsonl" || fail "the resumed log is not steps 1..12"

printf 'a,b,label\n0,1,x\n1,0,y\n0.5,0.5,x\n1,1,y\n' > "$TMP/t.csv"
printf '[model]\nname = tab\ninput = image 2 1 1\n[flat]\ntype = flatten\n[fc]\ntype = linear\nout = 2\n[loss]\ntype = softmax_cross_entropy\n' > "$TMP/tab.ini"
run "a CSV table trains" train --model "$TMP/tab.ini" --data "csv:$TMP/t.csv" --batch 2 --epochs 2 --progress off
expect_rc 0
expect_in "$OUT" "rows of 2 features"

printf 'a,b,label\n0,1,x\n1,,y\n' > "$TMP/bad.csv"
run "a CSV table with an empty cell" train --model "$TMP/tab.ini" --data "csv:$TMP/bad.csv" --progress off
expect_rc 1
expect_in "$ERR" "bad.csv:3: column 2 'b'"

cp -r "$IMAGES" "$TMP/corrupt"
printf 'not a png' > "$TMP/corrupt/train/class-1/005.png"
run "a corrupt image" train --model cnn --data "images:$TMP/corrupt" --progress off
expect_rc 1
expect_in "$ERR" "corrupt/train/class-1/005.png"

# One valid image whose pixels alone are more than the budget: its header says so, and the folder is refused
# before any file is decoded; the process's peak (the kernel's, for the child) stays under those pixels.
cp -r "$IMAGES" "$TMP/huge"
python3 - "$TMP/huge/train/class-1/huge.png" <<'PYEOF' || exit 2
import struct, sys, zlib
side = 8000  # gray: 61 MiB of pixels; PNG's bound on one image is 256 MiB
chunk = lambda kind, data: struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))
idat = zlib.compress(bytes(side * (side + 1)), 9)
open(sys.argv[1], "wb").write(b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", side, side, 8, 0, 0, 0, 0))
                               + chunk(b"IDAT", idat) + chunk(b"IEND", b""))
PYEOF
run "an image over the budget is refused from its header, before decoding" train --model cnn \
    --data "images:$TMP/huge" --mem 20MiB --progress off
expect_rc 1
expect_in "$ERR" "huge/train/class-1/huge.png is 8000 x 8000 pixels"
expect_in "$ERR" "more than the memory budget (20.00 MiB): refused before decoding any image"
# (under AddressSanitizer the shadow memory is resident too: the message alone is checked there)
grep -q __asan_init "$SNUG" 2>/dev/null || python3 - "$SNUG" "$TMP/huge" <<'PYEOF' || fail "the refusal decoded the image: the peak passed its pixels"
import os, resource, subprocess, sys
subprocess.run([sys.argv[1], "train", "--model", "cnn", "--data", "images:" + sys.argv[2], "--mem", "20MiB",
                "--progress", "off"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024
assert peak < 8000 * 8000, peak
PYEOF

cp -r "$IMAGES" "$TMP/empty"
rm "$TMP/empty/train/class-0/"*.png
run "a class folder without images" train --model cnn --data "images:$TMP/empty" --progress off
expect_rc 1
expect_in "$ERR" "class-0"

head -c 6000 /dev/urandom | base64 > "$TMP/text.txt"
run "augmentation of token windows is refused" train --model gpt --data text:"$TMP/text.txt" --augment flip \
    --max-steps 1 --progress off
expect_rc 1
expect_in "$ERR" "augmentation (flip) changes images"

run "snug plan counts the ring of micro-batches read ahead as data" plan --model cnn --batch 64 --micro-batch 16 \
    --prefetch 2
expect_rc 0
expect_in "$OUT" "data 147.19 KiB" # 49.06 KiB + 2 x (16 x 784 floats + 16 labels, each block 64-byte aligned)

usage_error "an unknown augmentation" "augmentation 'blur' is not one snug knows" train --augment blur
usage_error "a normalisation without std" "give MEAN/STD" train --normalise 0.5
usage_error "a log of another format" "--log must name a .jsonl or a .csv file" train --log run.txt
usage_error "too many micro-batches read ahead" "--prefetch must be" train --prefetch 65
usage_error "a curve without -o" "-o FILE.svg is required" curve "$TMP/run.jsonl"

run "a curve of a missing log" curve "$TMP/nothing.jsonl" -o "$TMP/x.svg"
expect_rc 1
expect_in "$ERR" "nothing.jsonl"

finish_tests
