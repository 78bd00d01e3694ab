/* Creating a trainer for a plan: validate the run's configuration against it, reserve every byte the plan
 * names, initialise the parameters (and, over several ranks, take rank 0's). The trainer never plans: the plan
 * request chose everything (plan/request.c). After this, training allocates no engine memory. */
#include "train/trainer.h"

#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "data/augment.h"
#include "data/dataset.h"
#include "io/state.h"

snug_train_config snug_train_config_default(void) {
    return (snug_train_config){
        .epochs = 1,
        .shuffle = true,
        .seed = 1,
        .max_nonfinite = 10,
        .optim = snug_optim_config_default(),
        .schedule = {.kind = SNUG_SCHEDULE_CONSTANT, .reference_batch = 256},
        .state_every_seconds = 600,
        .state_keep = 2,
        .rank_timeout_seconds = 600,
    };
}

/* "AdamW", "SGD with momentum", "SGD without momentum": what decides the optimizer state a plan holds. */
static const char *optimizer_words(const snug_optim_config *o) {
    if (o->kind == SNUG_OPTIM_ADAMW) return "AdamW";
    return o->momentum != 0.0f ? "SGD with momentum" : "SGD without momentum";
}

/* The optimizer is named twice, in the plan request (whose state the plan reserves) and in the run's
 * configuration (what updates the weights). Setting only one is the easy mistake, so a disagreement in kind or
 * in state is refused, naming both fields. */
static snug_status check_same_optimizer(const snug_optim_config *run, const snug_optim_config *planned, int slots,
                                        snug_error *err) {
    const bool same_kind = run->kind == planned->kind && (run->momentum != 0.0f) == (planned->momentum != 0.0f);
    if (same_kind && optim_state_slots(run) == slots) return SNUG_OK;
    return snug_fail(err, SNUG_E_ARG, "the plan was made for %s (snug_plan_request.optim, %d slot%s of state per "
                     "parameter) but the run's optimizer is %s (snug_train_config.optim, %d): give both the same "
                     "optimizer, e.g. req.optim = cfg.optim before snug_plan_new", optimizer_words(planned), slots,
                     slots == 1 ? "" : "s", optimizer_words(run), optim_state_slots(run));
}

static snug_status check_config(const snug_train_config *c, const plan *p, const snug_optim_config *planned,
                                snug_error *err) {
    /* a state folder that cannot be used says so before the first step, not after hours of training */
    if (c->state_dir && dist_get().rank == 0) {
        snug_status s = state_folder(c->state_dir, err);
        if (s != SNUG_OK) return s;
    }
    if (c->log_path && dist_get().rank == 0) {
        snug_status s = snug_check_output(c->log_path, "run log", err);
        if (s != SNUG_OK) return s;
    }
    if (c->epochs <= 0 && c->max_steps <= 0)
        return snug_fail(err, SNUG_E_ARG, "nothing to train: set at least 1 epoch or a step limit");
    if (c->max_steps < 0) return snug_fail(err, SNUG_E_ARG, "negative step limit %ld", c->max_steps);
    if (!(c->optim.lr >= 0)) return snug_fail(err, SNUG_E_ARG, "learning rate %g: it must be >= 0", c->optim.lr);
    if (!(c->clip_norm >= 0))
        return snug_fail(err, SNUG_E_ARG, "clip norm %g: it must be >= 0 (0 disables)", c->clip_norm);
    if (c->state_dir && c->state_keep < 1)
        return snug_fail(err, SNUG_E_ARG, "keep %d states: keep at least 1", c->state_keep);
    if (c->state_every < 0 || !(c->state_every_seconds >= 0))
        return snug_fail(err, SNUG_E_ARG, "state every %ld steps or %g seconds: neither may be negative",
                         c->state_every, c->state_every_seconds);
    if (!(c->rank_timeout_seconds >= 0 && c->rank_timeout_seconds < 1e9))
        return snug_fail(err, SNUG_E_ARG, "rank timeout %g seconds: it must be from 0 (wait forever) to 1e9",
                         c->rank_timeout_seconds);
    if (c->optim.kind == SNUG_OPTIM_ADAMW &&
        !(c->optim.beta1 >= 0 && c->optim.beta1 < 1 && c->optim.beta2 >= 0 && c->optim.beta2 < 1))
        return snug_fail(err, SNUG_E_ARG, "AdamW betas (%g, %g): each must be in [0, 1)", c->optim.beta1,
                         c->optim.beta2);
    return check_same_optimizer(&c->optim, planned, p->optim_slots, err);
}

