#!/usr/bin/env bash
# bench/compare.py's judgement, on made-up results: `compare.py merge` with snug's and PyTorch's rows and the
# duels' pairs (snug and PyTorch taking turns) judges the full-batch must-shows on the duels' medians, lists
# the separate processes beside, and falls back to the separate processes without duels. No benchmark runs:
# the figures are written here, so every verdict is known in advance.
#
# usage: tests/cli/test_compare.sh SNUG_BINARY DATA_DIR
set -u

# shellcheck source=tests/cli/harness.sh
. "$(dirname "$0")/harness.sh"

COMPARE="$(cd "$(dirname "$0")/../.." && pwd)/bench/compare.py"
WORKLOADS="mlp cnn resnet20 unet gpt"

# rows FRAMEWORK SAMPLES_PER_S...: one full-batch CSV row per workload, in WORKLOADS order, with the columns
# compare.py reads (snug-bench --csv and pytorch_bench.py write more).
rows() {
    local who=$1
    shift
    echo "framework,workload,variant,batch,micro_batch,params,repeats,ms_per_step,samples_per_s,gflops,sgemm_gflops,sgemm_fraction,planned_total_bytes,planned_activation_bytes,rss_before_bytes,rss_peak_bytes,activation_rss_bytes,config,machine"
    for w in $WORKLOADS; do
        echo "$who,$w,full,8,8,1000,2,10.0,$1,100.0,200.0,0.80,1048576,524288,2097152,4194304,1048576,\"torch 1.13, contiguous, mkldnn\",\"test machine\""
        shift
    done
}

# duel FILE RATIO...: four pairs per workload (snug 10 ms a step, PyTorch 10 x the ratio), the given ratio twice
# and 0.1 either side of it: its median is the ratio.
duel() {
    local out=$1
    shift
    echo "workload,variant,round,pair,first,snug_steps,snug_ms_per_step,torch_steps,torch_ms_per_step,ratio,caches" >"$out"
    for w in $WORKLOADS; do
        awk -v w="$w" -v r="$1" 'BEGIN {
            split(r " " r " " r - 0.1 " " r + 0.1, x, " ")
            for (i = 1; i <= 4; i++) printf "%s,full,0,%d,snug,10,10.0,10,%.4f,%.4f,shared\n", w, i - 1, 10 * x[i], x[i]
        }' >>"$out"
        shift
    done
}

# merge NAME [--duel FILE]: compare.py merge of the two row files into $TMP/out, its Markdown kept as $OUT.
merge() {
    finish_case
    CASE=$1
    shift
    CASE_OK=1
    rm -rf "$TMP/out"
    python3 "$COMPARE" merge "$TMP/snug.csv" "$TMP/torch.csv" --out "$TMP/out" "$@" >"$ERR.log" 2>"$ERR"
    RC=$?
    cp "$TMP/out/workloads.md" "$OUT" 2>/dev/null || : >"$OUT"
}

if ! command -v python3 >/dev/null; then
    finish_case
    CASE="python3 is installed (scripts/install-deps.sh)"
    CASE_OK=1
    fail "no python3 on PATH"
    finish_tests
    exit
fi

# separate processes: the mlp at 1.05 of PyTorch, every other workload 2.0
rows snug 1050 2000 2000 2000 2000 >"$TMP/snug.csv"
rows pytorch 1000 1000 1000 1000 1000 >"$TMP/torch.csv"

duel "$TMP/duel_ok.csv" 1.2 2.0 1.6 3.0 1.3
merge "duels judge the full batch: the mlp's 1.05 from separate processes is listed, not judged" \
    --duel "$TMP/duel_ok.csv"
expect_rc 0
expect_in "$OUT" "## snug against PyTorch, taking turns on the same cores"
expect_in "$OUT" "| mlp | full | 4 | 10.0 | 12.0 | 1.200 | 1.100 | 1.300 | 1.200 (4) | - |"
# geometric mean of 1.2, 2.0, 1.6, 3.0, 1.3: 1.72
expect_in "$OUT" "over the five workloads 1.72 (>= 1.5), lowest 1.20 (mlp; >= 1.1): **met**"
expect_in "$OUT" "full batch from separate processes (the median process of each framework; mlp 1.05, cnn 2.00"
expect_in "$OUT" "lowest 1.05 (mlp; >= 1.1)"
[ -f "$TMP/out/workloads_duel.csv" ] || fail "no workloads_duel.csv written"

duel "$TMP/duel_low.csv" 1.05 2.0 1.6 3.0 1.3
merge "a duel median below 1.1 is not met" --duel "$TMP/duel_low.csv"
expect_rc 0
expect_in "$OUT" "over the five workloads 1.67 (>= 1.5), lowest 1.05 (mlp; >= 1.1): **not met**"

duel "$TMP/duel_gm.csv" 1.2 1.3 1.3 1.4 1.3
merge "a geometric mean below 1.5 is not met" --duel "$TMP/duel_gm.csv"
expect_rc 0
expect_in "$OUT" "over the five workloads 1.30 (>= 1.5), lowest 1.20 (mlp; >= 1.1): **not met**"

merge "without duels the separate processes are judged"
expect_rc 0
expect_not_in "$OUT" "## snug against PyTorch, taking turns"
expect_in "$OUT" "- full batch: geometric mean of snug/PyTorch samples/s over the five workloads 1.76 (>= 1.5), lowest 1.05 (mlp; >= 1.1): **not met**"

finish_tests
