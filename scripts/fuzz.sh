#!/usr/bin/env bash
# Builds the fuzz targets of tests/fuzz/ with Clang 16 and libFuzzer (ASan + UBSan, in build-fuzz/) and runs each
# in turn for SECONDS, then prints one line per target: how long it ran, the runs, executions per second, the
# coverage (libFuzzer's `cov:`, instrumented edges reached), its timeout and what it found.
#   usage: scripts/fuzz.sh [SECONDS] [TARGET...]      (make fuzz FUZZ_SECONDS=60 FUZZ_TARGETS='...')
# A target starts from its committed corpus (tests/fuzz/NAME/corpus/, never written to) plus the inputs earlier
# runs found (build-fuzz/corpus/NAME/, where new ones go), with its dictionary tests/fuzz/NAME/NAME.dict. An input
# that crashes, leaks, trips a sanitizer or runs past the target's timeout (the table below) is kept in
# build-fuzz/crashes/NAME/ (emptied when the target starts) and fails the run; so does a target that does not
# build, after the others have run. Replay an input with: build-fuzz/tests/fuzz/fuzz_NAME FILE.
# Logs: build-fuzz/logs/NAME.log (the run) and NAME.build.log (the build).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

seconds=${1:-60}
shift || true
[[ $seconds =~ ^[0-9]+$ && $seconds -gt 0 ]] || { echo "fuzz: SECONDS must be a whole number > 0, got '$seconds'" >&2; exit 2; }
build=build-fuzz
jobs=${JOBS:-2}

scripts/install-deps.sh --fuzz
CC=clang-16 cmake -S . -B "$build" -DSNUG_FUZZ=ON -DBUILD_TESTING=OFF -DSNUG_WITH_MPI=OFF \
    -DCMAKE_BUILD_TYPE=Debug -DCMAKE_C_FLAGS_DEBUG="-O1 -g" >/dev/null

if (($#)); then
    targets=("$@")
else
    targets=()
    for src in tests/fuzz/fuzz_*.c; do
        name=${src##*/fuzz_}
        targets+=("${name%.c}")
    done
fi
for t in "${targets[@]}"; do
    [[ -f tests/fuzz/fuzz_$t.c ]] || { echo "fuzz: no target '$t' (tests/fuzz/fuzz_$t.c)" >&2; exit 2; }
done

# Seconds one input may take under ASan and UBSan before it counts as a finding. model_file plans what a file
# declares three ways, and the shipped models/*.ini of its corpus (resnet50, resmlp) take about a second of CPU
# there, and libFuzzer counts wall-clock time, which a shared machine stretches;
# the readers that train on what they read (weights, state) and the image decoders get 2 s; the rest 1 s.
declare -A timeout_of=([model_file]=5 [weights]=2 [state]=2 [png]=2 [jpeg]=2)

# Stack traces with function names need an llvm-symbolizer (package llvm-16, which Debian's clang-16 pulls in);
# any version serves. Without one, `addr2line -f -e BINARY ADDRESS` names the frames of a report.
for sym in /usr/lib/llvm-16/bin/llvm-symbolizer /usr/lib/llvm-*/bin/llvm-symbolizer; do
    [[ -x $sym ]] && { export ASAN_SYMBOLIZER_PATH=$sym; break; }
done

mkdir -p "$build/logs"
summary=()
failed=0
for t in "${targets[@]}"; do
    timeout=${timeout_of[$t]:-1}
    # One target at a time, so that a target that does not build is reported and the others still run.
    if ! cmake --build "$build" -j"$jobs" --target "fuzz_$t" >"$build/logs/$t.build.log" 2>&1; then
        failed=1
        echo "== fuzz $t: does not build (log $build/logs/$t.build.log)"
        grep -E 'error|undefined reference' "$build/logs/$t.build.log" | head -5 || true
        summary+=("$(printf '%-12s %9s %10s %10s %10s %8s %8s' "$t" - - - - "${timeout}s" 'no build')")
        continue
    fi
    corpus=$build/corpus/$t crashes=$build/crashes/$t log=$build/logs/$t.log
    rm -rf "$crashes"  # what an earlier run found stays in its log; this run reports its own
    mkdir -p "$corpus" "$crashes"
    dict=()
    [[ -f tests/fuzz/$t/$t.dict ]] && dict=(-dict="tests/fuzz/$t/$t.dict")
    echo "== fuzz $t: $seconds s, timeout ${timeout} s (log $log)"
    status=0
    # One process, one input at a time: the machine's other cores stay free, and the figures are one core's.
    ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
        "$build/tests/fuzz/fuzz_$t" -max_total_time="$seconds" -timeout="$timeout" -print_final_stats=1 \
        -artifact_prefix="$crashes/" "${dict[@]}" "$corpus" "tests/fuzz/$t/corpus" >"$log" 2>&1 || status=$?
    # libFuzzer's last status line: "#RUNS DONE cov: E ft: F corp: N/S lim: L exec/s: X rss: M"
    last=$(grep -E '^#[0-9]+.*cov: ' "$log" | tail -1 || true)
    runs=$(sed -nE 's/^#([0-9]+).*/\1/p' <<<"$last")
    cov=$(sed -nE 's/.* cov: ([0-9]+).*/\1/p' <<<"$last")
    execs=$(sed -nE 's/^stat::average_exec_per_sec: *([0-9]+).*/\1/p' "$log" | tail -1)
    took=$(sed -nE 's/^Done [0-9]+ runs in ([0-9]+) second.*/\1/p' "$log" | tail -1)
    found=$(find "$crashes" -type f | wc -l)
    if ((status != 0 || found > 0)); then
        failed=1
        echo "== fuzz $t: FAILED (exit $status, $found input(s) in $crashes/)"
        grep -E '^(==[0-9]+==ERROR|SUMMARY|.*runtime error)' "$log" | head -5 || true
    fi
    summary+=("$(printf '%-12s %8ss %10s %10s %10s %8s %8s' "$t" "${took:-?}" "${runs:-?}" "${execs:-?}" "${cov:-?}" \
        "${timeout}s" "$found")")
done

echo
printf '%-12s %9s %10s %10s %10s %8s %8s\n' target ran runs exec/s 'cov edges' timeout found
printf '%s\n' "${summary[@]}"
if ((failed)); then
    echo "== make fuzz: FAILED: a target did not build (its build log), or reproduce with build-fuzz/tests/fuzz/fuzz_TARGET FILE"
    exit 1
fi
echo "== make fuzz: no crash, leak, sanitizer report or timeout"
