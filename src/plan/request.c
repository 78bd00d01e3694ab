/* The one way from what a run asks for to its plan (snug_plan_new): a plan request names the global batch, the
 * micro-batch or "choose it", the checkpoint policy or "choose it", the budget, the optimizer, the threads and
 * the ranks. A request that fits gives its plan; one that does not gives a structured shortfall: what it needs,
 * the largest micro-batch that fits as asked and with recompute, and the smallest budget that fits at all.
 *
 * Choosing: with both micro-batch and policy free, of the micro-batches m = ceil(share/k), k = 1, 2, ..., the
 * largest that fits without recompute wins, unless checkpointing fits a larger m whose predicted throughput is
 * higher; with the policy fixed, the largest m that fits under it, evened out over the same number of passes.
 * Plans grow with m, so bisections find those micro-batches, and a batch of billions costs a few dozen plans.
 * Every probe only plans: nothing is allocated for the engine. A micro-batch whose samples would take more memory
 * than any machine addresses is refused before any planning, and no search goes past it. */
#define _POSIX_C_SOURCE 200809L
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/checked.h"
#include "core/error.h"
#include "ops/op.h"
#include "plan/plan.h"

static const snug_checkpoint_policy policy_none = {SNUG_CHECKPOINT_NONE, 0};
static const snug_checkpoint_policy policy_auto = {SNUG_CHECKPOINT_AUTO, 0};

snug_plan_request snug_plan_request_default(size_t batch) {
    snug_system_info info;
    snug_system_info_get(&info);
    return (snug_plan_request){
        .batch = batch,
        .micro_batch = batch,
        .checkpoint = {SNUG_CHECKPOINT_DEFAULT, 0},
        .optim = snug_optim_config_default(),
        .threads = info.threads,
        .ranks = 1,
        .data_threads = 1,
    };
}

size_t snug_plan_request_fit_samples(snug_plan_request *req, size_t samples) {
    const size_t asked = req->batch;
    if (samples == 0 || asked <= samples) return asked;
    req->batch = samples;
    if (req->micro_batch != SNUG_MICRO_BATCH_AUTO && req->micro_batch > samples) req->micro_batch = samples;
    return asked;
}

void snug_plan_request_whole_process(snug_plan_request *req, const snug_dataset *train, const snug_dataset *eval) {
    const size_t order = snug_dataset_size(train), per = sizeof(size_t);
    size_t bytes = order > SIZE_MAX / per ? SIZE_MAX : order * per;
    /* the training set is also read by the read-ahead threads, each with its own decoding scratch */
    const int readers = req->threads + (req->prefetch ? req->data_threads : 0);
    const size_t held[2] = {snug_dataset_memory(train, readers), snug_dataset_memory(eval, req->threads)};
    for (int i = 0; i < 2; i++) bytes = bytes > SIZE_MAX - held[i] ? SIZE_MAX : bytes + held[i];
    req->data_bytes = bytes;
    const size_t threads = req->threads > 1 ? (size_t)req->threads : 1;
    req->runtime_bytes = threads > SIZE_MAX / SNUG_RUNTIME_BYTES ? SIZE_MAX : threads * SNUG_RUNTIME_BYTES;
}

size_t snug_plan_request_for_data(snug_plan_request *req, const snug_data *d) {
    snug_system_info info;
    snug_system_info_get(&info);
    req->threads = info.threads;
    const size_t asked = snug_plan_request_fit_samples(req, d ? snug_dataset_size(d->train) : 0);
    if (req->prefetch == SNUG_PREFETCH_BY_DATA) req->prefetch = snug_data_read_ahead(d);
    snug_plan_request_whole_process(req, d ? d->train : NULL, d ? d->eval : NULL);
    return asked;
}

size_t plan_micro_batches(size_t samples, size_t m) { return samples / m + (samples % m != 0); }

/* The samples one rank takes of a global batch: the largest share. */
static size_t rank_share(const snug_plan_request *r) {
    return r->batch / (size_t)r->ranks + (r->batch % (size_t)r->ranks != 0);
}

