/* `snug train`: parse the flags, build the model, plan and reserve memory, load --init weights, open the data,
 * train, evaluate on the data set's evaluation part, report, save. Nothing reaches stdout until every resource
 * exists, so an error (a budget that is too small, a missing data file) is the only thing a failed run prints.
 *
 * Under mpirun every rank runs this same command; rank 0 alone prints and saves. A rank that fails cannot just
 * return, since the others would wait for it in the next collective: it prints `snug: rank N: ...` and ends the
 * whole job (snug_dist_abort). */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli/args.h"
#include "cli/process_start.h"
#include "cli/commands.h"
#include "cli/data_sets.h"
#include "cli/plan_advice.h"
#include "cli/progress.h"
#include "cli/resume.h"
#include "core/error.h"

typedef struct train_run {
    cli_train_options opt;
    snug_graph *graph;
    snug_plan *plan;           /* what the flags asked for, as planned */
    snug_plan_summary ps;      /* its figures */
    snug_trainer *trainer;
    cli_data data;             /* the training and evaluation parts of --data */
    snug_data_options data_opt; /* --train-samples, --normalise */
    cli_progress progress;
    snug_dataset *eval_view;   /* --eval-samples: the evenly spaced part of the evaluation set scored meanwhile */
    double train_seconds;
    snug_eval_result eval;     /* on the evaluation part, over every rank's share */
    size_t asked_batch;        /* --batch, when the training part is smaller */
    int rank, ranks;           /* this process's place in the job (0 of 1 without mpirun) */
    char policy[64];           /* as asked, and what auto resolved to: "auto: every:3 selective" */
    int argc;                  /* the run's command line, as stored with its states */
    char **argv;
    cli_resume resume;         /* --resume: the state continued and the run's flags */
    char *state_extra;         /* what every state stores of the command line (cli_state_extra) */
    size_t program;            /* resident bytes before the data and the plan: outside the budget */
} train_run;

/* The plan of the flags' request (the library chooses what --mem leaves free), summarised for the header. */
static snug_status make_plan(train_run *r, snug_error *err) {
    r->opt.plan.ranks = r->ranks;
    const snug_status st = cli_plan(r->graph, &r->opt.plan, r->opt.checkpoint_given, &r->plan, err);
    if (st == SNUG_OK) snug_plan_summarize(r->plan, &r->ps);
    if (st == SNUG_OK) snug_plan_policy_label(&r->ps, r->policy, sizeof r->policy);
    return st;
}

/* Model, both data parts, plan (for no more samples than the training part has), trainer (the plan's memory),
 * --init or the resumed state, the data checked against the model: every failure before any output. What a
 * state stores of the run and the scores' data go into the configuration before the trainer copies it. */
static snug_status setup(train_run *r, snug_error *err) {
    /* a resumed run reads its model file as it was, unless --model names another */
    const bool stored = r->resume.model_text && strcmp(r->opt.model, r->resume.model) == 0;
    snug_status st = stored ? snug_model_parse_classes(r->resume.model_text, r->opt.model, r->opt.classes,
                                                       &r->graph, err)
                            : snug_model_builtin_classes(r->opt.model, r->opt.classes, &r->graph, err);
    if (st == SNUG_OK) st = snug_graph_check(r->graph, err);
    r->data_opt = snug_data_options_default();
    r->data_opt.train_samples = r->opt.train_samples;
    r->data_opt.read_limit = r->opt.plan.budget; /* an image too large for --mem is refused before decoding */
    r->data_opt.normalise = r->opt.has_norm ? &r->opt.norm : NULL;
    if (st == SNUG_OK)
        st = cli_data_open(r->opt.data, r->opt.data_dir, r->graph, true, &r->data_opt, &r->data, err);
    const size_t n = st == SNUG_OK ? snug_dataset_size(r->data.train) : 0;
    /* the request `snug plan --data` builds too: threads after --threads, the batch the data fills, read-ahead */
    if (st == SNUG_OK) r->asked_batch = snug_plan_request_for_data(&r->opt.plan, &r->data);
    if (st == SNUG_OK) st = make_plan(r, err);
    if (st == SNUG_OK && r->opt.save && r->rank == 0) st = snug_check_output(r->opt.save, "weights file", err);
    if (st == SNUG_OK && r->opt.state && !(r->state_extra = cli_state_extra(r->argc, r->argv, r->opt.model, n)))
        st = snug_fail(err, SNUG_E_OOM, "out of memory: the system refused the run's command line");
    r->opt.cfg.state_extra = r->state_extra;
    r->progress.eval_name = r->opt.cfg.eval_name = r->data.eval_name;
    r->opt.cfg.eval_data = r->data.eval;
    const size_t keep = r->opt.eval_samples;
    if (st == SNUG_OK && r->data.eval && keep > 0 && keep < snug_dataset_size(r->data.eval) &&
        (st = snug_dataset_subset(r->data.eval, keep, &r->eval_view, err)) == SNUG_OK)
        r->opt.cfg.eval_data = r->eval_view;
    if (st == SNUG_OK)
        st = cli_trainer(r->plan, &r->opt.cfg, "--micro-batch auto then picks the micro-batch and checkpointing "
                         "that fit", &r->trainer, err);
    if (st == SNUG_OK && r->opt.init) st = snug_trainer_load(r->trainer, r->opt.init, err);
    if (st == SNUG_OK) st = cli_data_check(&r->data, r->trainer, r->graph, err);
    if (st == SNUG_OK && r->opt.resume) st = cli_resume_load(&r->resume, r->trainer, n, err);
    return st;
}

