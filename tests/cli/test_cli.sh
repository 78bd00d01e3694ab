#!/usr/bin/env bash
# End-to-end tests of the `snug` command: usage errors (exit 2), runtime errors (exit 1) and, when DATA_DIR holds
# the real MNIST files, short real training runs. Every case checks the exit status and a key phrase.
#
# usage: tests/cli/test_cli.sh SNUG_BINARY DATA_DIR
set -u

# shellcheck source=tests/cli/harness.sh
. "$(dirname "$0")/harness.sh"

# ---------------------------------------------------------------------------------------------------------
# help and version
run "no arguments: usage on stderr, exit 2"
expect_rc 2
expect_in "$ERR" "usage: snug <command>"
expect_empty "$OUT"

run "--help" --help
expect_rc 0
expect_in "$OUT" "train"
expect_in "$OUT" "--micro-batch"
expect_empty "$ERR"

run "help" help
expect_rc 0
expect_in "$OUT" "commands:"

run "train --help lists every flag group and key flags" train --help
expect_rc 0
for phrase in --micro-batch --mem --checkpoint every:N --epochs --max-steps --drop-last --shuffle --seed --optim \
    --lr --momentum --nesterov --weight-decay --beta1 --beta2 --eps --schedule --warmup --min-lr-ratio \
    --lr-scaling --ref-batch --clip --threads --rank-timeout --log-every --progress --data-dir mlp cnn; do
    expect_in "$OUT" "$phrase"
done
expect_empty "$ERR"

run "help train" help train
expect_rc 0
expect_in "$OUT" "--micro-batch"

run "--help wins over other flags" train --batch 32 --help
expect_rc 0
expect_in "$OUT" "usage: snug train"

run "--version" --version
expect_rc 0
grep -qE '^snug [0-9]+\.[0-9]+\.[0-9]+$' "$OUT" || fail "stdout is not 'snug X.Y.Z'"

# ---------------------------------------------------------------------------------------------------------
# usage errors: exit 2
usage_error "unknown command" "unknown command 'frobnicate'" frobnicate
usage_error "help for an unknown command" "unknown command 'frobnicate'" help frobnicate
usage_error "unknown top-level option" "unknown option '--frobnicate'" --frobnicate
usage_error "unknown flag" "unknown flag '--frobnicate'" train --frobnicate 3
usage_error "unknown flag in = form" "unknown flag '--frobnicate'" train --frobnicate=3
usage_error "stray argument" "unexpected argument 'mnist'" train mnist
usage_error "missing value" "--batch needs a value" train --batch
usage_error "missing value after another flag" "--lr needs a value" train --batch 32 --lr
usage_error "missing value before another flag" "--batch needs a value" train --batch --lr 0.1
usage_error "--batch 0" "--batch must be a whole number >= 1, got '0'" train --batch 0
usage_error "--batch -5" "--batch must be a whole number >= 1, got '-5'" train --batch -5
usage_error "--batch=abc" "--batch must be a whole number >= 1, got 'abc'" train --batch=abc
usage_error "--batch 12abc (trailing garbage)" "got '12abc'" train --batch 12abc
usage_error "--batch with a leading blank" "--batch must be" train --batch " 12"
usage_error "--batch overflow" "--batch must be" train --batch 99999999999999999999999
usage_error "--batch empty" "--batch must be" train --batch=
usage_error "--micro-batch 0" "--micro-batch must be a whole number >= 1" train --micro-batch 0
usage_error "--micro-batch > --batch" "--micro-batch 65 is larger than --batch 64" train --micro-batch 65
usage_error "--micro-batch > --batch (given first)" "--micro-batch 40 is larger than --batch 32" \
    train --micro-batch 40 --batch 32
usage_error "--mem 0" "--mem" train --mem 0
usage_error "--mem 12XB" "--mem" train --mem 12XB
usage_error "--mem -1MiB" "--mem" train --mem -1MiB
usage_error "--mem 1.5 (a fraction without a unit)" "--mem: bad size '1.5': a byte count is a whole number" \
    train --mem 1.5