/* Bytes one sample puts through the graph: its input and targets and every layer's output. A plan keeps a share
 * of those for each sample of a micro-batch, so a micro-batch whose share would pass PLAN_BYTES_CEILING is no
 * plan for any machine; refusing it up front bounds every size the planner computes, and every search. */
#define PLAN_BYTES_CEILING ((size_t)1 << 60)
/* More micro-batches read ahead than this buy nothing but memory: the reader is either faster than the step,
 * and a few slots absorb its jitter, or slower, and no ring keeps up. */
#define PREFETCH_MAX 64

static size_t sample_bytes(const snug_graph *g) {
    /* the targets: one per item of the loss */
    size_t numel = g->loss_node >= 0 ? g->tensors[g->nodes[g->loss_node].output].numel : 0;
    for (int i = 0; i < g->n_nodes; i++)
        if (!(g->nodes[i].op->flags & OP_IS_VIEW) && !size_add(numel, g->tensors[g->nodes[i].output].numel, &numel))
            return SIZE_MAX;
    return numel > SIZE_MAX / sizeof(float) ? SIZE_MAX : numel * sizeof(float);
}

size_t plan_micro_batch_ceiling(const snug_graph *g) { return PLAN_BYTES_CEILING / sample_bytes(g); }

static size_t at_most(size_t a, size_t b) { return a < b ? a : b; }

/* Refuses a micro-batch (the batch in one pass, when the micro-batch is not chosen) past the ceiling. */
static snug_status check_size(const snug_graph *g, const snug_plan_request *r, snug_error *err) {
    const size_t m = r->micro_batch == SNUG_MICRO_BATCH_AUTO ? 1 : r->micro_batch, ceiling = plan_micro_batch_ceiling(g);
    if (m <= ceiling) return SNUG_OK;
    char per[32];
    snug_format_bytes(sample_bytes(g), per, sizeof per);
    if (ceiling == 0)
        return snug_fail(err, SNUG_E_OVERFLOW, "model '%s' puts %s through its layers for one sample, more than the "
                         "1 EiB any plan may address", g->name, per);
    snug_fail(err, SNUG_E_OVERFLOW, "%s %zu of model '%s' is too large to plan: at %s of inputs, layer outputs and "
              "targets a sample, it would take over 1 EiB, more than any machine addresses; plan at most %zu samples "
              "per micro-batch", r->micro_batch == r->batch ? "batch" : "micro-batch", m, g->name, per, ceiling);
    if (r->micro_batch == r->batch)
        snug_error_append(err, " (split the batch into micro-batches, or have the micro-batch chosen for a budget)");
    return SNUG_E_OVERFLOW;
}