/* --state: where the run keeps its state and the signals that stop it, set before the trainer copies the
 * configuration. */
static void keep_state(train_run *r) {
    snug_train_config *c = &r->opt.cfg;
    if (!r->opt.state) return;
    c->state_dir = r->opt.state;
    c->stop = cli_stop_on_signals();
}

static void teardown(train_run *r) {
    /* the trainer points into the plan, which points into the graph; the evaluation view borrows the data */
    snug_dataset_free(r->eval_view);
    snug_data_close(&r->data);
    if (r->trainer) snug_trainer_free(r->trainer);
    snug_plan_free(r->plan);
    if (r->graph) snug_graph_free(r->graph);
    cli_resume_close(&r->resume);
    free(r->state_extra);
}

static void print_header(const snug_plan_summary *s) {
    snug_system_info info;
    snug_system_info_get(&info);
    printf("snug %s | threads %d | SIMD %s | BLAS %s | kernel %s | linear layers %s\n", SNUG_VERSION, info.threads,
           info.simd, info.blas ? info.blas : "unknown", info.blas_kernel ? info.blas_kernel : "unknown", s->products);
    if (!info.blas_kernel_slow) return;
    const char *core = cli_blas_best_core();
    printf("WARNING: OpenBLAS fell back to its generic '%s' kernel, which does not use the %s of this CPU: "
           "matrix products run several times (up to ~7x) slower. Run with OPENBLAS_CORETYPE=%s (snug sets it "
           "itself unless OPENBLAS_CORETYPE or SNUG_NO_REEXEC is already set), or install an OpenBLAS that "
           "knows this CPU.\n",
           info.blas_kernel ? info.blas_kernel : "unknown", info.simd, core ? core : "Haswell");
}

static bool augment_or_ahead(const train_run *r) {
    const snug_augment *a = &r->opt.cfg.augment;
    return r->opt.plan.prefetch || a->flip || a->crop_pad || a->brightness > 0 || a->contrast > 0;
}

