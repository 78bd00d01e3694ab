/* `snug plan`: what a run would need, from the graph and --data's sizes, built as `snug train` builds it
 * (snug_plan_request_for_data): no training, no engine memory. The timeline file is written first (so a failure
 * to write prints only the error), then the report and what the plan counts beside the model. */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/args.h"
#include "cli/commands.h"
#include "cli/data_sets.h"
#include "cli/plan_advice.h"
#include "core/error.h"

/* What the plan counts beside the model: the data set (or that it is not counted) and the runtime allowance. */
static void print_beside(FILE *out, const cli_plan_options *opt, size_t asked_batch) {
    char data[32], runtime[32];
    fputc('\n', out);
    snug_format_bytes(opt->plan.runtime_bytes, runtime, sizeof runtime);
    if (asked_batch != opt->plan.batch)
        fprintf(out, "batch %zu is more than the %zu training samples of --data %s: planned for them all, as snug "
                "train does\n", asked_batch, opt->plan.batch, opt->data);
    fprintf(out, opt->data ? "counted as snug train --data %s reserves it: the data set's %s (data) and the runtime's "
                             "%s (workspace, 2 MiB a thread)\n"
                           : "%sthe data set is not counted%s (give --data, as to snug train, for the plan train "
                             "reserves); the runtime's %s (workspace, 2 MiB a thread) is\n",
            opt->data ? opt->data : "", opt->data ? snug_format_bytes(opt->plan.data_bytes, data, sizeof data) : "",
            runtime);
}

static snug_status print_report(const cli_plan_options *opt, const snug_plan_set *set, snug_error *err) {
    if (opt->json) {
        char *text = snug_plan_set_json(set, opt->model, opt->layers);
        bool ok = text && printf("%s\n", text) >= 0;
        free(text);
        return ok ? SNUG_OK : snug_fail(err, SNUG_E_IO, "could not build or write the JSON report (out of memory, "
                                                        "or stdout closed)");
    }
    snug_status st = snug_plan_set_print(stdout, set, opt->model, opt->layers, err);
    if (st == SNUG_OK && opt->timeline) printf("\nmemory timeline written to %s\n", opt->timeline);
    return st;
}

/* The chosen plan as `snug train` would make it (a micro-batch given by flags shown even over the budget: the
 * table says what fits), then the candidates around it. */
static snug_status run_plan(cli_plan_options *opt, snug_graph *g, const snug_data *data, snug_error *err) {
    snug_plan *chosen = NULL;
    snug_plan_set *set = NULL;
    const size_t asked_batch = snug_plan_request_for_data(&opt->plan, data);
    opt->plan.may_exceed_budget = opt->plan.micro_batch != SNUG_MICRO_BATCH_AUTO;
    snug_status st = cli_plan(g, &opt->plan, opt->checkpoint_given, &chosen, err);
    if (st == SNUG_OK) st = snug_plan_set_new(chosen, &set, err);
    const snug_plan *planned = st == SNUG_OK ? snug_plan_set_at(set, snug_plan_set_chosen(set)) : NULL;
    if (st == SNUG_OK && opt->timeline)
        st = snug_plan_timeline_write(planned, snug_plan_set_baseline(set), opt->model, opt->timeline, err);
    if (st == SNUG_OK) st = print_report(opt, set, err);
    if (st == SNUG_OK) {
        snug_plan_summary ps;
        snug_plan_summarize(planned, &ps);
        if (!opt->json) print_beside(stdout, opt, asked_batch);
        cli_batchnorm_warning(opt->json ? stderr : stdout, g, &ps, 1); /* the JSON document stays alone on stdout */
    }
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
    snug_error err = {0};
    snug_graph *g = NULL;
    snug_data data = {0};
    snug_data_options data_opt = snug_data_options_default();
    data_opt.train_samples = opt.train_samples, data_opt.read_limit = opt.plan.budget; /* as snug train's */
    snug_status st = snug_model_builtin_classes(opt.model, opt.classes, &g, &err);
    if (st == SNUG_OK) st = snug_graph_check(g, &err);
    if (st == SNUG_OK && opt.data) st = cli_data_open(opt.data, opt.data_dir, g, true, &data_opt, &data, &err);
    if (st == SNUG_OK) st = run_plan(&opt, g, opt.data ? &data : NULL, &err);
    snug_data_close(&data);
    snug_graph_free(g);
    return st == SNUG_OK ? CLI_EXIT_OK : cli_runtime_error(&err);
}