static snug_status check_request(const snug_plan_request *r, snug_error *err) {
    if (r->batch == 0) return snug_fail(err, SNUG_E_ARG, "batch size 0: the global batch must be at least 1");
    if (r->micro_batch == 0)
        return snug_fail(err, SNUG_E_ARG, "micro-batch 0: a micro-batch holds at least 1 sample (or ask for "
                         "SNUG_MICRO_BATCH_AUTO)");
    if (r->micro_batch != SNUG_MICRO_BATCH_AUTO && r->micro_batch > r->batch)
        return snug_fail(err, SNUG_E_ARG, "micro-batch %zu is larger than the batch %zu: the micro-batch splits the "
                         "global batch, so it must be at most %zu", r->micro_batch, r->batch, r->batch);
    if (r->checkpoint.kind == SNUG_CHECKPOINT_EVERY && r->checkpoint.every == 0)
        return snug_fail(err, SNUG_E_ARG, "checkpoint every:0: a segment needs at least 1 layer");
    if (r->budget == 0 && r->micro_batch == SNUG_MICRO_BATCH_AUTO)
        return snug_fail(err, SNUG_E_ARG, "an automatic micro-batch needs a memory budget to fit");
    if (r->budget == 0 && r->checkpoint.kind == SNUG_CHECKPOINT_AUTO)
        return snug_fail(err, SNUG_E_ARG, "an automatic checkpoint policy needs a memory budget to fit");
    if (r->threads < 1) return snug_fail(err, SNUG_E_ARG, "%d threads: plan for at least 1", r->threads);
    if (r->ranks < 1) return snug_fail(err, SNUG_E_ARG, "%d ranks: plan for at least 1", r->ranks);
    if (r->prefetch > PREFETCH_MAX)
        return snug_fail(err, SNUG_E_ARG, "%zu micro-batches read ahead: at most %d", r->prefetch, PREFETCH_MAX);
    if (r->prefetch && r->data_threads < 1)
        return snug_fail(err, SNUG_E_ARG, "%d threads read ahead: reading ahead takes at least 1", r->data_threads);
    if (r->precision != SNUG_PRECISION_FP32 && r->precision != SNUG_PRECISION_BF16)
        return snug_fail(err, SNUG_E_ARG, "precision %d: plan for SNUG_PRECISION_FP32 or SNUG_PRECISION_BF16",
                         (int)r->precision);
    if (r->products != SNUG_PRODUCTS_AUTO && r->products != SNUG_PRODUCTS_BLAS && r->products != SNUG_PRODUCTS_SNUG)
        return snug_fail(err, SNUG_E_ARG, "products %d: plan for SNUG_PRODUCTS_AUTO, SNUG_PRODUCTS_BLAS or "
                         "SNUG_PRODUCTS_SNUG", (int)r->products);
    return SNUG_OK;
}

/* The budget left to the engine once the data sets' bytes are counted (1 when they take it all: then nothing
 * fits, as it should). */
static size_t engine_budget(const snug_plan_request *r) {
    if (!r->budget) return 0;
    const size_t beside = r->data_bytes > SIZE_MAX - r->runtime_bytes ? SIZE_MAX : r->data_bytes + r->runtime_bytes;
    return r->budget > beside ? r->budget - beside : 1;
}

/* Adds what the request holds beside the engine's blocks to a plan just built (s: its status); frees it when
 * the sums overflow. */
static snug_status add_beside(const snug_plan_request *r, plan *p, snug_status s, snug_error *err) {
    p->ring_threads = r->data_threads;
    if (s != SNUG_OK || plan_add_beside(p, r->data_bytes, r->runtime_bytes, r->prefetch)) return s;
    plan_free(p);
    return snug_fail(err, SNUG_E_OVERFLOW, "the data sets' %zu bytes, the runtime's %zu and the plan's overflow "
                     "size_t", r->data_bytes, r->runtime_bytes);
}

/* The plan of m under policy; a probe only asks whether it fits, so it may be left unplaced past the budget
 * (plan_build_under: then it does not fit either). */
static snug_status build_as(const snug_graph *g, const snug_plan_request *r, size_t m, snug_checkpoint_policy policy,
                            bool probe, plan_memo *memo, plan *p, snug_error *err) {
    const plan_compute how = plan_compute_of(r->precision, r->products);
    const size_t budget = engine_budget(r), ceiling = probe && budget ? budget : SIZE_MAX;
    return add_beside(r, p, plan_build_policy_under(g, m, r->threads, &r->optim, policy, how, budget, ceiling, memo,
                                                    p, err), err);
}

static snug_status build(const snug_graph *g, const snug_plan_request *r, size_t m, snug_checkpoint_policy policy,
                         plan_memo *memo, plan *p, snug_error *err) {
    return build_as(g, r, m, policy, false, memo, p, err);
}

static snug_status build_probe(const snug_graph *g, const snug_plan_request *r, size_t m,
                               snug_checkpoint_policy policy, plan_memo *memo, plan *p, snug_error *err) {
    return build_as(g, r, m, policy, true, memo, p, err);
}

static bool fits(const snug_plan_request *r, const plan *p) { return !r->budget || p->total <= r->budget; }

/* Predicted throughput, relative: small micro-batches run products far below peak (about half at 8 samples),
 * and recompute adds its FLOPs to the step. */
