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

finish_tests
