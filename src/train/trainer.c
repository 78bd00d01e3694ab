/* Creating a trainer: validate the configuration, plan, check the plan against the budget, reserve every
 * byte, initialise the parameters (and, over several ranks, take rank 0's). After this, training allocates no
 * engine memory. */
#include "train/trainer.h"

#include <omp.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "data/dataset.h"

snug_train_config snug_train_config_default(void) {
    return (snug_train_config){
        .batch = 64,
        .epochs = 1,
        .shuffle = true,
        .seed = 1,
        .max_nonfinite = 5,
        .optim = {.kind = SNUG_OPTIM_SGD, .lr = 0.05f, .momentum = 0.9f, .beta1 = 0.9f, .beta2 = 0.999f,
                  .eps = 1e-8f},
        .schedule = {.kind = SNUG_SCHEDULE_CONSTANT, .reference_batch = 256},
    };
}

static snug_status check_config(const snug_train_config *c, snug_error *err) {
    if (c->batch == 0) return snug_fail(err, SNUG_E_ARG, "batch size 0: the global batch must be at least 1");
    if (c->checkpoint.kind == SNUG_CHECKPOINT_EVERY && c->checkpoint.every == 0)
        return snug_fail(err, SNUG_E_ARG, "checkpoint every:0: a segment needs at least 1 layer");
    if (c->auto_fit && c->mem_budget == 0)
        return snug_fail(err, SNUG_E_ARG, "an automatic micro-batch needs a memory budget: give --mem");
    if (!c->auto_fit && c->micro_batch > c->batch)
        return snug_fail(err, SNUG_E_ARG,
                         "micro-batch %zu is larger than the batch %zu: the micro-batch splits the global batch, "
                         "so it must be at most %zu", c->micro_batch, c->batch, c->batch);
    if (c->epochs <= 0 && c->max_steps <= 0)
        return snug_fail(err, SNUG_E_ARG, "nothing to train: set at least 1 epoch or a step limit");
    if (c->max_steps < 0) return snug_fail(err, SNUG_E_ARG, "negative step limit %ld", c->max_steps);
    if (!(c->optim.lr >= 0)) return snug_fail(err, SNUG_E_ARG, "learning rate %g: it must be >= 0", c->optim.lr);
    if (!(c->clip_norm >= 0)) return snug_fail(err, SNUG_E_ARG, "clip norm %g: it must be >= 0 (0 disables)", c->clip_norm);
    if (c->optim.kind == SNUG_OPTIM_ADAMW &&
        !(c->optim.beta1 >= 0 && c->optim.beta1 < 1 && c->optim.beta2 >= 0 && c->optim.beta2 < 1))
        return snug_fail(err, SNUG_E_ARG, "AdamW betas (%g, %g): each must be in [0, 1)", c->optim.beta1,
                         c->optim.beta2);
    return SNUG_OK;
}

/* Plans g at m under the configured policy within budget (AUTO searches within it; pending rows stay out of a
 * plan they would push over it). */
static snug_status plan_configured(const snug_graph *g, const snug_train_config *cfg, size_t m, size_t budget,
                                   plan *p, snug_error *err) {
    return plan_build_policy(g, m, omp_get_max_threads(), &cfg->optim, cfg->checkpoint, budget, p, err);
}

size_t snug_fit_micro_batch(const snug_graph *g, const snug_train_config *cfg, size_t budget, size_t limit,
                            snug_mem_report *at_fit) {
    /* Plans grow with m, so the largest m that fits is found by bisection; each probe only does arithmetic. */
    size_t lo = 0, hi = limit;
    while (lo < hi) {
        size_t mid = lo + (hi - lo + 1) / 2;
        plan p;
        bool fits = plan_configured(g, cfg, mid, budget ? budget : cfg->mem_budget, &p, NULL) == SNUG_OK &&
                    (!budget || p.total <= budget);
        if (fits || p.steps) plan_free(&p);
        if (fits) lo = mid;
        else hi = mid - 1;
    }
    if (at_fit) {
        memset(at_fit, 0, sizeof *at_fit);
        plan p;
        if (plan_configured(g, cfg, lo ? lo : 1, budget ? budget : cfg->mem_budget, &p, NULL) == SNUG_OK) {
            memcpy(at_fit->in_use, p.bytes, sizeof at_fit->in_use);
            at_fit->total = at_fit->peak = p.total;
            plan_free(&p);
        }
        at_fit->budget = budget;
    }
    return lo;
}