static double predicted_throughput(const plan *p) {
    double m = (double)p->m, work = p->fwd_flops + p->bwd_flops;
    return m / (m + 8.0) / (1.0 + (work > 0 ? p->recompute_flops / work : 0));
}

/* Whether the plan of m under policy fits. */
static snug_status fits_as(const snug_graph *g, const snug_plan_request *r, size_t m, snug_checkpoint_policy policy,
                           plan_memo *memo, bool *ok, snug_error *err) {
    plan p;
    snug_status s = build_probe(g, r, m, policy, memo, &p, err);
    if (s != SNUG_OK) return s;
    *ok = fits(r, &p);
    plan_free(&p);
    return SNUG_OK;
}

/* Whether AUTO at m fits, as its search says, in fewer plans: none and cheap are the search's first candidates,
 * and sqrt without its spared segments totals at least the spared sqrt the search weighs, so where one of them
 * fits, the search keeps a fitting plan too. Only where none does is the search made (and kept in the memo). */
static snug_status auto_fits(const snug_graph *g, const snug_plan_request *r, size_t m, plan_memo *memo, bool *ok,
                             snug_error *err) {
    plan_variant v;
    if (plan_memo_find(memo, m, policy_auto, engine_budget(r), engine_budget(r), &v))
        return fits_as(g, r, m, policy_auto, memo, ok, err);
    const snug_checkpoint_policy first[] = {policy_none, {SNUG_CHECKPOINT_CHEAP, 0}};
    for (size_t i = 0; i < sizeof first / sizeof first[0]; i++) {
        snug_status s = fits_as(g, r, m, first[i], memo, ok, err);
        if (s != SNUG_OK || *ok) return s;
    }
    plan p;
    v = plan_variant_of((snug_checkpoint_policy){SNUG_CHECKPOINT_SQRT, 0});
    plan_variant_compute(&v, plan_compute_of(r->precision, r->products));
    snug_status s = add_beside(r, &p, plan_build_under(g, m, r->threads, &r->optim, &v, engine_budget(r), &p, err), err);
    if (s != SNUG_OK) return s;
    *ok = fits(r, &p);
    plan_free(&p);
    return *ok ? SNUG_OK : fits_as(g, r, m, policy_auto, memo, ok, err);
}

/* The largest m in [1, limit] whose plan under policy fits, or 0. */
static snug_status largest_fitting(const snug_graph *g, const snug_plan_request *r, snug_checkpoint_policy policy,
                                   size_t limit, plan_memo *memo, size_t *m_out, snug_error *err) {
    size_t lo = 0, hi = limit;
    while (lo < hi) {
        const size_t mid = lo + (hi - lo + 1) / 2;
        bool ok = false;
        snug_status s = policy.kind == SNUG_CHECKPOINT_AUTO && r->budget ? auto_fits(g, r, mid, memo, &ok, err)
                                                                         : fits_as(g, r, mid, policy, memo, &ok, err);
        if (s != SNUG_OK) return s;
        if (ok) lo = mid;
        else hi = mid - 1;
    }
    *m_out = lo;
    return SNUG_OK;
}

/* With micro-batch and policy both free, at most this many micro-batches are planned with recompute. */
#define RECOMPUTE_PROBES 32

/* The best fitting plan so far, by predicted throughput. */
typedef struct choice {
    double best;
    size_t m;
    snug_checkpoint_policy policy;
    bool found;
} choice;

/* Keeps micro-batch m under policy (AUTO: what it resolves to) when its plan fits and beats the choice so far. */
static snug_status probe(const snug_graph *g, const snug_plan_request *r, size_t m, snug_checkpoint_policy policy,
                         plan_memo *memo, choice *c, snug_error *err) {
    plan p;
    snug_status s = build_probe(g, r, m, policy, memo, &p, err);
    if (s != SNUG_OK) return s;
    const double t = predicted_throughput(&p);
    if (fits(r, &p) && t > c->best)
        *c = (choice){.best = t, .m = m, .policy = p.seg.n_segments ? policy_auto : policy_none, .found = true};
    plan_free(&p);
    return SNUG_OK;
}

