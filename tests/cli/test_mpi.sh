#!/usr/bin/env bash
# Data parallelism end to end, with real ranks on this machine (oversubscribed: 2 cores are enough). Registered
# by CMake only in a build with MPI; SNUG_MPIEXEC names the launcher (else mpiexec from PATH). One thread a rank.
#   - R = 1, 2, 4 ranks give the parameters of the single-process run after 20 steps (max |a-b| / max |a| <= 1e-5;
#     R = 1 bitwise), with uneven shards, uneven micro-batches, an empty shard (B < R), and dropout (resmlp); in
#     bf16, far within the distance between bf16's and float32's parameters;
#   - exactly one gradient all-reduce per optimizer step; only rank 0 prints; --progress auto into a file writes
#     plain step lines, once;
#   - a rank whose data file is corrupt ends the whole job within seconds, with its message;
#   - a rank that does not reach a collective (one that skips it, one stopped with SIGSTOP) ends the job after
#     --rank-timeout, with a message naming it; so does a rank stopped during start-up (in MPI_Init);
#   - a usage error under mpirun is reported once.
#
# usage: tests/cli/test_mpi.sh SNUG_BINARY DATA_DIR
set -u

# shellcheck source=tests/cli/harness.sh
. "$(dirname "$0")/harness.sh"

MPIEXEC=${SNUG_MPIEXEC:-mpiexec}
if ! command -v "$MPIEXEC" >/dev/null 2>&1; then
    echo "test_mpi: no MPI launcher '$MPIEXEC' (install openmpi-bin, or set SNUG_MPIEXEC)" >&2
    exit 1
fi
if ! have_mnist; then
    echo "test_mpi: needs the MNIST files in '$DATA' (make data)" >&2
    exit 1
fi
# Open MPI refuses root without consent and more ranks than cores without --oversubscribe.
MPI_FLAGS=()
if "$MPIEXEC" --version 2>&1 | grep -qE "Open MPI|OpenRTE"; then
    MPI_FLAGS=(--oversubscribe)
    export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
fi
export OMP_NUM_THREADS=1

# run_mpi NAME R ARGS...: R ranks of snug ARGS, as run does for one process.
run_mpi() {
    finish_case
    CASE=$1
    local ranks=$2
    shift 2
    CASE_OK=1
    "$MPIEXEC" "${MPI_FLAGS[@]}" -np "$ranks" "$SNUG" "$@" >"$OUT" 2>"$ERR"
    RC=$?
}

# data_offset FILE: where the tensors of a safetensors file start: after the 8-byte length and the header.
data_offset() { echo $((8 + $(od -An -t u8 -N 8 "$1"))); }

# relative_differences A B: over every float after the header, "MAX L2": the largest difference relative
# to the largest magnitude, and the relative L2 error ||a - b|| / ||a|| (od prints each float with enough digits
# to tell neighbouring floats apart).
relative_differences() {
    paste <(od -An -v -w4 -t f4 -j "$(data_offset "$1")" "$1") <(od -An -v -w4 -t f4 -j "$(data_offset "$2")" "$2") | awk '
        { d = $1 - $2; if (d < 0) d = -d; a = $1 < 0 ? -$1 : $1; if (d > md) md = d; if (a > ma) ma = a
          dd += d * d; aa += a * a }
        END { if (NR == 0 || ma == 0) print "nan nan"; else printf "%.3g %.3g\n", md / ma, sqrt(dd / aa) }'
}

# expect_close A B [MAX_REL [L2_REL]]: B's parameters within MAX_REL (default 1e-5) of A's, largest difference
# over largest magnitude, and within L2_REL (default: no check) in relative L2.
expect_close() {
    local a=$1 b=$2 max_bound=${3:-1e-5} l2_bound=${4:-inf}
    if [ ! -s "$b" ]; then
        fail "no parameter file $b"
        return
    fi
    [ "$(stat -c %s "$a")" -eq "$(stat -c %s "$b")" ] || { fail "$a and $b differ in size"; return; }
    local rel l2
    read -r rel l2 < <(relative_differences "$a" "$b")
    echo "      max |a-b| / max |a| = $rel, ||a-b|| / ||a|| = $l2 ($(cmp -s "$a" "$b" && echo bitwise equal || echo not bitwise))"
    awk -v r="$rel" -v b="$max_bound" 'BEGIN { exit !(r != "nan" && r + 0 <= b + 0) }' ||
        fail "largest relative difference $rel > $max_bound"
    [ "$l2_bound" = inf ] || awk -v r="$l2" -v b="$l2_bound" 'BEGIN { exit !(r != "nan" && r + 0 <= b + 0) }' ||
        fail "relative L2 difference $l2 > $l2_bound"
}