usage_error "--mem 1.5 (plan)" "give a unit for a fraction (1.5MiB, 1.5GiB)" plan --model cnn --mem 1.5
usage_error "--mem 0x1p30 (hexadecimal)" "--mem: bad size '0x1p30'" train --mem 0x1p30
usage_error "--lr abc" "--lr must be a number > 0, got 'abc'" train --lr abc
usage_error "--lr -1" "--lr must be a number > 0, got '-1'" train --lr -1
usage_error "--lr 0" "--lr must be a number > 0" train --lr 0
usage_error "--lr nan" "--lr must be" train --lr nan
usage_error "--lr inf" "--lr must be" train --lr inf
usage_error "--lr 1e999 (overflow)" "--lr: '1e999' is out of range" train --lr 1e999
usage_error "--lr 1e39 (beyond float)" "--lr: '1e39' is out of range" train --lr 1e39
usage_error "--momentum 1" "--momentum must be a number >= 0 and < 1" train --momentum 1
usage_error "--beta2 -0.5" "--beta2 must be" train --beta2 -0.5
usage_error "--eps 0" "--eps must be a number > 0" train --eps 0
usage_error "--clip -1" "--clip must be a number >= 0" train --clip -1
usage_error "--min-lr-ratio 2" "--min-lr-ratio must be" train --min-lr-ratio 2
usage_error "--optim foo" "--optim must be one of sgd, adamw, got 'foo'" train --optim foo
usage_error "--schedule linear" "--schedule must be one of constant, cosine" train --schedule linear
usage_error "--shuffle maybe" "--shuffle must be one of on, off" train --shuffle maybe
usage_error "--progress sometimes" "--progress must be one of auto, on, off" train --progress sometimes
usage_error "--lr-scaling sqrt" "--lr-scaling must be one of none, linear" train --lr-scaling sqrt
usage_error "--epochs 0" "--epochs must be a whole number >= 1, got '0'" train --epochs 0
usage_error "--max-steps -1" "--max-steps must be a whole number >= 0" train --max-steps -1
usage_error "--seed -1" "--seed must be a whole number >= 0" train --seed -1
usage_error "--threads 0" "--threads must be a whole number from 1 to 4096" train --threads 0
usage_error "--log-every 0" "--log-every must be" train --log-every 0
usage_error "--ref-batch 0" "--ref-batch must be" train --ref-batch 0
usage_error "--model unknown" "unknown model 'resnet9000'" train --model resnet9000
usage_error "--data unknown" "unknown data set 'cifar'" train --data cifar
usage_error "--data-dir empty" "--data-dir needs a non-empty value" train --data-dir=
usage_error "switch given a value" "--drop-last takes no value" train --drop-last=yes
usage_error "--warmup without a cosine schedule" "--warmup needs --schedule cosine" train --warmup 10
usage_error "--nesterov without momentum" "--nesterov needs" train --nesterov --momentum 0
usage_error "error points at the command's help" "(see 'snug train --help')" train --batch 0
usage_error "--rank-timeout 1h30" "--rank-timeout: bad duration '1h30'" train --rank-timeout 1h30
usage_error "--rank-timeout -3s" "--rank-timeout: bad duration '-3s'" train --rank-timeout=-3s

# ---------------------------------------------------------------------------------------------------------
# runtime errors: exit 1, one message, nothing on stdout. Planning follows opening the data set (a batch past it
# is planned for its size), so the budget cases take the synthetic shapes, which need no files: the budget
# fails before the data set is checked against the model.
run "budget too small for the micro-batch given" train --model cnn --mem 1KiB --micro-batch 64 --data shapes \
    --progress off
expect_rc 1
expect_in "$ERR" "out of memory"
expect_in "$ERR" "Raise --mem to at least"
expect_empty "$OUT"

run "budget too small for the micro-batch given, a smaller one fits" train --model cnn --mem 16MiB \
    --batch 256 --micro-batch 256 --data shapes --progress off
