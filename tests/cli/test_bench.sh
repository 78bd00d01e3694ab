#!/usr/bin/env bash
# End-to-end tests of the benchmark program snug-bench (built beside snug, in bench/): a short run of the
# smallest workload writes a well-formed CSV and Markdown table, and bad flags are usage errors. No timing is
# checked: the figures depend on the machine.
#
# usage: tests/cli/test_bench.sh SNUG_BINARY DATA_DIR
set -u

# shellcheck source=tests/cli/harness.sh
. "$(dirname "$0")/harness.sh"

# `snug bench` is no command: the usage error says where the benchmarks are
usage_error "snug bench points to snug-bench" "the benchmarks are a program of their own, snug-bench" bench \
    --workload mlp
usage_error "snug help bench points to snug-bench" "snug-bench" help bench

BENCH="$(dirname "$SNUG")/bench/snug-bench"
if [ ! -x "$BENCH" ]; then
    finish_case
    CASE="snug-bench is built beside snug"
    CASE_OK=1
    fail "no $BENCH: the benchmark program is built with the project"
    finish_tests
    exit 1
fi
# Every case below runs snug-bench: the harness runs $SNUG.
SNUG=$BENCH

run "snug-bench --help lists every flag" --help
expect_rc 0
for phrase in "usage: snug-bench" --workload resnet20 --variant micro1 --steps --repeats --threads --csv \
    --markdown --paired --turns --profile; do
    expect_in "$OUT" "$phrase"
done

CSV=$TMP/mlp.csv
MD=$TMP/mlp.md
run "bench mlp, 2 steps, 1 repeat, CSV and Markdown" --workload mlp --steps 2 --repeats 1 --warmup 1 \
    --threads 2 --sgemm-size 256 --csv "$CSV" --markdown "$MD"
expect_rc 0
expect_in "$OUT" "SGEMM"
expect_in "$OUT" "micro1"
# the CSV: the header, then one row per variant in order, every row as many fields as the header, the
# numbers positive where they must be
if [ -f "$CSV" ]; then
    awk -F, '
        NR == 1 { n = NF; if ($1 != "framework" || $2 != "workload" || $NF != "machine") bad = "header: " $0; next }
        {
            want[2] = "full"; want[3] = "cheap"; want[4] = "accum4"; want[5] = "sqrt"; want[6] = "micro1"
            if ($1 != "snug" || $2 != "mlp" || $3 != want[NR]) bad = "row " NR ": " $1 "," $2 "," $3
            # the machine field is quoted and holds commas: count the fields before it
            split($0, parts, ",\"")
            if (split(parts[1], f, ",") != n - 1) bad = "row " NR " has " length(f) " fields before the machine"
            if ($4 != 256) bad = "row " NR ": batch " $4
            if (!($11 > 0 && $12 > 0 && $14 > 0 && $15 > 0)) bad = "row " NR ": a time or rate is not positive"
            if (!($17 > 0 && $22 > 0)) bad = "row " NR ": planned bytes or peak RSS missing"
        }
        END { if (NR != 6) bad = bad " rows: " NR; if (bad) { print bad; exit 1 } }' "$CSV" >"$TMP/awk.log" ||
        fail "malformed CSV: $(cat "$TMP/awk.log")"
    # micro-batch per variant: 256, 256, 64, 256, 1
    [ "$(cut -d, -f5 "$CSV" | tail -n +2 | tr '\n' ' ')" = "256 256 64 256 1 " ] || fail "micro-batches: $(cut -d, -f5 "$CSV" | tr '\n' ' ')"
else
    fail "no CSV written"
fi
[ -f "$MD" ] && expect_in "$MD" "| mlp | micro1 |" || fail "no Markdown table"

run "bench one variant" --workload cnn --variant sqrt --steps 1 --repeats 1 --warmup 0 --sgemm-size 128
expect_rc 0
expect_in "$OUT" "cnn"
expect_not_in "$OUT" "accum4"

# --paired: each variant but full against full batch in one process; the CSV has its own columns, the median
# of the pairs' ratios lies between the lowest and the highest and is the median of the pair_ratios field
PCSV=$TMP/paired.csv
run "bench --paired, every variant of the mlp, 3 pairs of 1-step blocks" --workload mlp --paired --steps 1 \
    --repeats 3 --warmup 1 --threads 2 --csv "$PCSV" --markdown "$TMP/paired.md"