static void print_model(const train_run *r) {
    const size_t params = snug_trainer_param_elements(r->trainer);
    char count[32], flops[32];
    snug_format_count((double)params, count, sizeof count);
    snug_format_flops(snug_trainer_flops_per_sample(r->trainer), flops, sizeof flops);
    const char *name = snug_graph_name(r->graph);
    printf("model %s: %s parameters, %s per sample (forward + backward)", name, count, flops);
    if (strcmp(name, r->opt.model) != 0) printf(", from %s", r->opt.model);  /* a model file */
    printf("\n");
    const cli_data *d = &r->data;
    char ntrain[32], neval[32];
    snug_format_count((double)snug_dataset_size(d->train), ntrain, sizeof ntrain);
    if (d->eval) snug_format_count((double)snug_dataset_size(d->eval), neval, sizeof neval);
    if (d->eval)
        printf("data %s: %s training and %s %s %s from %s\n", d->kind, ntrain, neval, d->eval_name, d->unit, d->source);
    else printf("data %s: %s training %s from %s\n", d->kind, ntrain, d->unit, d->source);
    if (r->opt.init) printf("initial weights from %s\n", r->opt.init);
    if (r->opt.resume) printf("resumed from %s at step %ld\n", r->resume.info.path, r->resume.info.step);
    char aug[96], norm[160], ring[32];
    snug_normalise n;
    const size_t ahead = r->opt.plan.prefetch;
    if (snug_dataset_normalisation(d->train, &n) && strcmp(d->kind, "images") == 0)
        printf("normalised by %s (mean/std of pixels in [0, 1]%s)\n", snug_normalise_format(&n, norm, sizeof norm),
               r->opt.has_norm ? ", --normalise" : ", computed over the training images");
    if (augment_or_ahead(r))
        printf("augment %s; %zu micro-batch%s read ahead by %d thread%s (%s, in the plan's data)\n",
               snug_augment_format(&r->opt.cfg.augment, aug, sizeof aug), ahead, ahead == 1 ? "" : "es",
               r->opt.plan.data_threads, r->opt.plan.data_threads == 1 ? "" : "s",
               snug_format_bytes(r->ps.read_ahead_bytes, ring, sizeof ring));
}

/* Over several ranks: each rank's share of a batch (the largest, when B does not divide) and what the
 * all-reduce moves. */
static void print_ranks(const train_run *r) {
    const size_t b = r->ps.batch, ranks = (size_t)r->ranks, params = snug_trainer_param_elements(r->trainer);
    char bytes[32];
    printf("data parallel: %d ranks (MPI), each takes %zu", r->ranks, b / ranks);
    if (b % ranks != 0) printf(" or %zu", b / ranks + 1);
    printf(" samples of every batch of %zu; one all-reduce of the %s gradient block per optimizer step; --mem "
           "is per rank\n", b, snug_format_bytes(params * sizeof(float), bytes, sizeof bytes));
}

/* B, m, k = ceil(B/m) and the size of an uneven last micro-batch; steps per epoch and in all. Over several
 * ranks, k is the micro-batches of a rank's share. */
static void print_batching(const train_run *r) {
    const snug_train_config *c = &r->opt.cfg;
    const snug_plan_summary *s = &r->ps;
    if (r->ranks > 1) {
        print_ranks(r);
        printf("per rank: ");
    }
    const size_t m = s->micro_batch < s->share ? s->micro_batch : s->share, b = s->batch;
    const size_t n = snug_dataset_size(r->data.train);
    if (r->asked_batch > b)
        printf("--batch %zu is more than the %zu training %s: each step takes them all\n", r->asked_batch, n, r->data.unit);
    if (s->micro_batches == 1) {
        printf("batch %zu in one forward/backward pass per optimizer step (no accumulation)\n", s->share);
    } else {
        printf("batch %zu = %zu micro-batches of %zu", s->share, s->micro_batches, m);
        if (s->last_micro_batch != m) printf(" (the last one %zu)", s->last_micro_batch);
        printf(": gradients of %zu forward/backward passes accumulated per optimizer step\n", s->micro_batches);
    }
    long spe, total;
    snug_trainer_run_length(r->trainer, n, &spe, &total);
    printf("%ld steps per epoch", spe);
    if (n % b != 0) {
        if (c->drop_last) printf(" (the last %zu samples of each epoch dropped)", n % b);
        else printf(" (the last batch of each epoch %zu samples)", n % b);
    }
    printf(", %ld epoch%s, %ld steps in all%s\n", c->epochs, c->epochs == 1 ? "" : "s", total,
           c->max_steps > 0 && total == c->max_steps ? " (--max-steps)" : "");
}

/* What the library chose for --mem, when it chose. */
static void print_auto_fit(const train_run *r) {
    const snug_plan_summary *s = &r->ps;
    char planned[32], budget[32];
    if (!s->micro_batch_chosen) return;
    printf("auto: micro-batch %zu (%zu micro-batch%s of %zu", s->micro_batch, s->micro_batches,
           s->micro_batches == 1 ? "" : "es", s->micro_batch);
    if (s->last_micro_batch != s->micro_batch) printf(", the last one %zu", s->last_micro_batch);
    printf(") with checkpoint %s fits: planned %s of the %s budget\n", r->policy,
           snug_format_bytes(s->total, planned, sizeof planned), snug_format_bytes(s->budget, budget, sizeof budget));
}