/* Turns the allocator's "X needs more" into advice: the largest micro-batch that fits, or the smallest budget
 * that would hold even micro-batch 1. */
static void add_oom_hint(const snug_trainer *tr, snug_error *err) {
    snug_mem_report rep;
    size_t m = snug_fit_micro_batch(tr->g, &tr->cfg, tr->cfg.mem_budget, tr->plan.m, &rep);
    if (m > 0) {
        snug_error_append(err, " Try --micro-batch %zu%s.", m,
                          tr->cfg.checkpoint.kind == SNUG_CHECKPOINT_NONE ? ", or --micro-batch auto to let "
                          "checkpointing keep it larger" : "");
        return;
    }
    if (tr->cfg.checkpoint.kind != SNUG_CHECKPOINT_AUTO) {
        snug_train_config c = tr->cfg;
        c.checkpoint.kind = SNUG_CHECKPOINT_AUTO;
        if (snug_fit_micro_batch(tr->g, &c, tr->cfg.mem_budget, 1, NULL) == 1) {
            snug_error_append(err, " Even --micro-batch 1 does not fit without recomputing activations: try "
                                   "--micro-batch auto or --checkpoint auto.");
            return;
        }
    }
    char need[32], breakdown[256];
    snug_mem_format_breakdown(rep.in_use, breakdown, sizeof breakdown);
    snug_error_append(err, " Even --micro-batch 1 needs %s (%s): raise --mem to at least that.",
                      snug_format_bytes(rep.total, need, sizeof need), breakdown);
}

static snug_status trainer_reserve(snug_trainer *tr, snug_error *err) {
    snug_status s = SNUG_OK;
    if (tr->cfg.auto_fit) {
        s = snug_plan_choose(tr->g, &tr->cfg, tr->cfg.mem_budget, &tr->cfg.micro_batch, &tr->cfg.checkpoint, err);
        if (s != SNUG_OK) return s;
    }
    if ((s = plan_configured(tr->g, &tr->cfg, tr->cfg.micro_batch, tr->cfg.mem_budget, &tr->plan, err)) != SNUG_OK)
        return s;
    snug_mem_init(&tr->mem, tr->cfg.mem_budget);
    s = exec_bind(&tr->x, tr->g, &tr->plan, &tr->mem, err);
    if (s == SNUG_E_OOM && tr->mem.budget) add_oom_hint(tr, err);
    return s;
}

/* The trainable tensors in block order, so that the norm and the update give each thread the parts its products
 * wrote (optim_share). Without them (no memory for a few bytes a tensor, or a block they do not tile) the
 * passes still cover the block, as one tensor. */
static void bind_spans(snug_trainer *tr) {
    const snug_graph *g = tr->g;
    tr->spans = malloc((size_t)(g->n_params > 0 ? g->n_params : 1) * sizeof *tr->spans);
    if (!tr->spans) return;
    int n = 0;
    for (int i = 0; i < g->n_params; i++)
        if (!g->params[i].buffer && g->params[i].numel > 0)
            tr->spans[n++] = (optim_span){.offset = g->params[i].offset, .numel = g->params[i].numel};
    if (optim_spans_tile(tr->spans, n, g->param_numel)) tr->opt.spans = tr->spans, tr->opt.n_spans = n;
}