# ---------------------------------------------------------------------------------------------------------
# The same global batch and seed over 1, 2, 4 ranks. B = 50 in micro-batches of 8: over 4 ranks the shards are
# 12, 13, 12, 13 samples (k = 2, the last micro-batch short); the epoch order is the same for every R.
# Only the MLP runs evaluate (each rank its share of the test set); the others skip it, which would dominate.
COMMON=(train --data-dir "$DATA" --seed 7 --max-steps 20 --progress off --threads 1)
MLP=("${COMMON[@]}" --model mlp --batch 50 --micro-batch 8 --optim sgd --momentum 0.9 --lr 0.05)

run "mlp, one process (the reference)" "${MLP[@]}" --save "$TMP/mlp_1p.bin"
expect_rc 0
expect_in "$OUT" "parameters saved to $TMP/mlp_1p.bin"
expect_not_in "$OUT" "data parallel"

run_mpi "mlp, 1 rank under mpirun: bitwise the single process" 1 "${MLP[@]}" --save "$TMP/mlp_r1.bin"
expect_rc 0
cmp -s "$TMP/mlp_1p.bin" "$TMP/mlp_r1.bin" || fail "1 rank differs from the single process"

for R in 2 4; do
    run_mpi "mlp, $R ranks: the single process's parameters after 20 steps" "$R" "${MLP[@]}" --save "$TMP/mlp_r$R.bin"
    expect_rc 0
    expect_in "$OUT" "data parallel: $R ranks"
    expect_in "$OUT" "gradient all-reduces: 20 (one per optimizer step)"
    [ "$(grep -c '^test accuracy' "$OUT")" -eq 1 ] || fail "the results are printed more than once (not rank 0 only)"
    [ "$(grep -c '^snug 0' "$OUT")" -eq 1 ] || fail "the header is printed more than once"
    expect_close "$TMP/mlp_1p.bin" "$TMP/mlp_r$R.bin"
done

# --progress auto with mpirun's stdout in a file: plain step lines, rank 0's alone. Open MPI gives every rank a
# pseudo-terminal for stdout whatever mpirun's own is, so a rank that asked isatty would draw the live line ('\r'
# and an escape code) into the file.
run_mpi "--progress auto under mpirun, stdout to a file: plain step lines of rank 0 only" 2 train --data-dir "$DATA" \
    --model mlp --batch 50 --max-steps 5 --evaluate off --threads 1 --progress auto --log-every 1
expect_rc 0
if grep -q $'[\r\033]' "$OUT"; then fail "carriage returns or escape codes in the file"; fi
for s in 1 2 3 4 5; do
    [ "$(grep -c "step $s/5 " "$OUT")" -eq 1 ] || fail "step $s/5 is not logged exactly once (only rank 0 logs)"
done
[ "$(grep -c '^snug 0' "$OUT")" -eq 1 ] || fail "the header is printed more than once"

# A run's state written by one process and continued by two ranks (docs/resume.md): the same run within rounding.
run "mlp, 10 steps in one process with a state folder" "${MLP[@]}" --max-steps 10 --evaluate off \
    --state "$TMP/mpi_state"
expect_rc 0
run_mpi "mlp, its state resumed on 2 ranks to step 20: the single process's parameters" 2 \
    train --resume "$TMP/mpi_state" --max-steps 20 --save "$TMP/mlp_resumed.bin"
expect_rc 0
expect_in "$OUT" "data parallel: 2 ranks"
expect_close "$TMP/mlp_1p.bin" "$TMP/mlp_resumed.bin"

# B = 3 over 4 ranks: rank 0's shard is empty; it contributes zeros and still joins every reduction.
TINY=("${COMMON[@]}" --evaluate off --model mlp --batch 3 --micro-batch 1)
run "mlp, B = 3, one process" "${TINY[@]}" --save "$TMP/tiny_1p.bin"
expect_rc 0
run_mpi "mlp, B = 3 over 4 ranks (an empty shard)" 4 "${TINY[@]}" --save "$TMP/tiny_r4.bin"
expect_rc 0
expect_in "$OUT" "each takes 0 or 1 samples"
expect_close "$TMP/tiny_1p.bin" "$TMP/tiny_r4.bin"