expect_rc 0
expect_in "$OUT" "ratio"
expect_not_in "$OUT" "SGEMM"
if [ -f "$PCSV" ]; then
    awk -F, '
        NR == 1 { if ($1 != "framework" || $12 != "ratio" || $15 != "pair_ratios" || $NF != "machine") bad = "header: " $0; next }
        {
            want[2] = "cheap"; want[3] = "accum4"; want[4] = "sqrt"; want[5] = "micro1"
            if ($1 != "snug" || $2 != "mlp" || $3 != want[NR]) bad = "row " NR ": " $1 "," $2 "," $3
            if ($7 != 3 || $8 != 1 || $9 != 1) bad = "row " NR ": pairs " $7 ", steps " $8 " and " $9
            if (!($10 > 0 && $11 > 0 && $12 > 0)) bad = "row " NR ": a time or the ratio is not positive"
            if (!($13 <= $12 && $12 <= $14)) bad = "row " NR ": ratio " $12 " outside " $13 " .. " $14
            if (split($15, r, " ") != 3) bad = "row " NR ": pair ratios \"" $15 "\""
            # the median of three: the one neither below both others nor above them
            lo = 0; hi = 0
            for (i = 1; i <= 3; i++) { if (r[i] + 0 < $12 - 1e-3) lo++; if (r[i] + 0 > $12 + 1e-3) hi++ }
            if (lo > 1 || hi > 1) bad = "row " NR ": ratio " $12 " is not the median of " $15
        }
        END { if (NR != 5) bad = bad " rows: " NR; if (bad) { print bad; exit 1 } }' "$PCSV" >"$TMP/awk.log" ||
        fail "malformed paired CSV: $(cat "$TMP/awk.log")"
else
    fail "no paired CSV written"
fi
[ -f "$TMP/paired.md" ] && expect_in "$TMP/paired.md" "| mlp | accum4 | 256 | 64 | 3 |" || fail "no paired Markdown"
# --profile: where the time goes, node by node, after the row; with --paired full batch's beside it
run "bench --profile lists the nodes and the parts" --workload mlp --variant accum4 --steps 1 --repeats 1 \
    --warmup 1 --threads 2 --sgemm-size 128 --profile
expect_rc 0
for phrase in "where the time goes: mlp accum4" "fc2 " "linear" "backward" "(update)" "(total)"; do
    expect_in "$OUT" "$phrase"
done
run "bench --paired --profile shows full batch beside" --workload mlp --variant accum4 --paired --steps 1 \
    --repeats 2 --warmup 1 --threads 2 --profile
expect_rc 0
expect_in "$OUT" "beside it full batch's"
expect_in "$OUT" "diff"
usage_error "paired needs a variant to compare" "--paired times a variant against full batch" --paired \
    --variant full

# --turns: the protocol bench/compare.py's duel speaks. "ready STEPS" once warm, then one "block STEPS SECONDS"
# line per "go", the end of input ends it (exit 0); any other line is a usage error after the blocks before it
printf 'go\ngo\ngo\n' >"$TMP/three_go"
run "bench --turns answers every go with a block" --workload mlp --variant accum4 --turns --steps 2 \
    --warmup 1 --threads 2 <"$TMP/three_go"
expect_rc 0
awk 'NR == 1 { if ($1 != "ready" || $2 != 2 || NF != 2) bad = "first line: " $0; next }
     { if ($1 != "block" || $2 != 2 || !($3 > 0) || NF != 3) bad = "line " NR ": " $0 }
     END { if (NR != 4) bad = bad " lines: " NR; if (bad) { print bad; exit 1 } }' "$OUT" >"$TMP/awk.log" ||
    fail "turns protocol: $(cat "$TMP/awk.log")"
printf 'go\nstop\ngo\n' >"$TMP/go_stop"
run "bench --turns: a line other than go is a usage error" --workload mlp --variant full --turns --steps 1 \
    --warmup 0 --threads 2 <"$TMP/go_stop"
expect_rc 2
expect_in "$ERR" 'expected "go" or the end of input, got "stop"'
[ "$(grep -c '^block ' "$OUT")" = 1 ] || fail "blocks before the bad line: $(grep -c '^block ' "$OUT")"
run "bench --turns with no input: ready, then done" --workload cnn --variant micro1 --turns --steps 1 \
    --warmup 0 </dev/null
expect_rc 0
expect_in "$OUT" "ready 1"
expect_not_in "$OUT" "block"
usage_error "turns needs one workload" "--turns times one trainer" --turns --variant full
usage_error "turns needs one variant" "--turns times one trainer" --turns --workload mlp
usage_error "turns writes no reports" "it takes no --paired, --profile, --csv or --markdown" --turns \
    --workload mlp --variant full --csv "$TMP/t.csv"

