#!/usr/bin/env bash
# Runs that survive anything (docs/resume.md), end to end on MNIST with a small model file (dropout, AdamW, a
# short last micro-batch, a cosine schedule):
#   - killed with SIGKILL at 20 random moments (forward, backward, the update, the state write itself) and resumed
#     each time, the run ends with the bits of the uninterrupted run, and after every kill every state file of the
#     folder is whole (its CRC-32C checked here, independently of snug);
#   - SIGINT and SIGTERM stop it after the step in progress with its state written (exit 130 / 143), and the
#     resumed run ends bitwise;
#   - resumed with another --micro-batch, --mem and --checkpoint: the same run within 1e-5;
#   - a flag that changes the result is refused by name, a damaged newest state is skipped with a warning, an
#     empty folder and a folder that cannot be written say so; a longer --max-steps extends a finished run.
. "$(dirname "$0")/harness.sh"

PY=$(command -v python3 || true)
if ! have_mnist || [ -z "$PY" ]; then
    echo "skip: the resume tests need MNIST in $DATA and python3"
    exit 0
fi

cat >"$TMP/small.ini" <<'INI'
[model]
input = image 1 28 28
name = small
[flat]
type = flatten
[fc1]
type = linear
out = 24
[act]
type = relu
[drop]
type = dropout
p = 0.2
[fc2]
type = linear
out = 10
[loss]
type = softmax_cross_entropy
INI

RUN=(train --model "$TMP/small.ini" --data-dir "$DATA" --batch 30 --micro-batch 8 --max-steps 3000 --optim adamw
     --lr 0.002 --schedule cosine --warmup 10 --seed 3 --threads 1 --progress off --evaluate off)
# A state every 3 steps: a state write takes a few milliseconds (its fsyncs), a step a fraction of one, so kills
# land in both, and the run lasts several seconds.
EVERY=(--state-every 3)

# CRC-32C in Python, independent of snug's: the checksum of a state file with the 8 digits of its own read as "0".
cat >"$TMP/state_crc.py" <<'PYEOF'
T = []
for i in range(256):
    c = i
    for _ in range(8):
        c = (c >> 1) ^ 0x82F63B78 if c & 1 else c >> 1
    T.append(c)
def crc32c(data, crc=0):
    crc ^= 0xFFFFFFFF
    for b in data:
        crc = T[(crc ^ b) & 0xFF] ^ (crc >> 8)
    return crc ^ 0xFFFFFFFF
def file_crc(raw):
    at = raw.index(b'"crc32c":"') + len('"crc32c":"')
    return at, "%08x" % crc32c(raw[:at] + b"00000000" + raw[at + 8:])
PYEOF

# Every state-*.safetensors of a folder whole: its header parses and its CRC-32C matches.
check_states() {
    "$PY" - "$1" "$TMP" <<'PYEOF'
import glob, json, struct, sys
sys.path.insert(0, sys.argv[2])
from state_crc import file_crc
for path in glob.glob(sys.argv[1] + "/state-*.safetensors"):
    raw = open(path, "rb").read()
    n = struct.unpack("<Q", raw[:8])[0]
    meta = json.loads(raw[8:8 + n].decode())["__metadata__"]
    got = file_crc(raw)[1]
    assert got == meta["crc32c"], "%s: crc %s, header says %s" % (path, got, meta["crc32c"])
    json.loads(meta["snug_state"])
PYEOF
}