# The CNN (conv2d's per-thread partial sums) and a model with dropout, whose masks are keyed by the position in
# the global batch: the same masks whatever the shard. The CNN runs 5 steps, not 20: its ReLUs and max-pools
# make longer runs chaotic, one decision within rounding of a tie parting the two runs for good (with seed 7,
# 1e-5 at step 10 and 2e-4 at step 20 with the input gradient on Winograd F(4x4), 1e-7 with F(2x2); seeds 1-4
# stay below 4e-7 at step 20 either way).
CNN=("${COMMON[@]}" --max-steps 5 --evaluate off --model cnn --batch 24 --micro-batch 5 --optim sgd --lr 0.05)
run "cnn, one process" "${CNN[@]}" --save "$TMP/cnn_1p.bin"
expect_rc 0
run_mpi "cnn, 2 ranks" 2 "${CNN[@]}" --save "$TMP/cnn_r2.bin"
expect_rc 0
expect_close "$TMP/cnn_1p.bin" "$TMP/cnn_r2.bin"

RESMLP=("${COMMON[@]}" --evaluate off --model resmlp --batch 10 --micro-batch 3 --clip 1 --max-steps 5)
run "resmlp (dropout), one process" "${RESMLP[@]}" --save "$TMP/res_1p.bin"
expect_rc 0
run_mpi "resmlp (dropout), 2 ranks" 2 "${RESMLP[@]}" --save "$TMP/res_r2.bin"
expect_rc 0
expect_in "$OUT" "gradient all-reduces: 5 (one per optimizer step)"
expect_close "$TMP/res_1p.bin" "$TMP/res_r2.bin"

# AdamW divides by sqrt(v): where a gradient is nearly 0 the rounding of the sum decides the sign of a step of
# size lr, so its largest elementwise difference is bound by lr, not by the rounding. Checked in relative L2, as
# tests/test_accumulation.c checks the split of one process.
ADAMW=("${COMMON[@]}" --evaluate off --model mlp --batch 50 --micro-batch 8 --optim adamw --lr 0.001)
run "mlp + AdamW, one process" "${ADAMW[@]}" --save "$TMP/adamw_1p.bin"
expect_rc 0
# AdamW divides by the root of the squared gradients, so it magnifies the rounding of a different split where a
# gradient is near zero: close only with products whose bits do not depend on the split.
if own_products; then
    run_mpi "mlp + AdamW, 2 ranks (relative L2 <= 1e-4)" 2 "${ADAMW[@]}" --save "$TMP/adamw_r2.bin"
    expect_rc 0
    expect_close "$TMP/adamw_1p.bin" "$TMP/adamw_r2.bin" 1e-2 1e-4
else
    echo "skip: mlp + AdamW, 2 ranks: this CPU has no AVX-512, the BLAS's products depend on the split"
fi

# bf16 (docs/precision.md): a sample's products never depend on the split, so R ranks part from one process only
# by the order in which the all-reduce sums float32 gradients; a flipped bf16 rounding of a weight or activation
# can magnify that, but it must stay far below what the precision itself changes: of the distance between the
# single process's bf16 and float32 parameters, at most 5% in the largest difference (one flipped rounding moves
# a weight by a bf16 step) and 1% in relative L2.
BF16=("${MLP[@]}" --evaluate off --precision bf16)
run "mlp in bf16, one process" "${BF16[@]}" --save "$TMP/bf16_1p.bin"
expect_rc 0
read -r precision_max precision_l2 < <(relative_differences "$TMP/bf16_1p.bin" "$TMP/mlp_1p.bin")
echo "      bf16 against float32: max |a-b| / max |a| = $precision_max, ||a-b|| / ||a|| = $precision_l2"
for R in 2 4; do
    run_mpi "mlp in bf16, $R ranks: far within the precision's own distance from the single process" "$R" \
        "${BF16[@]}" --save "$TMP/bf16_r$R.bin"
    expect_rc 0
    expect_in "$OUT" "data parallel: $R ranks"
    expect_close "$TMP/bf16_1p.bin" "$TMP/bf16_r$R.bin" "$(awk -v d="$precision_max" 'BEGIN { print d / 20 }')" \
        "$(awk -v d="$precision_l2" 'BEGIN { print d / 100 }')"
done