/* The largest micro-batch ceil(share/k) at most m: m evened out over the passes it needs. */
static size_t evened(size_t share, size_t m) { return plan_micro_batches(share, plan_micro_batches(share, m)); }

/* The micro-batches ceil(share/k) in (above, top], largest first: every one when there are at most
 * RECOMPUTE_PROBES, else that many spread evenly between. Returns the count. */
static size_t recompute_candidates(size_t share, size_t above, size_t top, size_t ms[RECOMPUTE_PROBES + 1]) {
    size_t n = 0;
    for (size_t m = evened(share, top); m > above && n <= RECOMPUTE_PROBES; m = m > 1 ? evened(share, m - 1) : 0)
        ms[n++] = m;
    if (n <= RECOMPUTE_PROBES) return n;
    n = 0;
    for (size_t i = 0; i < RECOMPUTE_PROBES; i++) {
        const size_t m = evened(share, top - (size_t)((double)(top - above - 1) * (double)i / (RECOMPUTE_PROBES - 1)));
        if (m > above && (n == 0 || m < ms[n - 1])) ms[n++] = m;
    }
    return n;
}

/* Micro-batch and policy both free: of the micro-batches m = ceil(share/k), k = 1, 2, ..., the largest that fits
 * without recompute (m0), unless a larger m that fits with recompute is predicted to run faster. Plans grow with
 * m, so m0 and the largest m that fits with recompute are bisections, and the micro-batches between them are
 * planned with recompute, largest first (a tie keeps the larger): every one, or a spread of RECOMPUTE_PROBES of
 * them, so that a batch of billions costs a few dozen plans. c->found stays false when nothing fits. */
static snug_status choose_both(const snug_graph *g, const snug_plan_request *r, plan_memo *memo, choice *c,
                               snug_error *err) {
    const size_t share = rank_share(r), limit = at_most(share, plan_micro_batch_ceiling(g));
    size_t plain = 0, with_recompute = 0, ms[RECOMPUTE_PROBES + 1];
    *c = (choice){.best = -1};
    snug_status s = largest_fitting(g, r, policy_none, limit, memo, &plain, err);
    if (s == SNUG_OK) s = largest_fitting(g, r, policy_auto, limit, memo, &with_recompute, err);
    const size_t m0 = plain ? evened(share, plain) : 0;
    const size_t n = s == SNUG_OK && with_recompute > m0 ? recompute_candidates(share, m0, with_recompute, ms) : 0;
    for (size_t i = 0; i < n && s == SNUG_OK; i++) s = probe(g, r, ms[i], policy_auto, memo, c, err);
    if (s == SNUG_OK && m0) s = probe(g, r, m0, policy_none, memo, c, err);
    return s;
}

/* The micro-batch and policy the request asks for, chosen where it leaves them free. *found is false when
 * nothing fits. */
static snug_status resolve(const snug_graph *g, const snug_plan_request *r, plan_memo *memo, size_t *m,
                           snug_checkpoint_policy *policy, bool *found, snug_error *err) {
    *found = true;
    *policy = r->checkpoint;
    if (r->micro_batch != SNUG_MICRO_BATCH_AUTO) {
        *m = r->micro_batch;
        return SNUG_OK;
    }
    if (r->checkpoint.kind == SNUG_CHECKPOINT_AUTO) {
        choice c;
        snug_status s = choose_both(g, r, memo, &c, err);
        *m = c.m;
        *policy = c.policy;
        *found = c.found;
        return s;
    }
    size_t largest = 0;
    snug_status s = largest_fitting(g, r, r->checkpoint, at_most(rank_share(r), plan_micro_batch_ceiling(g)), memo,
                                    &largest, err);
    if (s != SNUG_OK) return s;
    *found = largest > 0;
    if (*found) *m = plan_micro_batches(rank_share(r), plan_micro_batches(rank_share(r), largest));
    return SNUG_OK;
}

