#!/usr/bin/env bash
# What snug says (docs/cli.md): budget advice that works when followed (rounded up, in every unit); numbers and
# words of flag errors and reports; text from files printed escaped, never as terminal escape codes.
#
# usage: tests/cli/test_messages.sh SNUG_BINARY DATA_DIR
set -u

# shellcheck source=tests/cli/harness.sh
. "$(dirname "$0")/harness.sh"

printf '[model]\nname = tab\ninput = image 2 1 1\n[flat]\ntype = flatten\n[fc]\ntype = linear\nout = 2\n[loss]\ntype = softmax_cross_entropy\n' > "$TMP/tab.ini"

# The advised budget, read from stderr: "Raise --mem to at least 9.30 MiB" -> "9.30MiB".
advised() { sed -n 's/.*Raise --mem to at least \([0-9.]*\) \([KMG]iB\).*/\1\2/p' "$ERR" | head -n 1; }

for model in mlp cnn resnet20 gpt "$TMP/tab.ini"; do
    run "plan --model ${model##*/} in too small a budget advises one" plan --model "$model" --mem 1KiB
    expect_rc 1
    least=$(advised)
    [ -n "$least" ] || fail "no 'Raise --mem to at least' in the message"
    run "... and the budget advised (${least:-none}) fits" plan --model "$model" --mem "${least:-1KiB}"
    expect_rc 0
done

printf 'a,b,label\n0,1,x\n1,0,y\n0.5,0.5,x\n1,1,y\n' > "$TMP/t.csv"
TABLE=(train --model "$TMP/tab.ini" --data "csv:$TMP/t.csv" --batch 2 --progress off)
run "train in too small a budget advises one" "${TABLE[@]}" --mem 1KiB
expect_rc 1
least=$(advised)
run "... and the budget advised (${least:-none}) trains" "${TABLE[@]}" --mem "${least:-1KiB}"
expect_rc 0

usage_error "--lr takes no hexadecimal float" "--lr must be" train --lr 0x1p-4
usage_error "--momentum takes no hexadecimal float" "--momentum must be" train --momentum 0x1p-1
usage_error "--eps too small for a float32 is out of range" "--eps: '1e-50' is out of range" train --eps 1e-50
usage_error "--clip too large for a float32 is out of range" "--clip: '1e39' is out of range" train --clip 1e39

printf 'a,b,label\n0,1,x\n1,0,x\n' > "$TMP/one.csv"
run "one class is 'class', not 'classes'" train --model "$TMP/tab.ini" --data "csv:$TMP/one.csv" --progress off
expect_rc 1
expect_in "$ERR" "the data has 1 class but model 'tab' predicts 2"

run "--progress off prints the step lines (no live line)" "${TABLE[@]}" --epochs 2 --log-every 2 \
    --save "$TMP/w.safetensors"
expect_rc 0
expect_in "$OUT" "step 2/4"
expect_in "$OUT" "step 4/4"
expect_not_in "$OUT" "step 1/4"
expect_not_in "$OUT" "$(printf '\r')"

# the weights with a NaN in them (written as PyTorch would: no checksum): refused by --init as a bad file, not
# with training advice
python3 - "$TMP/w.safetensors" "$TMP/nan.safetensors" <<'PY' || exit 2
import json, struct, sys
raw = open(sys.argv[1], "rb").read()
n = struct.unpack("<Q", raw[:8])[0]
header, data = json.loads(raw[8:8 + n]), bytearray(raw[8 + n:])
del header["__metadata__"]
b = header["fc.weight"]["data_offsets"][0]
data[b:b + 4] = struct.pack("<f", float("nan"))
text = json.dumps(header).encode()
text += b" " * (-len(text) % 8)
open(sys.argv[2], "wb").write(struct.pack("<Q", len(text)) + text + bytes(data))
PY
run "--init of weights holding a NaN: no advice about the learning rate" "${TABLE[@]}" --init "$TMP/nan.safetensors"
expect_rc 1
expect_in "$ERR" "fc.weight"
expect_not_in "$ERR" "--lr lower"

finish_case
CASE="a state that cannot be written speaks of no existing state that is not there"
CASE_OK=1
(trap '' XFSZ; ulimit -f 1; exec "$SNUG" "${TABLE[@]}" --max-steps 2 --state "$TMP/state") >"$OUT" 2>"$ERR"
RC=$?
expect_rc 1
expect_in "$ERR" "cannot write the weights file '$TMP/state/state-000000000002.safetensors'"
expect_in "$ERR" "No state was written before this one"
expect_not_in "$ERR" "existing"

# ---- text from files is printed escaped: class names from a table, a weights file, class folders, file names
ESC=$(printf '\033')
# expect_escaped FILE PHRASE: PHRASE (the escaped text) is there, and no ESC byte at all
expect_escaped() {
    expect_in "$1" "$2"
    expect_not_in "$1" "$ESC"
}
printf 'a,b,label\n0,1,\033[31mred\n1,0,blue\n0.2,0.9,\033[31mred\n0.9,0.1,blue\n' > "$TMP/esc.csv"
run "a table's class names: trained" train --model "$TMP/tab.ini" --data "csv:$TMP/esc.csv" --batch 2 \
    --progress off --save "$TMP/esc.safetensors"
expect_rc 0
run "... the class table of snug eval prints them escaped" eval --model "$TMP/tab.ini" \
    --weights "$TMP/esc.safetensors" --data "csv:$TMP/esc.csv"
expect_rc 0
expect_escaped "$OUT" '\x1b[31mred'
printf 'a,b,label\n0,1,green\n1,0,blue\n' > "$TMP/green.csv"
run "... and the weights' class names in a refusal are escaped" eval --model "$TMP/tab.ini" \
    --weights "$TMP/esc.safetensors" --data "csv:$TMP/green.csv,$TMP/green.csv"
expect_rc 1
expect_escaped "$ERR" "class 0 of the weights is '\x1b[31mred'"

HERE=$(cd "$(dirname "$0")" && pwd)
python3 "$HERE/make_image_folder.py" "$TMP/img" 10 2 1 28 || exit 2
mv "$TMP/img/train/class-3" "$TMP/img/train/class-3$ESC[2J"
rm "$TMP/img/train/class-3$ESC[2J/"*
run "a class folder's name in a message is escaped" train --model cnn --data "images:$TMP/img" --progress off
expect_rc 1
expect_escaped "$ERR" 'class-3\x1b[2J'
rmdir "$TMP/img/train/class-3$ESC[2J"
mkdir "$TMP/img/train/class-3"
printf 'not a png' > "$TMP/img/train/class-3/bad$ESC[2J.png"
run "an image file's name in a message is escaped" train --model cnn --data "images:$TMP/img" --progress off
expect_rc 1
expect_escaped "$ERR" 'bad\x1b[2J.png'

finish_tests
