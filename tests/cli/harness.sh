# The harness of the CLI test scripts (sourced, not run): arguments, a scratch folder, and the case helpers.
# Each case runs `snug` once and checks its exit status and output; a script ends with `finish_tests`.
#
# usage, in a script: . "$(dirname "$0")/harness.sh"   (the script's arguments: SNUG_BINARY DATA_DIR)
# shellcheck shell=bash

if [ $# -ne 2 ]; then
    echo "usage: $0 SNUG_BINARY DATA_DIR" >&2
    exit 2
fi
SNUG=$1
DATA=$2
if [ ! -x "$SNUG" ]; then
    echo "$(basename "$0" .sh): '$SNUG' is not an executable (build it first: make build)" >&2
    exit 2
fi

TMP=$(mktemp -d "${TMPDIR:-/tmp}/snug-cli.XXXXXX") || exit 2
trap 'rm -rf "$TMP"' EXIT
OUT=$TMP/stdout
ERR=$TMP/stderr
# The default data directory must not leak in from the caller's environment.
unset SNUG_DATA_DIR

# snug's own products (AVX-512 CPUs) give a sample the same bits however a batch is split and on any thread
# count, and make the regenerated inputs of linear layers possible; the BLAS they fall back to elsewhere
# promises neither, so the cases that rest on it are said to be skipped there.
own_products() { grep -qw avx512f /proc/cpuinfo 2>/dev/null; }

PASS=0
FAIL=0
CASE=""
CASE_OK=1
RC=0

# run NAME ARGS...: runs snug with ARGS, keeping stdout, stderr and the exit status for the checks that follow.
run() {
    finish_case
    CASE=$1
    shift
    CASE_OK=1
    "$SNUG" "$@" >"$OUT" 2>"$ERR"
    RC=$?
}

# run_env NAME [-u VAR]... VAR=VALUE... -- ARGS...: the same through env(1): -u VAR unsets (options first).
run_env() {
    finish_case
    CASE=$1
    shift
    local assigns=()
    while [ "$1" != "--" ]; do
        assigns+=("$1")
        shift
    done
    shift
    CASE_OK=1
    env "${assigns[@]}" "$SNUG" "$@" >"$OUT" 2>"$ERR"
    RC=$?
}

# run_python NAME ARGS...: python3 running the program on stdin with ARGS, checked like run's cases.
run_python() {
    finish_case
    CASE=$1
    shift
    CASE_OK=1
    python3 - "$@" >"$OUT" 2>"$ERR"
    RC=$?
}

fail() {
    if [ $CASE_OK -eq 1 ]; then
        echo "FAIL: $CASE"
    fi
    CASE_OK=0
    echo "      $*"
}

finish_case() {
    [ -z "$CASE" ] && return
    if [ $CASE_OK -eq 1 ]; then
        PASS=$((PASS + 1))
        echo "ok:   $CASE"
    else
        FAIL=$((FAIL + 1))
        echo "      --- stdout (head) ---"
        head -c 2000 "$OUT" | sed 's/^/      /'
        echo "      --- stderr (head) ---"
        head -c 2000 "$ERR" | sed 's/^/      /'
    fi
    CASE=""
}

expect_rc() {
    [ "$RC" -eq "$1" ] || fail "exit status $RC, expected $1"
}

# expect_in FILE PHRASE: FILE ($OUT or $ERR) contains PHRASE (fixed string).
expect_in() {
    grep -qF -- "$2" "$1" || fail "$(basename "$1") lacks '$2'"
}

expect_not_in() {
    if grep -qF -- "$2" "$1"; then fail "$(basename "$1") contains '$2'"; fi
}

expect_empty() {
    [ ! -s "$1" ] || fail "$(basename "$1") is not empty"
}

# A usage error: exit 2, one line naming the problem, the usage line, nothing on stdout.
usage_error() {
    local name=$1 phrase=$2
    shift 2
    run "$name" "$@"
    expect_rc 2
    expect_in "$ERR" "$phrase"
    expect_in "$ERR" "usage: snug"
    expect_empty "$OUT"
}

# The four MNIST files, the training images whole (the real runs need them; other cases do not).
have_mnist() {
    [ -f "$DATA/train-images-idx3-ubyte" ] && [ -f "$DATA/train-labels-idx1-ubyte" ] &&
        [ -f "$DATA/t10k-images-idx3-ubyte" ] && [ -f "$DATA/t10k-labels-idx1-ubyte" ] &&
        [ "$(stat -c %s "$DATA/train-images-idx3-ubyte")" -eq 47040016 ]
}

# Ends the last case, prints the tally; the script's exit status is the result.
finish_tests() {
    finish_case
    echo "$PASS passed, $FAIL failed"
    [ "$FAIL" -eq 0 ]
}