/* What the request needs (its plan, or micro-batch 1 where the micro-batch was free), and the ways out. */
static snug_status explain(const snug_graph *g, const snug_plan_request *r, const plan *asked,
                           snug_checkpoint_policy policy, plan_memo *memo, snug_plan_shortfall *why, snug_error *err) {
    memset(why, 0, sizeof *why);
    why->budget = r->budget;
    plan lean;
    /* the leanest plan there is */
    const plan_compute how = plan_compute_of(r->precision, r->products);
    snug_status s = add_beside(r, &lean, plan_build_auto(g, 1, r->threads, &r->optim, how, 1, &lean, err), err);
    if (s != SNUG_OK) return s;
    why->smallest_budget = lean.total;
    why->fixed = lean.bytes[SNUG_MEM_PARAMS] + lean.bytes[SNUG_MEM_GRADS] + lean.bytes[SNUG_MEM_OPTIM];
    const plan *need = asked ? asked : &lean;
    memcpy(why->bytes, need->bytes, sizeof why->bytes);
    why->needed = need->total;
    plan_free(&lean);
    const size_t limit = asked ? asked->m : at_most(rank_share(r), plan_micro_batch_ceiling(g));
    s = largest_fitting(g, r, policy, limit, memo, &why->largest_micro_batch, err);
    if (s == SNUG_OK && policy.kind != SNUG_CHECKPOINT_AUTO)
        s = largest_fitting(g, r, policy_auto, limit, memo, &why->largest_with_recompute, err);
    else why->largest_with_recompute = why->largest_micro_batch;
    return s;
}

/* "params 1.6, grads 1.6, ..., data 0.8 MiB" */
static void format_categories(const size_t bytes[SNUG_MEM_NCATEGORIES], char *buf, size_t len) {
    int n = 0;
    for (int c = 0; c < SNUG_MEM_NCATEGORIES && n >= 0 && (size_t)n < len; c++)
        n += snprintf(buf + n, len - (size_t)n, "%s%s %.1f", c ? ", " : "", snug_mem_category_name((snug_mem_category)c),
                      (double)bytes[c] / (1 << 20));
    if (n >= 0 && (size_t)n < len) snprintf(buf + n, len - (size_t)n, " MiB");
}

/* The message of a request that does not fit, in the API's terms. */
static snug_status refuse(const snug_graph *g, const snug_plan_request *r, const snug_plan_shortfall *why,
                          size_t m, snug_checkpoint_policy policy, snug_error *err) {
    char need[32], have[32], least[32], name[32], breakdown[256];
    snug_format_bytes(why->needed, need, sizeof need);
    snug_format_bytes(r->budget, have, sizeof have);
    snug_format_bytes_up(why->smallest_budget, least, sizeof least);
    snug_format_checkpoint(policy, name, sizeof name);
    format_categories(why->bytes, breakdown, sizeof breakdown);
    if (why->fixed > r->budget)
        return snug_fail(err, SNUG_E_OOM, "out of memory: model '%s' keeps %.1f MiB of parameters, gradients and "
                         "optimizer state whatever the micro-batch, over the budget of %s: no micro-batch or "
                         "checkpointing fits; the smallest budget that fits is %s.", g->name,
                         (double)why->fixed / (1 << 20), have, least);
    if (r->micro_batch == SNUG_MICRO_BATCH_AUTO)
        return snug_fail(err, SNUG_E_OOM, "out of memory: model '%s' does not fit %s even at micro-batch 1%s: the "
                         "smallest budget that fits is %s (%s).", g->name, have,
                         policy.kind == SNUG_CHECKPOINT_AUTO ? " with activations recomputed" : "", least, breakdown);
    snug_fail(err, SNUG_E_OOM, "out of memory: model '%s' at micro-batch %zu with checkpoint %s needs %s, over the "
              "budget of %s (%s).", g->name, m, name, need, have, breakdown);
    if (why->largest_micro_batch > 0)
        snug_error_append(err, " The largest micro-batch that fits is %zu", why->largest_micro_batch);
    else snug_error_append(err, " Not even micro-batch 1 fits that way");
    if (why->largest_with_recompute > why->largest_micro_batch)
        snug_error_append(err, "; with activations recomputed, %zu", why->largest_with_recompute);
    snug_error_append(err, "; the smallest budget that fits at all is %s.", least);
    return SNUG_E_OOM;
}