# ---------------------------------------------------------------------------------------------------------
# A corrupt data file on rank 1 only (MPMD: one command line per rank): the whole job ends with rank 1's message
# instead of rank 0 waiting for it forever.
mkdir -p "$TMP/bad"
for f in train-labels-idx1-ubyte t10k-images-idx3-ubyte t10k-labels-idx1-ubyte; do ln -s "$DATA/$f" "$TMP/bad/$f"; done
head -c 100000 "$DATA/train-images-idx3-ubyte" >"$TMP/bad/train-images-idx3-ubyte"
finish_case
CASE="a corrupt data file on rank 1 ends the job within seconds, with rank 1's message"
CASE_OK=1
LONG=(train --model mlp --batch 64 --max-steps 100000 --progress off --threads 1)
start=$(date +%s)
timeout 60 "$MPIEXEC" "${MPI_FLAGS[@]}" -np 1 "$SNUG" "${LONG[@]}" --data-dir "$DATA" : \
    -np 1 "$SNUG" "${LONG[@]}" --data-dir "$TMP/bad" >"$OUT" 2>"$ERR"
RC=$?
took=$(($(date +%s) - start))
echo "      exit status $RC after $took s"
[ "$RC" -ne 0 ] && [ "$RC" -ne 124 ] || fail "exit status $RC: expected a failure, not success or a timeout"
[ "$took" -le 10 ] || fail "took $took s (more than 10)"
expect_in "$ERR" "snug: rank 1: bad format: $TMP/bad/train-images-idx3-ubyte: truncated"
expect_not_in "$OUT" "test accuracy"

# ---------------------------------------------------------------------------------------------------------
# A rank that never comes (--rank-timeout): the job ends with a message naming it instead of waiting forever.
# First a rank that leaves the collectives on purpose (rank 1 skips the evaluation rank 0 runs), which names it
# every time; then a rank stopped with SIGSTOP at some moment of training, which usually names it too (or, when
# the stop caught it inside an all-reduce after it had arrived, says that every rank arrived).
finish_case
CASE="a rank that skips a collective is named after --rank-timeout 2s"
CASE_OK=1
SHORT=(train --model mlp --batch 64 --max-steps 3 --progress off --threads 1 --data-dir "$DATA" --rank-timeout 2s)
start=$(date +%s)
timeout 120 "$MPIEXEC" "${MPI_FLAGS[@]}" -np 1 "$SNUG" "${SHORT[@]}" : -np 1 "$SNUG" "${SHORT[@]}" --evaluate off \
    >"$OUT" 2>"$ERR"
RC=$?
took=$(($(date +%s) - start))
echo "      exit status $RC after $took s"
[ "$RC" -ne 0 ] && [ "$RC" -ne 124 ] || fail "exit status $RC: expected a failure, not success or a timeout"
[ "$took" -le 60 ] || fail "took $took s (more than 60)"
expect_in "$ERR" "snug: rank 0: rank 1 of 2 did not reach an all-reduce within the rank timeout of 2 s"
expect_not_in "$OUT" "test accuracy"

# stop_rank_1 READY PATTERN WHAT: with READY "yes", stops rank 1 (pid $STOPPED) with SIGSTOP and expects the job
# ($JOB, mpirun) to end within 60 s with a failure and a message matching PATTERN (extended regex); otherwise fails
# with WHAT. The job ends the stopped rank too (killed, it may linger a moment as a zombie); one that outlives the
# job is a failure, and must not outlive the test.
running() { [ -n "$1" ] && [ -e "/proc/$1" ] && ! grep -q ') Z ' "/proc/$1/stat" 2>/dev/null; }
stop_rank_1() {
    local start
    start=$(date +%s)
    if [ "$1" = yes ] && [ -n "$STOPPED" ] && kill -STOP "$STOPPED"; then
        for _ in $(seq 600); do kill -0 "$JOB" 2>/dev/null || break; sleep 0.1; done
        if kill -0 "$JOB" 2>/dev/null; then
            fail "the job still runs 60 s after rank 1 was stopped"
            kill -KILL "$STOPPED" 2>/dev/null
            kill "$JOB" 2>/dev/null # mpirun ends its other ranks
        fi
        wait "$JOB"
        RC=$?
        echo "      exit status $RC, $(($(date +%s) - start)) s after the stop: $(grep -o \
            'MPI_Init is still\|MPI_Comm_dup\|did not reach\|every rank reached' "$ERR" | head -1)"
        [ "$RC" -ne 0 ] && [ "$RC" -ne 124 ] || fail "exit status $RC: expected a failure, not success or a timeout"
        grep -qE "$2" "$ERR" || fail "no message matching: $2"
        expect_in "$ERR" "; ending the job"
    else
        fail "$3"
        kill "$JOB" 2>/dev/null
        wait "$JOB"
    fi
    for _ in $(seq 100); do running "$STOPPED" || break; sleep 0.1; done
    if running "$STOPPED"; then
        fail "rank 1 (pid $STOPPED) was still there 10 s after the job"
        kill -KILL "$STOPPED"
    fi
}

