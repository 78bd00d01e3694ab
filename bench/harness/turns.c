/* `snug-bench --turns`: one workload's trainer, timed in blocks when asked, so that another framework's process
 * can take turns with it on the same cores (bench/compare.py's duel with bench/pytorch_bench.py --turns).
 * Separate processes a minute apart can see two different machines on a small virtual host (its vCPUs move
 * between cores that share a cache and cores on two chiplets, and a step can take half as long again in the
 * second state: docs/performance.md, "Cache state"); blocks of a second or less, alternating between two live
 * processes, compare both frameworks in the same state. The protocol, one line each way:
 *   built and warmed up   ->  "ready <timed steps per block>"
 *   "go"                  ->  one untimed step (the other process has just been through the caches), then the
 *                             block's timed steps: "block <steps> <seconds>"
 *   end of input          ->  exit 0
 * Any other line ends the process with a message and exit status 2, as a usage error would. */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <string.h>

#include "bench.h"
#include "cli/errors.h"
#include "core/error.h"

/* "go\n" and a little room to recognise longer garbage as garbage. */
#define TURN_LINE 64

/* The next request: 1 "go", 0 end of input, -1 anything else (what is left in line). */
static int next_request(char *line, size_t len) {
    if (!fgets(line, (int)len, stdin)) return 0;
    line[strcspn(line, "\r\n")] = '\0';
    return strcmp(line, "go") == 0 ? 1 : -1;
}

static snug_status serve(bench_case *c, int steps, int *bad, snug_error *err) {
    char line[TURN_LINE];
    int req;
    printf("ready %d\n", steps);
    fflush(stdout);
    while ((req = next_request(line, sizeof line)) == 1) {
        double seconds = 0;
        snug_status st = bench_case_block(c, steps, &seconds, err);
        if (st != SNUG_OK) return st;
        printf("block %d %.9f\n", steps, seconds);
        fflush(stdout);
    }
    if (req < 0) {
        fprintf(stderr, "snug-bench: --turns: expected \"go\" or the end of input, got \"%.40s\"\n", line);
        *bad = 1;
    }
    return SNUG_OK;
}

int bench_turns(const bench_options *opt, const bench_workload *w, bench_variant v) {
    bench_case c = {.w = w, .v = v, .precision = (snug_precision)opt->precision};
    bench_result figures;
    snug_error err = {0};
    int steps = 0, bad = 0;
    snug_status st = bench_case_open(&c, &figures, &err);
    if (st == SNUG_OK)
        st = bench_case_warm_up(&c, opt->warmup, opt->steps, BENCH_BLOCK_SECONDS, BENCH_BLOCK_MIN_STEPS, &steps,
                                &err);
    if (st == SNUG_OK) st = serve(&c, steps, &bad, &err);
    bench_case_close(&c);
    if (st != SNUG_OK) return cli_runtime_error(&err);
    return bad ? CLI_EXIT_USAGE : CLI_EXIT_OK;
}