/* Reserves the plan's blocks within its budget: they fit, since the plan does, unless the machine cannot hold
 * them. That is checked first: zeroing a plan larger than the machine (or its control group) gets the process
 * killed without a word, and a budget is only a ceiling, so a large one says nothing of what the machine has. */
static snug_status trainer_reserve(snug_trainer *tr, snug_error *err) {
    snug_machine_memory machine;
    snug_machine_memory_get(&machine);
    snug_status s = snug_plan_check_machine(tr->public_plan, &machine, err);
    if (s != SNUG_OK) return s;
    snug_mem_init(&tr->mem, tr->public_plan->request.budget);
    return exec_bind(&tr->x, tr->g, tr->plan, &tr->mem, err);
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
            tr->spans[n++] = (optim_span){.offset = g->params[i].offset, .numel = g->params[i].numel,
                                          .rewritten = exec_param_written_fresh(&tr->x, i)};
    if (optim_spans_tile(tr->spans, n, g->param_numel)) tr->opt.spans = tr->spans, tr->opt.n_spans = n;
}

/* Augmentation changes images: a model that reads other samples (token windows, a table's rows as (F, 1, 1))
 * cannot take it; refused before any data is read. */
static snug_status check_augment(const snug_train_config *c, const snug_graph *g, snug_error *err) {
    char what[96], shape[64];
    const snug_shape s = g->tensors[g->nodes[g->input_node].output].shape;
    if (!augment_active(&c->augment) || (s.rank == 3 && s.dims[1] * s.dims[2] > 1)) return SNUG_OK;
    return snug_fail(err, SNUG_E_ARG, "augmentation (%s) changes images (C, H, W), but model '%s' takes samples of "
                     "shape %s (%s): train without augmentation", snug_augment_format(&c->augment, what, sizeof what),
                     g->name, snug_shape_format(&s, shape, sizeof shape),
                     s.rank == 3 ? "a table's rows, or images of one pixel" : "not images");
}

snug_status snug_trainer_new(const snug_plan *plan, const snug_train_config *cfg, snug_trainer **out,
                             snug_error *err) {
    *out = NULL;
    snug_status s = check_config(cfg, &plan->p, &plan->request.optim, err);
    if (s == SNUG_OK) s = check_augment(cfg, plan->g, err);
    if (s != SNUG_OK) return s;
    snug_trainer *tr = calloc(1, sizeof *tr);
    if (!tr) return snug_fail(err, SNUG_E_OOM, "out of memory: the system refused the trainer");
    tr->g = plan->g;
    tr->public_plan = plan;
    tr->plan = &plan->p;
    tr->batch = plan->request.batch;
    tr->cfg = *cfg;
    if (tr->cfg.schedule.reference_batch == 0) tr->cfg.schedule.reference_batch = 256;
    if ((s = trainer_reserve(tr, err)) != SNUG_OK) {
        snug_trainer_free(tr);
        return s;
    }
    tr->opt = (optim_state){.cfg = tr->cfg.optim, .state = tr->x.optim_state, .n = tr->g->param_numel};
    bind_spans(tr);
    trainer_bind_copies(tr);
    tr->total_steps = cfg->max_steps > 0 ? cfg->max_steps : 1;
    tr->dist = dist_get();
    trainer_init_params(tr);
    /* The ranks start from rank 0's parameters: the initialisation is a pure function of the seed, but a rank
     * given another seed (or a future checkpoint) must not start elsewhere. */
    s = dist_broadcast_floats(tr->x.params, tr->g->param_numel, tr->cfg.rank_timeout_seconds, err);
    trainer_copies_stale(tr); /* the broadcast may have written the parameters */
    if (s != SNUG_OK) {
        snug_trainer_free(tr);
        return s;
    }
    *out = tr;
    return SNUG_OK;
}

snug_status snug_trainer_configure(snug_trainer *tr, const snug_train_config *cfg, snug_error *err) {
    snug_status s = check_config(cfg, tr->plan, &tr->public_plan->request.optim, err);
    if (s == SNUG_OK) s = check_augment(cfg, tr->g, err);
    if (s != SNUG_OK) return s;
    /* another log (or none) from now on: the open one is complete, every line flushed as written */
    const char *was = tr->cfg.log_path, *now = cfg->log_path;
    if (tr->log && (!now || !was || strcmp(was, now) != 0)) {
        snug_run_log_close(tr->log, NULL);
        tr->log = NULL;
    }
    tr->cfg = *cfg;
    if (tr->cfg.schedule.reference_batch == 0) tr->cfg.schedule.reference_batch = 256;
    tr->opt.cfg = tr->cfg.optim;
    return SNUG_OK;
}