finish_case
CASE="a rank stopped with SIGSTOP mid-run ends the job after --rank-timeout 3s, with a message"
CASE_OK=1
PIDFILE=$TMP/rank1.pid
LONG=(train --model mlp --batch 64 --max-steps 100000 --evaluate off --progress off --log-every 1 --threads 1
    --data-dir "$DATA" --rank-timeout 3s)
timeout 300 "$MPIEXEC" "${MPI_FLAGS[@]}" -np 1 "$SNUG" "${LONG[@]}" : \
    -np 1 sh -c 'echo $$ >"$0"; exec "$@"' "$PIDFILE" "$SNUG" "${LONG[@]}" >"$OUT" 2>"$ERR" &
JOB=$!
# training has begun once rank 0 logs its steps (the collectives before them are the trainer's broadcast)
for _ in $(seq 1200); do
    grep -q "step 3/" "$OUT" 2>/dev/null && [ -s "$PIDFILE" ] && break
    kill -0 "$JOB" 2>/dev/null || break
    sleep 0.1
done
STOPPED=$(cat "$PIDFILE" 2>/dev/null)
grep -q "step 3/" "$OUT" && READY=yes || READY=no
stop_rank_1 "$READY" "snug: rank 0: (rank 1 of 2 did not reach|every rank reached) an all-reduce(,| within) .*rank timeout of 3 s" \
    "the job did not start training (or rank 1's pid is unknown)"

# A rank stopped during start-up: MPI_Init (and the communicator set-up after it) waits for every rank and cannot
# be cancelled, so --rank-timeout bounds the start-up too. Rank 1 is stopped as soon as its process runs snug,
# long before it can have joined; should the stop land later all the same, the collectives' timeout ends the job:
# either message, but the job must end.
finish_case
CASE="a rank stopped with SIGSTOP during start-up ends the job after --rank-timeout 5s, with a message"
CASE_OK=1
PIDFILE=$TMP/rank1_start.pid
START=(train --model mlp --batch 64 --max-steps 100000 --evaluate off --progress off --threads 1
    --data-dir "$DATA" --rank-timeout 5s)
"$MPIEXEC" "${MPI_FLAGS[@]}" -np 1 "$SNUG" "${START[@]}" : \
    -np 1 sh -c 'echo $$ >"$0"; exec "$@"' "$PIDFILE" "$SNUG" "${START[@]}" >"$OUT" 2>"$ERR" &
JOB=$!
EXE=$(readlink -f "$SNUG")
READY=no
for _ in $(seq 3000); do
    STOPPED=$(cat "$PIDFILE" 2>/dev/null)
    [ -n "$STOPPED" ] && [ "$(readlink "/proc/$STOPPED/exe" 2>/dev/null)" = "$EXE" ] && READY=yes && break
    kill -0 "$JOB" 2>/dev/null || break
    sleep 0.01
done
# the start-up's message, or (should the stop land after it) a collective's
stop_rank_1 "$READY" "snug: rank 0( of 2)? \(pid [0-9]+ on [^)]*\): the start-up of the MPI job did not complete within \
the rank timeout of 5 s: |snug: rank 0: (rank 1 of 2 did not reach|every rank reached) (a|an) [a-z-]+(,| within) .*rank \
timeout of 5 s" "rank 1's process never ran snug (or its pid is unknown)"

# A usage error is the same on every rank: exit 2, said once.
run_mpi "a usage error under mpirun is reported once" 2 train --frobnicate
expect_rc 2
[ "$(grep -c "unknown flag '--frobnicate'" "$ERR")" -eq 1 ] || fail "the usage error is not printed exactly once"

run_mpi "--help under mpirun is printed once" 2 train --help
expect_rc 0
[ "$(grep -c '^usage: snug train' "$OUT")" -eq 1 ] || fail "the help is not printed exactly once"

finish_tests
