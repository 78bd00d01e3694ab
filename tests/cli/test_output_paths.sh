#!/usr/bin/env bash
# Where a run writes (docs/cli.md): every output path (--save, --log, --state) is checked before the first step,
# so that an unwritable one is found before training, not after it; and a log that cannot be written any more (a
# full disk, here a file-size limit) does not end the run: it goes on without the log, says so once, and saves.
#
# usage: tests/cli/test_output_paths.sh SNUG_BINARY DATA_DIR
set -u

# shellcheck source=tests/cli/harness.sh
. "$(dirname "$0")/harness.sh"

python3 -c "
import random
r = random.Random(1)
print('a,b,label')
for i in range(10): print('%.3f,%.3f,%d' % (r.random(), r.random(), i % 2))" >"$TMP/t.csv" || exit 2
printf '[model]\nname = tab\ninput = image 2 1 1\n[flat]\ntype = flatten\n[fc]\ntype = linear\nout = 2\n[loss]\ntype = softmax_cross_entropy\n' > "$TMP/tab.ini"
RUN=(train --model "$TMP/tab.ini" --data "csv:$TMP/t.csv" --batch 2 --threads 1 --progress off)

for what in "--save $TMP/no/such/dir/w.safetensors" "--save $TMP" "--log $TMP/no/such/dir/run.jsonl"; do
    # shellcheck disable=SC2086
    run "an unwritable $what is refused before anything is printed" "${RUN[@]}" --max-steps 30 $what
    expect_rc 1
    expect_in "$ERR" "${what#* }"
    expect_empty "$OUT"
done

touch "$TMP/file"
run "a state folder under a file is refused before anything is printed" "${RUN[@]}" --max-steps 3 \
    --state "$TMP/file/state"
expect_rc 1
expect_in "$ERR" "cannot create the state folder '$TMP/file/state'"
expect_empty "$OUT"

finish_case
CASE="a log on a full disk: the run goes on without it, says so once, and saves"
CASE_OK=1
# a file-size limit of 8 KiB makes the log's writes fail (EFBIG) a few dozen lines in, as a full disk would;
# SIGXFSZ ignored, so that a write fails instead of killing the process
(trap '' XFSZ; ulimit -f 8; exec "$SNUG" "${RUN[@]}" --epochs 40 --log-every 100 --log "$TMP/run.jsonl" \
    --save "$TMP/w.safetensors") >"$OUT" 2>"$ERR"
RC=$?
expect_rc 0
expect_in "$ERR" "warning: cannot write to the run log '$TMP/run.jsonl'"
expect_in "$ERR" "the run goes on without the log"
[ "$(grep -c warning "$ERR")" -eq 1 ] || fail "the warning is not said once: $(cat "$ERR")"
expect_in "$OUT" "trained 200 steps"
expect_in "$OUT" "parameters saved to $TMP/w.safetensors"
expect_not_in "$OUT" "log: $TMP/run.jsonl"
lines=$(wc -l <"$TMP/run.jsonl")
[ "$lines" -gt 5 ] && [ "$lines" -lt 200 ] || fail "the log has $lines lines: expected a few dozen whole ones"

finish_tests