void snug_trainer_free(snug_trainer *tr) {
    if (!tr) return;
    snug_run_log_close(tr->log, NULL); /* every line was flushed as it was written */
    free(tr->data_classes);
    free(tr->data_table);
    exec_unbind(&tr->x);
    snug_mem_release_all(&tr->mem);
    trainer_free_copies(tr);
    free(tr->spans);
    free(tr);
}

size_t snug_trainer_param_count(const snug_trainer *tr) { return (size_t)tr->g->n_params; }

size_t snug_trainer_param_elements(const snug_trainer *tr) {
    size_t total = 0;
    for (int i = 0; i < tr->g->n_params; i++) total += tr->g->params[i].numel;
    return total;
}

const char *snug_trainer_param(const snug_trainer *tr, size_t i, size_t *numel, float **values, float **grads) {
    if (i >= (size_t)tr->g->n_params) return NULL;
    const graph_param *p = &tr->g->params[i];
    if (numel) *numel = p->numel;
    if (values) *values = (p->buffer ? tr->x.state : tr->x.params) + p->offset;
    if (values) trainer_copies_handed_out(tr); /* the caller may write through it after any step */
    if (grads) *grads = p->buffer ? NULL : tr->x.grads + p->offset;
    return p->name;
}

long snug_trainer_allreduce_count(const snug_trainer *tr) { return tr->grad_allreduces; }

double snug_trainer_allreduce_seconds(const snug_trainer *tr) { return tr->allreduce_s; }

void snug_trainer_memory(const snug_trainer *tr, snug_mem_report *rep) { snug_mem_report_get(&tr->mem, rep); }

const snug_plan *snug_trainer_plan(const snug_trainer *tr) { return tr->public_plan; }

double snug_trainer_flops_per_sample(const snug_trainer *tr) {
    return (tr->plan->fwd_flops + tr->plan->bwd_flops + tr->plan->recompute_flops) / (double)tr->plan->m;
}

/* The class count of the loss's logits: (classes), (tokens, classes) or (classes, H, W). */
static size_t loss_classes(const snug_graph *g) {
    const snug_shape *s = &g->tensors[g->nodes[g->loss_node].inputs[0]].shape;
    return s->rank == 2 ? s->dims[1] : s->dims[0];
}

void trainer_drop_log(snug_trainer *tr, snug_error *why) {
    snug_error_append(why, "; the run goes on without the log");
    if (tr->cfg.on_log_failed) tr->cfg.on_log_failed(why->message, tr->cfg.progress_user);
    snug_run_log_close(tr->log, NULL);
    tr->log = NULL;
}

snug_status trainer_check_dataset(const snug_trainer *tr, const snug_dataset *ds, snug_error *err) {
    const snug_graph *g = tr->g;
    snug_shape want = g->tensors[g->nodes[g->input_node].output].shape, have = snug_dataset_sample_shape(ds);
    char a[64], b[64];
    if (!shape_same(&want, &have))
        return snug_fail(err, SNUG_E_SHAPE, "the data has samples of shape %s but model '%s' takes %s",
                         snug_shape_format(&have, a, sizeof a), g->name, snug_shape_format(&want, b, sizeof b));
    size_t classes = loss_classes(g), targets = g->tensors[g->nodes[g->loss_node].output].numel;
    /* targets before classes: a class count alone is the one mismatch a caller fixes by setting it
     * (snug_model_builtin_classes), so it is reported only where everything else fits */
    if (ds->targets_per_sample != targets)
        return snug_fail(err, SNUG_E_SHAPE, "the data has %zu targets per sample but model '%s' scores %zu",
                         ds->targets_per_sample, g->name, targets);
    if (snug_dataset_classes(ds) != classes)
        return snug_fail(err, SNUG_E_SHAPE, "the data has %zu class%s but model '%s' predicts %zu",
                         snug_dataset_classes(ds), snug_dataset_classes(ds) == 1 ? "" : "es", g->name, classes);
    if (snug_dataset_size(ds) == 0) return snug_fail(err, SNUG_E_ARG, "the data set is empty");
    return SNUG_OK;
}

snug_status snug_trainer_check_dataset(const snug_trainer *tr, const snug_dataset *ds, snug_error *err) {
    return trainer_check_dataset(tr, ds, err);
}