/* A plan that does not fit: explained and refused, or kept where the caller compares candidates. */
static snug_status over_budget(const snug_graph *g, const snug_plan_request *r, plan *p, size_t m,
                               snug_checkpoint_policy policy, plan_memo *memo, snug_plan_shortfall *why,
                               snug_error *err) {
    snug_plan_shortfall local;
    snug_plan_shortfall *w = why ? why : &local;
    snug_status s = explain(g, r, p, policy, memo, w, err);
    if (s == SNUG_OK) s = refuse(g, r, w, m, policy, err);
    return s;
}

static snug_status wrap(const snug_graph *g, const snug_plan_request *r, size_t m, snug_checkpoint_policy policy,
                        plan *p, snug_plan **out, snug_error *err) {
    snug_plan *sp = calloc(1, sizeof *sp);
    if (!sp) {
        plan_free(p);
        return snug_fail(err, SNUG_E_OOM, "out of memory while planning");
    }
    *sp = (snug_plan){.g = g, .p = *p, .request = *r, .requested_policy = policy, .share = rank_share(r),
                      .micro_batch_chosen = r->micro_batch == SNUG_MICRO_BATCH_AUTO};
    sp->request.micro_batch = m;
    sp->request.checkpoint = policy;
    *out = sp;
    return SNUG_OK;
}

/* SNUG_CHECKPOINT_DEFAULT as what it means: a budget with the micro-batch left free chooses the policy too (what
 * `--mem` alone does), so that a caller who sets only SNUG_MICRO_BATCH_AUTO is not left without checkpointing. */
static snug_plan_request resolve_default(const snug_plan_request *req) {
    snug_plan_request r = *req;
    if (r.checkpoint.kind == SNUG_CHECKPOINT_DEFAULT)
        r.checkpoint = r.micro_batch == SNUG_MICRO_BATCH_AUTO && r.budget > 0 ? policy_auto : policy_none;
    return r;
}

/* snug_plan_new with the memo of a request whose searches were settled before (plan/memo.c): the candidate
 * table's plans ask what the request's own plan asked; the plan made owns no memo. */
snug_status plan_new_in(const snug_graph *g, const snug_plan_request *asked, plan_memo *memo, snug_plan **out,
                        snug_plan_shortfall *why, snug_error *err) {
    *out = NULL;
    const snug_plan_request resolved = resolve_default(asked), *req = &resolved;
    if (why) memset(why, 0, sizeof *why);
    snug_status s = snug_graph_check(g, err);
    if (s == SNUG_OK) s = check_request(req, err);
    if (s == SNUG_OK) s = check_size(g, req, err);
    size_t m = 0;
    snug_checkpoint_policy policy;
    bool found = false;
    if (s == SNUG_OK) s = resolve(g, req, memo, &m, &policy, &found, err);
    if (s != SNUG_OK) return s;
    if (!found) return over_budget(g, req, NULL, 0, req->checkpoint, memo, why, err);
    plan p;
    if ((s = build(g, req, m, policy, memo, &p, err)) != SNUG_OK) return s;
    if (!fits(req, &p) && !req->may_exceed_budget) {
        s = over_budget(g, req, &p, m, policy, memo, why, err);
        plan_free(&p);
        return s;
    }
    return wrap(g, req, m, policy, &p, out, err);
}

snug_status snug_plan_new(const snug_graph *g, const snug_plan_request *asked, snug_plan **out,
                          snug_plan_shortfall *why, snug_error *err) {
    plan_memo *memo = plan_memo_new(); /* without one (no memory for it), the searches only repeat */
    snug_status s = plan_new_in(g, asked, memo, out, why, err);
    if (s == SNUG_OK) (*out)->memo = memo;
    else plan_memo_free(memo);
    return s;
}

const snug_plan_request *snug_plan_request_of(const snug_plan *p) { return &p->request; }