/* The checkpoint policy, always, with what its recompute costs. */
static void print_checkpoint(const train_run *r) {
    const char *policy = r->policy;
    const size_t segments = r->ps.segments, spared = r->ps.spared_segments, regenerated = r->ps.regenerated_inputs;
    if (segments == 0)
        printf("checkpoint %s: every activation backward needs is kept%s, nothing is recomputed%s\n", policy,
               regenerated ? " but the regenerated inputs below" : "",
               spared ? " (recomputing would not lower this plan's peak)" : "");
    else
        printf("checkpoint %s: %zu segment%s recomputed in backward, %.1f%% of the FLOPs of each micro-batch%s\n",
               policy, segments, segments == 1 ? "" : "s", snug_plan_recompute_percent(&r->ps),
               spared ? "; segments whose recompute would save no memory are kept whole" : "");
    if (regenerated)
        printf("regenerated: %zu input%s rebuilt in backward from the layer%s that made %s, not kept\n",
               regenerated, regenerated == 1 ? "" : "s", regenerated == 1 ? "" : "s", regenerated == 1 ? "it" : "them");
    if (r->opt.plan.precision == SNUG_PRECISION_BF16)
        printf("precision bf16: every output rounded to bfloat16, those backward reads kept in half the bytes\n");
}

static void print_optimizer(const train_run *r) {
    const snug_train_config *c = &r->opt.cfg;
    if (c->optim.kind == SNUG_OPTIM_ADAMW)
        printf("optimizer adamw: lr %g, betas %g/%g, eps %g, weight decay %g", c->optim.lr, c->optim.beta1,
               c->optim.beta2, c->optim.eps, c->optim.weight_decay);
    else
        printf("optimizer sgd: lr %g, momentum %g%s, weight decay %g", c->optim.lr, c->optim.momentum,
               c->optim.nesterov ? " (nesterov)" : "", c->optim.weight_decay);
    if (c->schedule.kind == SNUG_SCHEDULE_COSINE)
        printf("; cosine schedule, warmup %ld, min lr ratio %g", c->schedule.warmup_steps, c->schedule.min_lr_ratio);
    if (c->schedule.linear_scaling)
        printf("; linear scaling: peak lr %g", c->optim.lr * (double)r->ps.batch / (double)c->schedule.reference_batch);
    if (c->clip_norm > 0) printf("; clip %g", c->clip_norm);
    printf("\n");
}

/* The plan's categories; then the program outside them and, at the end, the process's resident peak. */
static void print_memory(const snug_mem_report *rep, const char *title, bool with_peak, size_t program) {
    char buf[128];
    puts(title);
    for (snug_mem_category c = 0; c < SNUG_MEM_NCATEGORIES; c++)
        printf("  %-12s %12s\n", snug_mem_category_name(c), snug_format_bytes(rep->in_use[c], buf, sizeof buf));
    printf("  %-12s %12s\n", "total", snug_format_bytes(rep->total, buf, sizeof buf));
    if (with_peak) printf("  %-12s %12s\n", "peak", snug_format_bytes(rep->peak, buf, sizeof buf));
    printf("  %-12s %12s\n", "budget", rep->budget ? snug_format_bytes(rep->budget, buf, sizeof buf) : "unlimited");
    if (program && !with_peak)
        printf("program: %s outside the budget (code, libraries, threads)\n", snug_format_bytes(program, buf, 32));
    if (program && with_peak && snug_format_resident_peak(program, buf, sizeof buf)) printf("%s\n", buf);
}

static void print_plan(const train_run *r) {
    print_header(&r->ps);
    print_model(r);
    print_auto_fit(r);
    print_batching(r);
    cli_batchnorm_warning(stdout, r->graph, &r->ps, r->ranks);
    print_checkpoint(r);
    print_optimizer(r);
    snug_mem_report rep;
    snug_trainer_memory(r->trainer, &rep);
    print_memory(&rep, r->ranks > 1 ? "memory reserved before the first step (per rank):"
                                     : "memory reserved before the first step:", false, r->program);
    fflush(stdout);
}

