/* `snug plan`: what a run would need, from the graph alone: no training, no data set, no engine memory. Builds
 * the candidate plans, picks the chosen one exactly as `snug train` would, writes the timeline file first (so a
 * failure to write prints only the error), then the text report or the JSON document. */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <string.h>

#include "cli/args.h"
#include "cli/autofit.h"
#include "cli/commands.h"
#include "cli/plan_report.h"
#include "cli/timeline.h"
#include "core/error.h"

static int effective_threads(long requested) {
    if (requested > 0) return (int)requested;
    snug_system_info info;
    snug_system_info_get(&info);
    return info.threads;
}

static snug_status write_timeline(const cli_plan_options *opt, const plan_report *r, snug_error *err) {
    const plan_row *c = &r->rows[r->chosen];
    cli_timeline t = {.model = opt->model, .batch = opt->cfg.batch, .micro_batch = c->m,
                      .budget = opt->cfg.mem_budget};
    t.plans[0] = (cli_timeline_plan){.name = "checkpointed", .plan = c->plan};
    t.plans[1] = (cli_timeline_plan){.name = "baseline", .plan = r->baseline};
    plan_resolved_label(&c->s, t.plans[0].policy, sizeof t.plans[0].policy);
    plan_resolved_label(&r->baseline_s, t.plans[1].policy, sizeof t.plans[1].policy);
    return cli_timeline_write(&t, opt->timeline, err);
}

static snug_status print_report(const cli_plan_options *opt, const plan_report *r, snug_error *err) {
    if (opt->json) {
        if (plan_print_json(stdout, r, opt->layers) != 0)
            return snug_fail(err, SNUG_E_IO, "could not build or write the JSON report (out of memory, or stdout "
                             "closed)");
        return SNUG_OK;
    }
    plan_print_table(stdout, r);
    plan_print_summary(stdout, r);
    if (opt->layers) plan_print_layers(stdout, r);
    if (opt->timeline) printf("\nmemory timeline written to %s\n", opt->timeline);
    return SNUG_OK;
}

static snug_status run_plan(const cli_plan_options *opt, snug_graph *g, snug_error *err) {
    size_t m = 0;
    snug_checkpoint_policy policy;
    snug_status st = cli_choose_plan(g, &opt->cfg, opt->checkpoint_given, &m, &policy, err);
    if (st != SNUG_OK) return st;
    plan_report r;
    st = plan_report_build(&r, g, opt->model, &opt->cfg, effective_threads(opt->threads), m, policy,
                           opt->cfg.auto_fit, err);
    if (st == SNUG_OK && opt->timeline) st = write_timeline(opt, &r, err);
    if (st == SNUG_OK) st = print_report(opt, &r, err);
    plan_report_free(&r);
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
    snug_graph *g = snug_model_builtin(opt.model, &err);
    snug_status st = g ? snug_graph_check(g, &err) : (err.status != SNUG_OK ? err.status : SNUG_E_ARG);
    if (st == SNUG_OK) st = run_plan(&opt, g, &err);
    snug_graph_free(g);
    return st == SNUG_OK ? CLI_EXIT_OK : cli_runtime_error(&err);
}
