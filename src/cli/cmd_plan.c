/* `snug plan`: what a run would need, from the graph alone: no training, no data set, no engine memory. Builds
 * the candidate plans, picks the chosen one exactly as `snug train` would, writes the timeline file first (so a
 * failure to write prints only the error), then the text report or the JSON document. */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/args.h"
#include "cli/commands.h"
#include "cli/plan_advice.h"
#include "core/error.h"

static snug_status print_report(const cli_plan_options *opt, const snug_plan_set *set, snug_error *err) {
    if (opt->json) {
        char *text = snug_plan_set_json(set, opt->model, opt->layers);
        bool ok = text && printf("%s\n", text) >= 0;
        free(text);
        return ok ? SNUG_OK
                  : snug_fail(err, SNUG_E_IO, "could not build or write the JSON report (out of memory, or stdout "
                                              "closed)");
    }
    snug_status st = snug_plan_set_print(stdout, set, opt->model, opt->layers, err);
    if (st != SNUG_OK) return st;
    if (opt->timeline) printf("\nmemory timeline written to %s\n", opt->timeline);
    return SNUG_OK;
}

/* The chosen plan as `snug train` would make it, except that a micro-batch given by flags is shown even over
 * the budget (the table says what fits); then the candidates around it; the timeline file is written first, so
 * that a failure to write prints only the error. */
static snug_status run_plan(cli_plan_options *opt, snug_graph *g, snug_error *err) {
    snug_plan *chosen = NULL;
    snug_plan_set *set = NULL;
    opt->plan.may_exceed_budget = opt->plan.micro_batch != SNUG_MICRO_BATCH_AUTO;
    snug_status st = cli_plan(g, &opt->plan, opt->checkpoint_given, &chosen, err);
    if (st == SNUG_OK) st = snug_plan_set_new(chosen, &set, err);
    if (st == SNUG_OK && opt->timeline)
        st = snug_plan_timeline_write(snug_plan_set_at(set, snug_plan_set_chosen(set)), snug_plan_set_baseline(set),
                                      opt->model, opt->timeline, err);
    if (st == SNUG_OK) st = print_report(opt, set, err);
    snug_plan_set_free(set);
    return st;
}

int cmd_plan(int argc, char **argv) {
    cli_plan_options opt;
    char msg[512];
    if (!cli_parse_plan(argc, argv, &opt, msg, sizeof msg)) return cli_usage_error("plan", CLI_PLAN_USAGE, msg);
    if (opt.help) {
        cli_plan_help(stdout);
        return CLI_EXIT_OK;
    }
    if (opt.threads > 0) snug_set_threads((int)opt.threads);
    snug_system_info info;
    snug_system_info_get(&info);
    opt.plan.threads = info.threads; /* after --threads took effect */
    snug_error err = {0};
    snug_graph *g = NULL;
    snug_status st = snug_model_builtin_classes(opt.model, opt.classes, &g, &err);
    if (st == SNUG_OK) st = snug_graph_check(g, &err);
    if (st == SNUG_OK) st = run_plan(&opt, g, &err);
    snug_graph_free(g);
    return st == SNUG_OK ? CLI_EXIT_OK : cli_runtime_error(&err);
}
