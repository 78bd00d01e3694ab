#!/usr/bin/env bash
# A state folder copied or moved (docs/resume.md, "On another machine"): the resumed run goes on in the folder it
# resumed from, not in the one the state was first written to, ends bitwise as the run that was never stopped,
# and says where it resumed and what it trained; --state creates the folders above its own.
. "$(dirname "$0")/harness.sh"

if ! have_mnist; then
    echo "skip: the resume tests need MNIST in $DATA"
    exit 0
fi

RUN=(train --model cnn --data-dir "$DATA" --batch 32 --seed 2 --threads 1 --progress off --evaluate off)

run "the run that is never stopped (the reference)" "${RUN[@]}" --max-steps 12 --save "$TMP/ref.safetensors"
expect_rc 0
expect_in "$OUT" "trained 12 steps (384 samples)"
expect_not_in "$OUT" "the run 12 steps"

run "--state creates missing parent folders" "${RUN[@]}" --max-steps 6 --state "$TMP/runs/a/AA" --state-every 3
expect_rc 0
[ -f "$TMP/runs/a/AA/state-000000000006.safetensors" ] || fail "no state-6 in runs/a/AA: $(ls -R "$TMP/runs" 2>&1)"

mv "$TMP/runs/a/AA" "$TMP/BB"
rm -rf "$TMP/runs"
run "a moved folder resumes into itself" train --resume "$TMP/BB" --max-steps 12 --save "$TMP/moved.safetensors"
expect_rc 0
[ ! -e "$TMP/runs" ] || fail "the old folder was made again: $(ls -R "$TMP/runs")"
[ -f "$TMP/BB/state-000000000012.safetensors" ] || fail "no state-12 in BB: $(ls "$TMP/BB")"
expect_in "$OUT" "resumed from $TMP/BB/state-000000000006.safetensors at step 6"
expect_in "$OUT" "trained 6 steps (192 samples)"
expect_in "$OUT" "the run 12 steps (384 samples) in all"
cmp -s "$TMP/ref.safetensors" "$TMP/moved.safetensors" || fail "the final weights differ from the uninterrupted run's"

cp -r "$TMP/BB" "$TMP/CC"
run "a copied folder resumes from its own newest state, and writes there" train --resume "$TMP/CC" --max-steps 15
expect_rc 0
expect_in "$OUT" "resumed from $TMP/CC/state-000000000012.safetensors at step 12"
[ -f "$TMP/CC/state-000000000015.safetensors" ] || fail "no state-15 in CC: $(ls "$TMP/CC")"
[ ! -f "$TMP/BB/state-000000000015.safetensors" ] || fail "the copy wrote into BB"

run "--state with --resume writes where it says" train --resume "$TMP/BB" --max-steps 15 --state "$TMP/DD"
expect_rc 0
[ -f "$TMP/DD/state-000000000015.safetensors" ] || fail "no state-15 in DD: $(ls "$TMP/DD" 2>&1)"
[ ! -f "$TMP/BB/state-000000000015.safetensors" ] || fail "BB was written despite --state"

finish_tests
