/* `snug eval`: build the model, open the data set's evaluation part, plan and reserve memory as for training but
 * without optimizer state (plain SGD) and for no more samples than the part has, load the weights, score it,
 * report. Nothing reaches stdout until every resource exists, so an error (a weights file of another model, a
 * missing data file) is the only thing a failed run prints. Under mpirun every rank scores its share and rank 0
 * prints. */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/args.h"
#include "cli/plan_advice.h"
#include "cli/commands.h"
#include "cli/data_sets.h"
#include "cli/eval_classes.h"
#include "cli/progress.h"
#include "core/error.h"

typedef struct eval_run {
    cli_eval_options opt;
    snug_graph *graph;
    snug_plan *plan;
    snug_trainer *trainer;
    cli_data data;             /* its evaluation part only */
    snug_eval_result res;
    snug_weights_data wd;      /* the class names and normalisation the weights were trained with */
    size_t *confusion;         /* a classifier's: classes x classes */
    size_t asked_batch;        /* --batch, when the evaluation part is smaller */
    double seconds;
    int rank, ranks;
} eval_run;

/* The batch (or, with --mem, the one that fits) is the micro-batch of a training plan without optimizer state;
 * evaluation runs forward passes of that many samples through its buffers. */
static snug_status setup(eval_run *r, snug_error *err) {
    snug_status st = snug_model_builtin_classes(r->opt.model, r->opt.classes, &r->graph, err);
    if (st == SNUG_OK) st = snug_graph_check(r->graph, err);
    snug_system_info info;
    snug_system_info_get(&info);
    r->opt.plan.threads = info.threads;
    r->opt.plan.ranks = r->ranks;
    snug_data_options o = snug_data_options_default();
    if (st == SNUG_OK && (st = snug_weights_data_read(r->opt.weights, &r->wd, err)) == SNUG_OK)
        o.normalise = r->wd.has_normalise ? &r->wd.normalise : NULL; /* read images and tables as training did */
    o.trained = &r->wd;
    if (st == SNUG_OK) st = cli_data_open(r->opt.data, r->opt.data_dir, r->graph, false, &o, &r->data, err);
    if (st == SNUG_OK) r->asked_batch = snug_plan_request_fit_samples(&r->opt.plan, snug_dataset_size(r->data.eval));
    snug_plan_request_whole_process(&r->opt.plan, NULL, r->data.eval);
    if (st == SNUG_OK) st = cli_plan(r->graph, &r->opt.plan, false, &r->plan, err);
    snug_train_config cfg = snug_train_config_default();
    cfg.optim = r->opt.plan.optim;
    if (st == SNUG_OK)
        st = cli_trainer(r->plan, &cfg, "the batch is then the largest that fits", &r->trainer, err);
    if (st == SNUG_OK) st = snug_trainer_load(r->trainer, r->opt.weights, err);
    if (st == SNUG_OK) st = cli_data_check(&r->data, r->trainer, r->graph, err);
    return st;
}

static void teardown(eval_run *r) {
    snug_weights_data_free(&r->wd);
    free(r->confusion);
    snug_data_close(&r->data);
    if (r->trainer) snug_trainer_free(r->trainer);
    snug_plan_free(r->plan);
    if (r->graph) snug_graph_free(r->graph);
}

static void report(const eval_run *r) {
    const size_t n = snug_dataset_size(r->data.eval);
    char count[32], samples[32], mem[32], budget[32], speed[32];
    snug_format_count((double)snug_trainer_param_elements(r->trainer), count, sizeof count);
    snug_format_count((double)n, samples, sizeof samples);
    printf("model %s: %s parameters, weights from %s\n", snug_graph_name(r->graph), count, r->opt.weights);
    printf("data %s: %s %s %s from %s\n", r->data.kind, samples, r->data.eval_name, r->data.unit, r->data.source);
    char norm[160];
    if (r->wd.has_normalise)
        printf("normalised by %s, as in training (the weights' metadata)\n",
               snug_normalise_format(&r->wd.normalise, norm, sizeof norm));
    snug_table_stats t;
    if (snug_dataset_table_stats(r->data.eval, &t) && r->wd.table.columns)
        printf("standardised by the training table's column statistics, as in training (the weights' metadata)\n");
    snug_mem_report rep;
    snug_trainer_memory(r->trainer, &rep);
    snug_plan_summary ps;
    snug_plan_summarize(r->plan, &ps);
    printf("batch %zu per forward pass", ps.micro_batch);
    if (r->asked_batch > ps.batch) printf(" (--batch %zu is more than the %s %s %s)", r->asked_batch, samples,
                                          r->data.eval_name, r->data.unit);
    printf("; memory reserved %s (budget %s)\n", snug_format_bytes(rep.total, mem, sizeof mem),
           rep.budget ? snug_format_bytes(rep.budget, budget, sizeof budget) : "unlimited");
    cli_print_eval(stdout, &r->res, r->data.eval_name);
    const char *names[256];
    const size_t k = r->res.classes;
    for (size_t c = 0; c < k && c < 256; c++)
        names[c] = r->wd.classes == k ? r->wd.class_names[c] : snug_dataset_class_name(r->data.eval, c);
    if (r->confusion && r->res.kind == SNUG_EVAL_SAMPLES) /* a classifier: one label a sample */
        cli_print_classes(stdout, r->confusion, k, k <= 256 ? names : NULL);
    snug_format_count(r->seconds > 0 ? (double)n / r->seconds : 0, speed, sizeof speed);
    printf("evaluated in %.2f s, %s samples/s\n", r->seconds, speed);
}

static snug_status run(eval_run *r, snug_error *err) {
    snug_status st = setup(r, err);
    if (st != SNUG_OK) return st;
    double t0 = cli_now();
    const size_t k = snug_trainer_classes(r->trainer);
    r->confusion = k <= 4096 ? calloc(k * k, sizeof *r->confusion) : NULL; /* without it: the scores alone */
    st = r->confusion ? snug_trainer_evaluate_confusion(r->trainer, r->data.eval, &r->res, r->confusion, err)
                      : snug_trainer_evaluate(r->trainer, r->data.eval, &r->res, err);
    r->seconds = cli_now() - t0;
    if (st == SNUG_OK && r->rank == 0) report(r);
    return st;
}

int cmd_eval(int argc, char **argv) {
    eval_run r;
    memset(&r, 0, sizeof r);
    snug_error err = {0};
    if (snug_dist_init(&argc, &argv, snug_train_config_default().rank_timeout_seconds, &err) != SNUG_OK)
        return cli_runtime_error(&err);
    r.rank = snug_dist_rank();
    r.ranks = snug_dist_size();
    char msg[512];
    int rc = -1;
    if (!cli_parse_eval(argc, argv, &r.opt, msg, sizeof msg)) {
        rc = r.rank == 0 ? cli_usage_error("eval", CLI_EVAL_USAGE, msg) : CLI_EXIT_USAGE;
    } else if (r.opt.help) {
        if (r.rank == 0) cli_eval_help(stdout);
        rc = CLI_EXIT_OK;
    }
    if (rc < 0) {
        if (r.opt.threads > 0) snug_set_threads((int)r.opt.threads);
        rc = run(&r, &err) == SNUG_OK ? CLI_EXIT_OK : cli_job_error(r.rank, r.ranks, &err);
        teardown(&r);
    }
    snug_dist_finalize();
    return rc;
}