expect_rc 1
expect_in "$ERR" "The largest micro-batch that fits is"
expect_in "$ERR" "Try --micro-batch "
expect_in "$ERR" "or --micro-batch auto to let checkpointing keep it larger"
expect_empty "$OUT"
expect_in "$ERR" "budget"
expect_in "$ERR" "--micro-batch"
expect_empty "$OUT"

# With --mem and no --micro-batch snug chooses the micro-batch itself; when nothing fits it says what would.
run "budget too small for any micro-batch (auto fit)" train --model cnn --mem 1KiB --data shapes \
    --progress off
expect_rc 1
expect_in "$ERR" "out of memory"
expect_in "$ERR" "smallest budget"
expect_empty "$OUT"

run "budget too small, = form" train --model=mlp --mem=1KiB --data=shapes
expect_rc 1
expect_in "$ERR" "out of memory"
expect_empty "$OUT"

# Each optimizer's own learning rate unless --lr is given: SGD's 0.05 would make AdamW diverge.
ADAM_RUN=(train --model unet --data shapes --train-samples 2 --batch 2 --max-steps 1 --progress off --evaluate off)
run "--optim adamw without --lr: AdamW's default learning rate" "${ADAM_RUN[@]}" --optim adamw
expect_rc 0
expect_in "$OUT" "optimizer adamw: lr 0.001,"
run "--optim adamw with --lr: the rate given" "${ADAM_RUN[@]}" --optim adamw --lr 0.02
expect_rc 0
expect_in "$OUT" "optimizer adamw: lr 0.02,"
run "--lr before --optim adamw: still the rate given" "${ADAM_RUN[@]}" --lr 0.05 --optim adamw
expect_rc 0
expect_in "$OUT" "optimizer adamw: lr 0.05,"
run "sgd without --lr: SGD's default learning rate" "${ADAM_RUN[@]}"
expect_rc 0
expect_in "$OUT" "optimizer sgd: lr 0.05,"

# Plans larger than this machine: its memory and swap from /proc/meminfo, doubled, so that no plan of that size
# can be reserved here (nor, alone, any of its largest blocks: a build without the check fails to allocate instead
# of being killed while it zeroes). The budget is only a ceiling: --mem 1TiB does not make such a plan fit.
HOST_BYTES=$(awk '/^(MemTotal|SwapTotal):/ { kib += $2 } END { printf "%.0f", kib * 1024 }' /proc/meminfo)
# 784 inputs to `wide` linear outputs: 3136 bytes of parameters per output
WIDE=$(awk -v h="$HOST_BYTES" 'BEGIN { printf "%.0f", 2 * h / 3136 + 1 }')
printf '[model]\nname = wide\ninput = image 1 28 28\n[flat]\ntype = flatten\n[fc1]\ntype = linear\nout = %s\n[fc2]\ntype = linear\nout = 10\n[loss]\ntype = softmax_cross_entropy\n' \
    "$WIDE" >"$TMP/wide.ini"
run "parameters larger than the machine: refused before any memory is reserved, whatever --mem" \
    train --model "$TMP/wide.ini" --data shapes --batch 1 --mem 1TiB --progress off
expect_rc 1
expect_in "$ERR" "snug: out of memory: this plan needs "
expect_in "$ERR" "(params "
expect_in "$ERR" "more than the "
expect_in "$ERR" "no smaller micro-batch or checkpointing lowers them: train a smaller model"
expect_not_in "$ERR" "Try --mem"
expect_empty "$OUT"

run "snug plan plans it, and says that training would stop" plan --model "$TMP/wide.ini" --batch 1
expect_rc 0
expect_in "$OUT" "machine: snug train would stop before its first step: out of memory: this plan needs"

MISSING=$TMP/no-such-dir
run "missing data directory" train --model mlp --data-dir "$MISSING" --progress off
expect_rc 1
expect_in "$ERR" "$MISSING"
expect_in "$ERR" "make data"
expect_empty "$OUT"