# max |a - b| / max |a| per tensor of two safetensors files, at most bound.
close_enough() {
    "$PY" - "$1" "$2" "$3" <<'PYEOF'
import json, struct, sys
def load(p):
    raw = open(p, "rb").read()
    n = struct.unpack("<Q", raw[:8])[0]
    h = json.loads(raw[8:8 + n])
    out = {}
    for k, v in h.items():
        if k == "__metadata__": continue
        b, e = v["data_offsets"]
        out[k] = struct.unpack("<%df" % ((e - b) // 4), raw[8 + n + b:8 + n + e])
    return out
a, b, bound = load(sys.argv[1]), load(sys.argv[2]), float(sys.argv[3])
for k in a:
    scale = max(abs(x) for x in a[k]) or 1.0
    d = max(abs(x - y) for x, y in zip(a[k], b[k])) / scale
    assert d <= bound, "%s: %g > %g" % (k, d, bound)
PYEOF
}

run "the uninterrupted run (the reference)" "${RUN[@]}" --save "$TMP/ref.safetensors"
expect_rc 0

# ---------------------------------------------------------------------------------------------------------
finish_case
CASE="killed with SIGKILL at 20 random moments, resumed each time: bitwise the uninterrupted run"
CASE_OK=1
STATE=$TMP/killed
# The number of the newest state (the global batches it has taken), 0 when none.
newest() {
    local n
    n=$(ls "$STATE" 2>/dev/null | sed -n 's/^state-0*\([0-9][0-9]*\)\.safetensors$/\1/p' | sort -n | tail -n 1)
    echo "${n:-0}"
}
# Each kill comes a random 3 to 62 global batches after the newest state, then 0 to 29 ms later, so that it
# lands in a step or in a state write whatever the machine's speed, and 20 kills leave the run unfinished.
"$SNUG" "${RUN[@]}" --save "$TMP/killed.safetensors" --state "$STATE" "${EVERY[@]}" >/dev/null 2>&1 &
pid=$!
kills=0
for i in $(seq 1 20); do
    target=$(($(newest) + 3 + RANDOM % 60))
    while [ "$(newest)" -lt "$target" ] && kill -0 "$pid" 2>/dev/null; do sleep 0.005; done
    sleep "0.0$((RANDOM % 3))$((RANDOM % 10))"
    kill -9 "$pid" 2>/dev/null && kills=$((kills + 1))
    wait "$pid" 2>/dev/null
    check_states "$STATE" >"$TMP/check.log" 2>&1 || fail "after kill $i: $(tail -n 2 "$TMP/check.log" | tr '\n' ' ')"
    "$SNUG" train --resume "$STATE" >/dev/null 2>"$TMP/resume.err" &
    pid=$!
done
wait "$pid"
RC=$?
echo "      $kills kills landed in a running process, the last at global batch $(newest); the last resume exited $RC"
[ "$kills" -eq 20 ] || fail "only $kills of 20 kills found the run still going"
[ "$RC" -eq 0 ] || fail "the last resume exited $RC: $(tail -n 2 "$TMP/resume.err")"
cmp -s "$TMP/ref.safetensors" "$TMP/killed.safetensors" || fail "the final weights differ from the uninterrupted run's"

# ---------------------------------------------------------------------------------------------------------
for sig in INT TERM; do
    finish_case
    CASE="SIG$sig stops the run after the step in progress, its state written; the resumed run is bitwise"
    CASE_OK=1
    STATE=$TMP/sig$sig
    "$SNUG" "${RUN[@]}" --save "$TMP/sig.safetensors" --state "$STATE" "${EVERY[@]}" >"$OUT" 2>"$ERR" &
    pid=$!
    while [ "$(newest)" -lt 30 ] && kill -0 "$pid" 2>/dev/null; do sleep 0.005; done
    kill -s "$sig" "$pid"
    wait "$pid"
    RC=$?
    want=$([ "$sig" = INT ] && echo 130 || echo 143)
    [ "$RC" -eq "$want" ] || fail "exit status $RC, expected $want"
    expect_in "$ERR" "stopped by SIG$sig after the step in progress"
    expect_in "$ERR" "Resume with: snug train --resume $STATE"
    check_states "$STATE" >"$TMP/check.log" 2>&1 || fail "state not whole: $(tail -n 1 "$TMP/check.log")"
    "$SNUG" train --resume "$STATE" >"$OUT" 2>"$ERR"
    RC=$?
    expect_rc 0
    cmp -s "$TMP/ref.safetensors" "$TMP/sig.safetensors" || fail "the final weights differ from the uninterrupted run's"
done

# ---------------------------------------------------------------------------------------------------------
# With another micro-batch the sums of a step run in another order: the same run within rounding. SGD, whose
# update does not divide by the gradient's size as AdamW's does, keeps that rounding where it arose.
SGD=(train --model "$TMP/small.ini" --data-dir "$DATA" --batch 30 --micro-batch 8 --optim sgd --lr 0.05 --seed 3
     --threads 1 --progress off --evaluate off)
run "an SGD run of 300 steps (the reference)" "${SGD[@]}" --max-steps 300 --save "$TMP/sgd.safetensors"
expect_rc 0
run "the same run stopped at step 100 (--max-steps), its state kept" "${SGD[@]}" --max-steps 100 \
    --save "$TMP/other.safetensors" --state "$TMP/other" --state-keep 3
expect_rc 0
[ "$(ls "$TMP/other" | wc -l)" -eq 1 ] || fail "expected one state (the end), found: $(ls "$TMP/other")"

run "resumed with another --micro-batch, --mem and --checkpoint, extended to 300 steps: within 1e-5" \
    train --resume "$TMP/other" --micro-batch 5 --mem 64MiB --checkpoint sqrt --max-steps 300
expect_rc 0
close_enough "$TMP/sgd.safetensors" "$TMP/other.safetensors" 1e-5 >"$TMP/close.log" 2>&1 ||
    fail "$(tail -n 1 "$TMP/close.log")"

run "a flag that changes the result is refused, by name" train --resume "$TMP/other" --lr 0.01
expect_rc 1
expect_in "$ERR" "optim.lr differs (0.05 in the state, 0.01 in this run)"
expect_in "$ERR" "--lr defines the result"

run "another model is refused" train --resume "$TMP/other" --model mlp
expect_rc 1
expect_in "$ERR" "is a state of model 'small', not of 'mlp'"

# the newest state damaged: skipped with a warning, the one before used
cp -r "$TMP/other" "$TMP/damaged"
newest=$(ls "$TMP/damaged"/state-* | sort | tail -n 1)
cp "$newest" "$TMP/damaged/state-999999999999.safetensors"
printf 'x' | dd of="$TMP/damaged/state-999999999999.safetensors" bs=1 seek=300 conv=notrunc 2>/dev/null
run "a damaged newest state is skipped with a warning" train --resume "$TMP/damaged" --max-steps 301
expect_rc 0
expect_in "$ERR" "warning: skipped states that are not whole"
expect_in "$ERR" "state-999999999999.safetensors"

mkdir -p "$TMP/empty"
run "an empty folder says so" train --resume "$TMP/empty"
expect_rc 1
expect_in "$ERR" "holds no training state"

touch "$TMP/not-a-folder"
run "a state folder that is a file says so, before training" "${RUN[@]}" --state "$TMP/not-a-folder"
expect_rc 1
expect_in "$ERR" "is not a folder"

run "--resume with --init is a usage error" train --resume "$TMP/other" --init "$TMP/ref.safetensors"
expect_rc 2
expect_in "$ERR" "--init does not apply"

run "--state-every-time takes durations" "${RUN[@]}" --state-every-time 1h30 --state "$TMP/x"
expect_rc 2
expect_in "$ERR" "--state-every-time: bad duration '1h30'"

# ---------------------------------------------------------------------------------------------------------
# The log's times across a resume: elapsed_s is the run's training time, so it goes on from the state's and never
# falls back; samples_per_s is this process's speed. Had the resumed process divided the whole run's 1800 x 30
# samples by its own time (300 steps), its speed would read 6 times the right one; had it divided its own by the
# run's time, a sixth. The right one is what the log's own elapsed_s gives over the resumed steps (the state is
# written within the step's time); the first process's speed is no yardstick, since the load of a shared machine
# may differ between the two processes.
run "stopped at step 1500 with a log" "${SGD[@]}" --max-steps 1500 --state "$TMP/timed" --log "$TMP/timed.jsonl"
expect_rc 0
cp -r "$TMP/timed" "$TMP/untimed"
run "resumed to step 1800, its log continued: elapsed_s goes on, samples_per_s is this process's" \
    train --resume "$TMP/timed" --max-steps 1800 --log "$TMP/timed.jsonl"
expect_rc 0
"$PY" - "$TMP/timed.jsonl" >"$TMP/timed.log" 2>&1 <<'PYEOF' || fail "$(tail -n 3 "$TMP/timed.log" | tr '\n' ' ')"
import json, sys
steps = [o for o in map(json.loads, open(sys.argv[1])) if o["type"] == "step"]
assert [o["step"] for o in steps] == list(range(1, 1801)), "the log's steps: %s" % [o["step"] for o in steps][:5]
for a, b in zip(steps, steps[1:]):
    assert b["elapsed_s"] >= a["elapsed_s"], "elapsed_s falls from %g at step %d to %g at step %d" % (
        a["elapsed_s"], a["step"], b["elapsed_s"], b["step"])
stop, end = steps[1499], steps[1799]
logged = 300 * 30 / (end["elapsed_s"] - stop["elapsed_s"])
assert logged / 4 <= end["samples_per_s"] <= logged * 4, (
    "samples_per_s %g at step 1800, the resumed steps' samples over their elapsed_s %g" % (end["samples_per_s"], logged))
PYEOF

# ---------------------------------------------------------------------------------------------------------
finish_case
CASE="a state written before the training time was kept (no train_seconds) resumes, its time from the resume"
CASE_OK=1
"$PY" - "$TMP/untimed/state-000000001500.safetensors" "$TMP" <<'PYEOF' || fail "could not write the older state"
import json, struct, sys
sys.path.insert(0, sys.argv[2])
from state_crc import file_crc
raw = open(sys.argv[1], "rb").read()
n = struct.unpack("<Q", raw[:8])[0]
header = json.loads(raw[8:8 + n])
run = json.loads(header["__metadata__"]["snug_state"])
del run["counters"]["train_seconds"]
header["__metadata__"]["snug_state"] = json.dumps(run, separators=(",", ":"))
header["__metadata__"]["crc32c"] = "00000000"
text = json.dumps(header, separators=(",", ":")).encode()
raw = struct.pack("<Q", len(text)) + text + raw[8 + n:]
at, crc = file_crc(raw)
open(sys.argv[1], "wb").write(raw[:at] + crc.encode() + raw[at + 8:])
PYEOF
"$SNUG" train --resume "$TMP/untimed" --max-steps 1510 >"$OUT" 2>"$ERR"
RC=$?
expect_rc 0
expect_in "$OUT" "trained 10 steps (300 samples)"

finish_tests