usage_error "unknown workload" "unknown workload 'vgg'" --workload vgg
usage_error "unknown variant" "--variant must be one of full, cheap, accum4, sqrt, micro1, all" --variant half
usage_error "steps not a number" "--steps must be a whole number" --steps x
usage_error "repeats zero" "--repeats must be a whole number from 1" --repeats 0
usage_error "threads negative" "--threads must be a whole number" --threads -1
usage_error "unknown flag" "unknown flag '--batch'" --batch 4
usage_error "missing value" "--csv needs a value" --csv
usage_error "stray argument" "unexpected argument 'mlp'" mlp
expect_in "$ERR" "usage: snug-bench"

run "CSV into a missing folder is a runtime error" --workload mlp --variant full --steps 1 --repeats 1 \
    --warmup 0 --sgemm-size 128 --csv "$TMP/no/such/dir/x.csv"
expect_rc 1
expect_in "$ERR" "snug-bench: "
expect_in "$ERR" "cannot create"

# bench_cache_pair (built beside snug with the benchmarks; compare.py's cache-state probe): a short measurement
# prints its round trip, bad arguments are usage errors (exit 2)
PROBE="$(dirname "$BENCH")/bench_cache_pair"
run_probe() {
    finish_case
    CASE=$1
    shift
    CASE_OK=1
    "$PROBE" "$@" >"$OUT" 2>"$ERR"
    RC=$?
}
if [ -x "$PROBE" ]; then
    run_probe "bench_cache_pair measures a round trip" 1000
    if [ "$(nproc)" -ge 2 ]; then
        expect_rc 0
        expect_in "$OUT" "round_trip_ns "
    else
        expect_rc 1
        expect_in "$ERR" "fewer than two processors"
    fi
    for bad in x 0 -5 "1 2"; do
        # shellcheck disable=SC2086 # "1 2" is two arguments on purpose
        run_probe "bench_cache_pair rejects '$bad'" $bad
        expect_rc 2
        expect_in "$ERR" "usage: bench_cache_pair"
    done
else
    finish_case
    CASE="bench_cache_pair is built beside snug"
    CASE_OK=1
    fail "no $PROBE: the benchmarks are built with the project"
fi

# bench_fma_peak (the FMA rate from registers, docs/performance.md's ceiling): one thread prints a positive rate
# and its vector width, then a vdpbf16ps line (width 32) exactly where the CPU has AVX512_BF16, then three AMX
# lines (the register peak, the tile loop with its loads, and with C's trips) exactly where Linux lists AMX-TILE and AMX-BF16 (it
# lists them only where it can grant their state); bad arguments are usage errors
PEAK="$(dirname "$BENCH")/bench_fma_peak"
PROBE=$PEAK
run_probe "bench_fma_peak measures one thread" 1
expect_rc 0
BF16_LINES=$(grep -c -w avx512_bf16 /proc/cpuinfo 2>/dev/null | awk '{ print ($1 > 0) }')
AMX_LINES=$(grep -m1 -w flags /proc/cpuinfo 2>/dev/null | grep -w amx_tile | grep -c -w amx_bf16)
awk -v bf16="${BF16_LINES:-0}" -v amx="${AMX_LINES:-0}" '
     NR == 1 { if (NF != 6 || $1 != "fma_peak_gflops" || !($2 > 0) || $4 != 1 || ($6 != 1 && $6 != 8 && $6 != 16)) bad = 1 }
     NR == 2 { if (NF != 6 || $1 != "bf16_peak_gflops" || !($2 > 0) || $4 != 1 || $6 != 32) bad = 1 }
     NR == 3 { if (NF != 4 || $1 != "amx_bf16_peak_gflops" || !($2 > 0) || $4 != 1) bad = 1 }
     NR == 4 { if (NF != 4 || $1 != "amx_bf16_loop_gflops" || !($2 > 0) || $4 != 1) bad = 1 }
     NR == 5 { if (NF != 4 || $1 != "amx_bf16_block_gflops" || !($2 > 0) || $4 != 1) bad = 1 }
     END { exit bad || NR != 1 + bf16 + 3 * (bf16 && amx) }' "$OUT" || fail "output: $(cat "$OUT")"
for bad in x 0 -1 5000 "1 2"; do
    # shellcheck disable=SC2086 # "1 2" is two arguments on purpose
    run_probe "bench_fma_peak rejects '$bad'" $bad
    expect_rc 2
    expect_in "$ERR" "usage: bench_fma_peak"
done

finish_tests