static snug_status train(train_run *r, snug_error *err) {
    snug_status st = snug_trainer_fit(r->trainer, r->data.train, err);
    if (st == SNUG_E_NONFINITE) snug_error_append(err, " (--lr lower, --clip 1.0)"); /* the advice, in flags */
    r->train_seconds = r->progress.last.process_s; /* this process's training time: scores left out */
    cli_progress_finish(&r->progress);
    return st;
}

/* The results, on rank 0: the evaluation (every rank scored its share), speed, all-reduces, memory. */
static void report(const train_run *r, bool evaluated) {
    const snug_eval_result res = r->eval;
    char speed[32], samples[32], took[32];
    if (evaluated) cli_print_eval(stdout, &res, r->data.eval_name);
    else if (r->opt.evaluate == 0)
        printf("not evaluated: --data %s has no evaluation part (a val/ folder)\n", r->opt.data);
    const cli_progress *p = &r->progress;
    double rate = r->train_seconds > 0 ? (double)p->samples / r->train_seconds : 0;
    snug_format_count((double)p->samples, samples, sizeof samples);
    snug_format_count(rate, speed, sizeof speed);
    printf("trained %ld steps (%s samples) in %s (%.2f s), %s samples/s", p->last.step - p->last.first_step, samples,
           snug_format_duration(r->train_seconds, took, sizeof took), r->train_seconds, speed);
    if (p->last.first_step) /* a resumed run: and in all, its earlier processes included */
        printf("; the run %ld steps (%s samples) in all", p->last.step,
               snug_format_count((double)p->last.run_samples, samples, sizeof samples));
    if (p->skipped) printf(", %ld step%s skipped (non-finite)", p->skipped, p->skipped == 1 ? "" : "s");
    printf("\n");
    snug_data_timing t;
    snug_trainer_data_timing(r->trainer, &t);
    if (t.read_ahead_samples && p->last.step > p->last.first_step)
        printf("data: the steps waited %.1f ms each for their micro-batches; read ahead at %.0f samples/s of one "
               "thread's time, against %s samples/s trained\n",
               1e3 * t.wait_seconds / (double)(p->last.step - p->last.first_step),
               (double)t.read_ahead_samples / (t.read_ahead_seconds > 0 ? t.read_ahead_seconds : 1), speed);
    if (r->opt.cfg.log_path && !p->log_failed)
        printf("log: %s (`snug curve %s -o curve.svg` draws it)\n", r->opt.cfg.log_path, r->opt.cfg.log_path);
    if (r->ranks > 1)
        printf("gradient all-reduces: %ld (one per optimizer step), %.3f s in all (waiting for the slowest rank "
               "included)\n", snug_trainer_allreduce_count(r->trainer), snug_trainer_allreduce_seconds(r->trainer));
    snug_mem_report rep;
    snug_trainer_memory(r->trainer, &rep);
    print_memory(&rep, r->ranks > 1 ? "memory by category (per rank):" : "memory by category:", true, r->program);
}

/* --save: rank 0 writes the safetensors file; every rank holds the same parameters. */
static snug_status save_params(const train_run *r, snug_error *err) {
    if (!r->opt.save || r->rank != 0) return SNUG_OK;
    snug_status st = snug_trainer_save(r->trainer, r->opt.save, err);
    if (st == SNUG_OK)
        printf("parameters saved to %s (safetensors, %zu tensors)\n", r->opt.save,
               snug_trainer_param_count(r->trainer));
    return st;
}

/* auto: a terminal, but not under mpirun: a rank's stdout is its pseudo-terminal even when mpirun's is a file */
static bool live_progress(cli_progress_mode mode) {
    return mode == CLI_PROGRESS_ON || (mode == CLI_PROGRESS_AUTO && isatty(fileno(stdout)) && !snug_dist_joined());
}

/* Flags, joining the job (its start-up bounded by the command line's rank timeout), --help: alike on every rank
 * (the same command line), so every rank stops alike and only rank 0 speaks. -1 to go on, else the exit status. */