run_env "SNUG_DATA_DIR is the default data directory" "SNUG_DATA_DIR=$MISSING" -- train --model mlp
expect_rc 1
expect_in "$ERR" "$MISSING"
expect_empty "$OUT"

run_env "SNUG_GEMM with a value snug does not know: usage error" "SNUG_GEMM=openblas" -- plan --model mlp
expect_rc 2
expect_in "$ERR" "SNUG_GEMM='openblas'"
expect_in "$ERR" "blas (the BLAS)"
expect_empty "$OUT"

run_env "SNUG_GEMM=blas is accepted" "SNUG_GEMM=blas" -- plan --model mlp --batch 8
expect_rc 0
expect_empty "$ERR"

mkdir -p "$TMP/empty"
run "data directory without the MNIST files" train --model mlp --data-dir "$TMP/empty"
expect_rc 1
expect_in "$ERR" "$TMP/empty"
expect_in "$ERR" "make data"
# The advice is given once: the library says what is missing, the CLI how to get it.
[ "$(grep -o 'make data' "$ERR" | wc -l)" = 1 ] || fail "the advice to run make data is repeated: $ERR"
expect_empty "$OUT"

# ---------------------------------------------------------------------------------------------------------
# The BLAS kernel fix: a preloaded shim makes OpenBLAS report the generic Prescott kernel unless
# OPENBLAS_CORETYPE is set, and logs every process start; snug must re-execute itself once with a better core.
cpu_has_avx2() { grep -qwE 'avx2|avx512f' /proc/cpuinfo 2>/dev/null; }
CC_BIN=$(command -v "${CC:-cc}" || command -v gcc || true)
SHIM=$TMP/fake_corename.so
build_shim() {
    cat >"$TMP/fake_corename.c" <<'EOF'
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
static const char *env(const char *name) { return getenv(name) ? getenv(name) : "unset"; }
__attribute__((constructor)) static void started(void) {
    fprintf(stderr, "[shim] start OPENBLAS_CORETYPE=%s SNUG_NO_REEXEC=%s\n", env("OPENBLAS_CORETYPE"),
            env("SNUG_NO_REEXEC"));
}
char *openblas_get_corename(void) {
    char *(*real)(void) = (char *(*)(void))dlsym(RTLD_NEXT, "openblas_get_corename");
    return getenv("OPENBLAS_CORETYPE") && real ? real() : (char *)"Prescott";
}
EOF
    "$CC_BIN" -shared -fPIC -o "$SHIM" "$TMP/fake_corename.c" -ldl 2>"$TMP/shim.log"
}
SHIM_ASAN="ASAN_OPTIONS=${ASAN_OPTIONS:-}:verify_asan_link_order=0"
if cpu_has_avx2 && [ -n "$CC_BIN" ] && build_shim; then
    run_env "slow BLAS kernel: snug re-executes itself with OPENBLAS_CORETYPE" -u OPENBLAS_CORETYPE \
        -u SNUG_NO_REEXEC "LD_PRELOAD=$SHIM" "$SHIM_ASAN" -- train --model mlp --mem 1KiB --data shapes
    expect_rc 1
    [ "$(grep -c '^\[shim\] start' "$ERR")" -eq 2 ] || fail "expected two process starts (one re-exec)"
    expect_in "$ERR" "[shim] start OPENBLAS_CORETYPE=unset SNUG_NO_REEXEC=unset"
    grep -qE '^\[shim\] start OPENBLAS_CORETYPE=(SkylakeX|Haswell) SNUG_NO_REEXEC=1$' "$ERR" ||
        fail "the second start lacks OPENBLAS_CORETYPE=SkylakeX or Haswell and SNUG_NO_REEXEC=1"
    expect_in "$ERR" "out of memory"
    expect_empty "$OUT"

    run_env "slow BLAS kernel with SNUG_NO_REEXEC: no re-exec" -u OPENBLAS_CORETYPE "LD_PRELOAD=$SHIM" \
        "$SHIM_ASAN" "SNUG_NO_REEXEC=1" -- train --model mlp --mem 1KiB --data shapes
    expect_rc 1
    [ "$(grep -c '^\[shim\] start' "$ERR")" -eq 1 ] || fail "expected one process start (no re-exec)"
    expect_in "$ERR" "out of memory"

    run_env "OPENBLAS_CORETYPE set by the user: no re-exec" -u SNUG_NO_REEXEC "LD_PRELOAD=$SHIM" \
        "$SHIM_ASAN" "OPENBLAS_CORETYPE=Prescott" -- train --model mlp --mem 1KiB --data shapes
    expect_rc 1
    [ "$(grep -c '^\[shim\] start' "$ERR")" -eq 1 ] || fail "expected one process start (no re-exec)"
    expect_in "$ERR" "out of memory"