snug_status snug_trainer_new(snug_graph *g, const snug_train_config *cfg, snug_trainer **out, snug_error *err) {
    *out = NULL;
    snug_status s = snug_graph_check(g, err);
    if (s != SNUG_OK) return s;
    if ((s = check_config(cfg, err)) != SNUG_OK) return s;
    snug_trainer *tr = calloc(1, sizeof *tr);
    if (!tr) return snug_fail(err, SNUG_E_OOM, "out of memory: the system refused the trainer");
    tr->g = g;
    tr->cfg = *cfg;
    if (tr->cfg.micro_batch == 0) tr->cfg.micro_batch = tr->cfg.batch;
    if (tr->cfg.schedule.reference_batch == 0) tr->cfg.schedule.reference_batch = 256;
    if ((s = trainer_reserve(tr, err)) != SNUG_OK) {
        snug_trainer_free(tr);
        return s;
    }
    tr->opt = (optim_state){.cfg = tr->cfg.optim, .state = tr->x.optim_state, .n = g->param_numel};
    bind_spans(tr);
    tr->total_steps = cfg->max_steps > 0 ? cfg->max_steps : 1;
    tr->dist = dist_get();
    trainer_init_params(tr);
    /* The ranks start from rank 0's parameters: the initialisation is a pure function of the seed, but a rank
     * given another seed (or a future checkpoint) must not start elsewhere. */
    if ((s = dist_broadcast_floats(tr->x.params, g->param_numel, err)) != SNUG_OK) {
        snug_trainer_free(tr);
        return s;
    }
    *out = tr;
    return SNUG_OK;
}

void snug_trainer_free(snug_trainer *tr) {
    if (!tr) return;
    exec_unbind(&tr->x);
    snug_mem_release_all(&tr->mem);
    plan_free(&tr->plan);
    free(tr->spans);
    free(tr);
}

size_t snug_trainer_param_count(const snug_trainer *tr) { return (size_t)tr->g->n_params; }

const char *snug_trainer_param(const snug_trainer *tr, size_t i, size_t *numel, float **values, float **grads) {
    if (i >= (size_t)tr->g->n_params) return NULL;
    const graph_param *p = &tr->g->params[i];
    if (numel) *numel = p->numel;
    if (values) *values = (p->buffer ? tr->x.state : tr->x.params) + p->offset;
    if (grads) *grads = p->buffer ? NULL : tr->x.grads + p->offset;
    return p->name;
}

long snug_trainer_allreduce_count(const snug_trainer *tr) { return tr->grad_allreduces; }

double snug_trainer_allreduce_seconds(const snug_trainer *tr) { return tr->allreduce_s; }

void snug_trainer_memory(const snug_trainer *tr, snug_mem_report *rep) { snug_mem_report_get(&tr->mem, rep); }

size_t snug_trainer_micro_batch(const snug_trainer *tr) { return tr->plan.m; }

snug_checkpoint_policy snug_trainer_checkpoint(const snug_trainer *tr) { return tr->cfg.checkpoint; }

double snug_trainer_flops_per_sample(const snug_trainer *tr) {
    return (tr->plan.fwd_flops + tr->plan.bwd_flops + tr->plan.recompute_flops) / (double)tr->plan.m;
}

/* The class count of the loss's logits: (classes), (tokens, classes) or (classes, H, W). */
static size_t loss_classes(const snug_graph *g) {
    const snug_shape *s = &g->tensors[g->nodes[g->loss_node].inputs[0]].shape;
    return s->rank == 2 ? s->dims[1] : s->dims[0];
}

snug_status trainer_check_dataset(const snug_trainer *tr, const snug_dataset *ds, snug_error *err) {
    const snug_graph *g = tr->g;
    snug_shape want = g->tensors[g->nodes[g->input_node].output].shape, have = snug_dataset_sample_shape(ds);
    char a[64], b[64];
    if (memcmp(&want, &have, sizeof want) != 0)
        return snug_fail(err, SNUG_E_SHAPE, "the data has samples of shape %s but model '%s' takes %s",
                         snug_shape_format(&have, a, sizeof a), g->name, snug_shape_format(&want, b, sizeof b));
    size_t classes = loss_classes(g), targets = g->tensors[g->nodes[g->loss_node].output].numel;
    if (snug_dataset_classes(ds) != classes)
        return snug_fail(err, SNUG_E_SHAPE, "the data has %zu classes but model '%s' predicts %zu",
                         snug_dataset_classes(ds), g->name, classes);
    if (ds->targets_per_sample != targets)
        return snug_fail(err, SNUG_E_SHAPE, "the data has %zu targets per sample but model '%s' scores %zu",
                         ds->targets_per_sample, g->name, targets);
    if (snug_dataset_size(ds) == 0) return snug_fail(err, SNUG_E_ARG, "the data set is empty");
    return SNUG_OK;
}

snug_status snug_trainer_check_dataset(const snug_trainer *tr, const snug_dataset *ds, snug_error *err) {
    return trainer_check_dataset(tr, ds, err);
}