static int parse(train_run *r, int argc, char **argv) {
    char msg[512];
    snug_error err = {0};
    r->argc = argc, r->argv = argv;
    const bool parsed = cli_parse_train(argc, argv, &r->opt, msg, sizeof msg);
    if (snug_dist_init(&r->argc, &r->argv, r->opt.cfg.rank_timeout_seconds, &err) != SNUG_OK)
        return cli_runtime_error(&err);
    r->rank = snug_dist_rank(), r->ranks = snug_dist_size();
    if (!parsed) return r->rank == 0 ? cli_usage_error("train", CLI_TRAIN_USAGE, msg) : CLI_EXIT_USAGE;
    if (r->opt.help) {
        if (r->rank == 0) cli_train_help(stdout);
        return CLI_EXIT_OK;
    }
    if (!r->opt.resume) return -1;
    /* --resume: the run's own flags first, then these */
    if (cli_resume_open(r->opt.resume, r->argc, r->argv, &r->resume, &err) != SNUG_OK)
        return r->rank == 0 ? cli_runtime_error(&err) : CLI_EXIT_RUNTIME;
    r->argc = r->resume.argc, r->argv = r->resume.argv;
    if (!cli_parse_train(r->argc, r->argv, &r->opt, msg, sizeof msg))
        return r->rank == 0 ? cli_usage_error("train", CLI_TRAIN_USAGE, msg) : CLI_EXIT_USAGE;
    if (!r->opt.state) r->opt.state = r->opt.resume;
    if (r->rank == 0 && r->resume.info.skipped[0])
        fprintf(stderr, "snug: warning: skipped states that are not whole: %s\n", r->resume.info.skipped);
    return -1;
}

/* "step 500: held-out loss 2.0312 nats/byte ... on 65,280 bytes" between the progress lines, on rank 0. */
static bool print_score(const snug_step_stats *st, const snug_eval_result *res, void *user) {
    cli_progress *p = user;
    char split[160];
    snprintf(split, sizeof split, "step %ld: %s", st->step, p->eval_name);
    cli_progress_finish(p); /* a live line ends before the score's own line */
    cli_print_eval(p->out, res, split);
    fflush(p->out);
    return true;
}

/* Rank 0 reports progress and scores; the others train silently (but score: an evaluation over ranks is a
 * collective). */
static void start_progress(train_run *r) {
    cli_progress_init(&r->progress, stdout, live_progress(r->opt.progress), r->opt.log_every, r->opt.cfg.epochs);
    r->opt.cfg.eval_every = r->opt.evaluate == 0 ? r->opt.eval_every : 0;
    if (r->rank != 0) return;
    r->opt.cfg.progress = cli_progress_step;
    r->opt.cfg.on_eval = print_score;
    r->opt.cfg.on_log_failed = cli_progress_log_failed;
    r->opt.cfg.progress_user = &r->progress;
}

static snug_status run(train_run *r, snug_error *err) {
    snug_status st = setup(r, err);
    if (st != SNUG_OK) return st;
    r->progress.tr = r->trainer;
    r->progress.batch = r->ps.batch;
    r->progress.dataset_samples = snug_dataset_size(r->data.train);
    if (r->rank == 0) print_plan(r);
    if ((st = train(r, err)) != SNUG_OK) return st;
    bool evaluate = r->opt.evaluate == 0 && r->data.eval;
    if (evaluate && (st = snug_trainer_evaluate(r->trainer, r->data.eval, &r->eval, err)) != SNUG_OK) return st;
    if (r->rank == 0) report(r, evaluate);
    return save_params(r, err);
}

int cmd_train(int argc, char **argv) {
    train_run r;
    memset(&r, 0, sizeof r);
    snug_error err = {0};
    int rc = parse(&r, argc, argv);
    if (rc < 0) {
        if (r.opt.threads > 0) snug_set_threads((int)r.opt.threads);
        r.program = snug_engine_start();
        start_progress(&r);
        keep_state(&r);
        snug_status st = run(&r, &err);
        if (st == SNUG_E_INTERRUPTED) rc = r.rank == 0 ? cli_stopped(r.opt.state) : CLI_EXIT_RUNTIME;
        else rc = st == SNUG_OK ? CLI_EXIT_OK : cli_job_error(r.rank, r.ranks, &err);
        teardown(&r);
    }
    snug_dist_finalize();
    return rc;
}
