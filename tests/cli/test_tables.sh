#!/usr/bin/env bash
# CSV tables end to end (docs/data.md): weights trained on a table score another table alone with the training
# table's standardisation and class names (a file holding only some of the classes among them); augmentation
# refused; a FIFO refused, not waited on; CR-only line ends read.
#
# usage: tests/cli/test_tables.sh SNUG_BINARY DATA_DIR
set -u

# shellcheck source=tests/cli/harness.sh
. "$(dirname "$0")/harness.sh"

# Three classes along x (a near 0, b near 10, c near 20), y noise; the validation table holds b and c only, so
# its own statistics (mean 15) would move its b rows onto a; the skewed one holds every class, c nine times in
# ten.
python3 - "$TMP" <<'PY' || exit 2
import random, sys
r = random.Random(5)
def rows(classes, n):
    return ["%.3f,%.3f,%s" % ({"a": 0, "b": 10, "c": 20}[k] + r.uniform(-2, 2), r.uniform(-1, 1), k)
            for i in range(n) for k in classes]
open(sys.argv[1] + "/train.csv", "w").write("x,y,label\n" + "\n".join(rows("abc", 20)) + "\n")
open(sys.argv[1] + "/val.csv", "w").write("x,y,label\n" + "\n".join(rows("bc", 30)) + "\n")
open(sys.argv[1] + "/skewed.csv", "w").write("x,y,label\n" + "\n".join(rows("abccccccccc", 5)) + "\n")
PY
printf '[model]\nname = tab\ninput = image 2 1 1\n[flat]\ntype = flatten\n[fc]\ntype = linear\nout = 3\n[loss]\ntype = softmax_cross_entropy\n' > "$TMP/tab.ini"
TRAIN=(train --model "$TMP/tab.ini" --batch 10 --lr 0.1 --seed 1 --threads 1 --progress off)

run "a table trains, its validation table scored with its statistics" "${TRAIN[@]}" --epochs 40 \
    --data "csv:$TMP/train.csv,$TMP/val.csv" --save "$TMP/w.safetensors"
expect_rc 0
expect_in "$OUT" "validation accuracy 100.00%"

run "snug eval of the validation table alone: the training table's standardisation and classes" eval \
    --model "$TMP/tab.ini" --weights "$TMP/w.safetensors" --data "csv:$TMP/val.csv"
expect_rc 0
expect_in "$OUT" "accuracy 100.00%"
expect_in "$OUT" "standardised by the training table's column statistics"

run "snug eval of a class-skewed table alone: the training table's standardisation" eval \
    --model "$TMP/tab.ini" --weights "$TMP/w.safetensors" --data "csv:$TMP/skewed.csv"
expect_rc 0
expect_in "$OUT" "accuracy 100.00%"

printf 'y,x,label\n1,2,b\n' > "$TMP/swapped.csv"
run "snug eval of a table with other columns says which" eval --model "$TMP/tab.ini" --weights "$TMP/w.safetensors" \
    --data "csv:$TMP/swapped.csv"
expect_rc 1
expect_in "$ERR" "the columns differ from those of the training table recorded with the weights from column 1"

printf 'x,y,label\n1,2,d\n' > "$TMP/other.csv"
run "snug eval of a table with a class the weights do not know" eval --model "$TMP/tab.ini" \
    --weights "$TMP/w.safetensors" --data "csv:$TMP/other.csv"
expect_rc 1
expect_in "$ERR" "'d', a class the training table recorded with the weights does not have (its classes: a, b, c)"

run "--augment on a table is refused before training" "${TRAIN[@]}" --max-steps 3 --data "csv:$TMP/train.csv" \
    --augment crop:4
expect_rc 1
expect_in "$ERR" "augmentation (crop:4) changes images"
expect_not_in "$OUT" "step 1"

mkfifo "$TMP/fifo.csv"
run "a FIFO named as a table is refused, not waited on" "${TRAIN[@]}" --max-steps 1 --data "csv:$TMP/fifo.csv"
expect_rc 1
expect_in "$ERR" "is not a regular file"

tr '\n' '\r' < "$TMP/train.csv" > "$TMP/cr.csv"
run "a table with CR-only line ends (old Mac files) reads" "${TRAIN[@]}" --max-steps 2 --data "csv:$TMP/cr.csv"
expect_rc 0
expect_in "$OUT" "60 training rows of 2 features"

finish_tests