else
    echo "skip: no AVX2 CPU or no C compiler: the BLAS kernel re-exec cases are skipped"
fi


# accuracy_at_least FILE PERCENT: the "test accuracy X%" line of FILE shows at least PERCENT.
accuracy_at_least() {
    local acc
    acc=$(sed -n 's/^test accuracy \([0-9.]*\)% (loss [0-9.]*) on 10,000 images$/\1/p' "$1")
    if [ -z "$acc" ]; then
        fail "no 'test accuracy X% (loss Y) on 10,000 images' line"
    elif ! awk -v a="$acc" -v m="$2" 'BEGIN { exit !(a >= m) }'; then
        fail "test accuracy $acc% is below $2% (chance is 10%)"
    fi
}

expect_memory_report() {
    for phrase in "memory by category:" params grads optim activations workspace data total peak budget; do
        expect_in "$OUT" "$phrase"
    done
}

if have_mnist; then
    TRUNC=$TMP/truncated
    mkdir -p "$TRUNC"
    head -c 1000000 "$DATA/train-images-idx3-ubyte" >"$TRUNC/train-images-idx3-ubyte"
    cp "$DATA/train-labels-idx1-ubyte" "$DATA/t10k-images-idx3-ubyte" "$DATA/t10k-labels-idx1-ubyte" "$TRUNC/"
    run "truncated images file" train --model mlp --data-dir "$TRUNC" --progress off
    expect_rc 1
    expect_in "$ERR" "truncated"
    expect_in "$ERR" "train-images-idx3-ubyte"
    expect_empty "$OUT"

    # A 3x3 convolution to `channels` planes of 28x28 keeps about 3136 bytes per channel and sample: at the 60,000
    # samples of MNIST in one pass, twice the machine's memory; the parameters are a few KiB.
    CHANNELS=$(awk -v h="$HOST_BYTES" 'BEGIN { printf "%.0f", 2 * h / (3136 * 60000) + 1 }')
    printf '[model]\nname = convwide\ninput = image 1 28 28\n[conv]\ntype = conv2d\nout_channels = %s\nkernel = 3\npadding = 1\n[pool]\ntype = global_avgpool\n[fc]\ntype = linear\nout = 10\n[loss]\ntype = softmax_cross_entropy\n' \
        "$CHANNELS" >"$TMP/convwide.ini"
    run "activations larger than the machine under --mem 1TiB: refused, a smaller budget advised" \
        train --model "$TMP/convwide.ini" --batch 60000 --mem 1TiB --progress off --data-dir "$DATA"
    expect_rc 1
    expect_in "$ERR" "snug: out of memory: this plan needs "
    expect_in "$ERR" "at micro-batch 60000, shrinks with a smaller micro-batch or checkpointing"
    expect_in "$ERR" "Try --mem "
    expect_in "$ERR" "--micro-batch auto then picks the micro-batch and checkpointing that fit"
    expect_empty "$OUT"

    run "a budget far beyond the machine is only a ceiling: a plan that needs little runs" train --model mlp \
        --mem 1TiB --max-steps 2 --evaluate off --progress off --data-dir "$DATA"
    expect_rc 0
    expect_in "$OUT" "budget           1.00 TiB"

    run "real run: mlp, batch 32 in micro-batches of 8" train --model mlp --batch=32 --micro-batch 8 \
        --max-steps 20 --progress off --log-every 5 --data-dir "$DATA"
    expect_rc 0
    expect_in "$OUT" "snug "
    expect_in "$OUT" "| SIMD "
    expect_in "$OUT" "| BLAS "
    expect_in "$OUT" "model mlp:"
    expect_in "$OUT" "parameters"
    expect_in "$OUT" "FLOP per sample"
    expect_in "$OUT" "batch 32 = 4 micro-batches of 8"
    expect_in "$OUT" "steps per epoch"
    expect_in "$OUT" "memory reserved before the first step:"
    [ "$(grep -c '^epoch 1/1  step ' "$OUT")" -eq 4 ] || fail "expected 4 log lines (every 5 of 20 steps)"
    expect_in "$OUT" "step 20/20"
    expect_in "$OUT" "elapsed"
    accuracy_at_least "$OUT" 20
    expect_in "$OUT" "samples/s"
    expect_memory_report
    expect_empty "$ERR"

    run "real run: cnn, batch 20 in micro-batches of 6 (uneven)" train --model cnn --batch 20 --micro-batch 6 \
        --max-steps 20 --progress off --data-dir "$DATA"
    expect_rc 0
    expect_in "$OUT" "model cnn:"
    expect_in "$OUT" "batch 20 = 4 micro-batches of 6 (the last one 2)"
    expect_in "$OUT" "step 20/20"
    accuracy_at_least "$OUT" 20
    expect_memory_report
    expect_empty "$ERR"

    # The header names what multiplies the linear layers, and SNUG_GEMM=blas hands them to the BLAS.
    if grep -qw avx512f /proc/cpuinfo 2>/dev/null; then
        expect_in "$OUT" "| linear layers snug fp32"
    else
        expect_in "$OUT" "| linear layers blas"
    fi
    run_env "real run: SNUG_GEMM=blas sends the linear layers to the BLAS" "SNUG_GEMM=blas" -- train --model mlp \
        --batch 32 --max-steps 3 --progress off --evaluate off --data-dir "$DATA"
    expect_rc 0
    expect_in "$OUT" "| linear layers blas"
    expect_in "$OUT" "step 3/3"

    run "non-finite loss: skipped steps reported, then exit 1" train --model mlp --batch 32 --lr 1e30 \
        --max-steps 10 --progress off --data-dir "$DATA"
    expect_rc 1
    expect_in "$ERR" "snug: skipped a batch after optimizer step"
    expect_in "$ERR" "not finite"
    expect_in "$ERR" "(--lr lower, --clip 1.0)"
    expect_in "$ERR" "is in the output of layer 'fc"
    [ "$(grep -c '^snug: skipped a batch' "$ERR")" -ge 2 ] || fail "expected one stderr line per skipped step"

    # OPENBLAS_CORETYPE=Prescott forces the generic kernel, which the header must flag on an AVX2 CPU.
    run_env "real run: live progress line, adamw, cosine, budget, generic BLAS kernel" \
        "OPENBLAS_CORETYPE=Prescott" -- train --model mlp --batch 16 --max-steps 3 --progress on \
        --optim adamw --lr 0.001 --schedule cosine --warmup 1 --mem 64MiB --threads 1 --data-dir "$DATA"
    expect_rc 0
    expect_in "$OUT" "kernel Prescott"
    if cpu_has_avx2; then expect_in "$OUT" "WARNING: OpenBLAS fell back"; fi
    expect_in "$OUT" $'\r'
    expect_in "$OUT" $'\033[K'
    expect_in "$OUT" "step 3/3"
    expect_in "$OUT" "/64.0 MiB (peak"
    expect_in "$OUT" "optimizer adamw"
    expect_in "$OUT" "test accuracy"
    expect_in "$OUT" "64.00 MiB"
    expect_empty "$ERR"
else
    echo "skip: no real MNIST in '$DATA' (make data): the truncated-file case and the real runs are skipped"
fi

finish_tests
