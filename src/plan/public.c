/* The public face of plans: build, summarise, list buffers and steps, and choose a micro-batch and policy. */
#define _POSIX_C_SOURCE 200809L
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "core/mem.h"
#include "ops/op.h"
#include "plan/plan.h"

struct snug_plan {
    const snug_graph *g;
    plan p;
};

const char *snug_phase_name(snug_phase p) {
    static const char *const names[] = {"forward", "recompute", "backward", "update"};
    return (unsigned)p < 4 ? names[p] : "unknown";
}

snug_status snug_parse_checkpoint(const char *text, snug_checkpoint_policy *out, snug_error *err) {
    *out = (snug_checkpoint_policy){SNUG_CHECKPOINT_NONE, 0};
    if (text && strcmp(text, "none") == 0) return SNUG_OK;
    if (text && strcmp(text, "sqrt") == 0) return out->kind = SNUG_CHECKPOINT_SQRT, SNUG_OK;
    if (text && strcmp(text, "cheap") == 0) return out->kind = SNUG_CHECKPOINT_CHEAP, SNUG_OK;
    if (text && strcmp(text, "auto") == 0) return out->kind = SNUG_CHECKPOINT_AUTO, SNUG_OK;
    if (text && strncmp(text, "every:", 6) == 0) {
        char *end;
        unsigned long long n = strtoull(text + 6, &end, 10);
        if (text[6] >= '1' && text[6] <= '9' && *end == '\0' && n > 0 && n < (1ull << 31)) {
            *out = (snug_checkpoint_policy){SNUG_CHECKPOINT_EVERY, (size_t)n};
            return SNUG_OK;
        }
    }
    return snug_fail(err, SNUG_E_ARG, "bad checkpoint policy '%s': use none, cheap, sqrt, every:N (N >= 1 layers) or auto",
                     text ? text : "");
}

char *snug_format_checkpoint(snug_checkpoint_policy p, char *buf, size_t len) {
    switch (p.kind) {
    case SNUG_CHECKPOINT_SQRT: snprintf(buf, len, "sqrt"); break;
    case SNUG_CHECKPOINT_CHEAP: snprintf(buf, len, "cheap"); break;
    case SNUG_CHECKPOINT_EVERY: snprintf(buf, len, "every:%zu", p.every); break;
    case SNUG_CHECKPOINT_AUTO: snprintf(buf, len, "auto"); break;
    default: snprintf(buf, len, "none"); break;
    }
    return buf;
}

snug_status snug_plan_new(const snug_graph *g, const snug_train_config *cfg, size_t micro_batch,
                          snug_checkpoint_policy policy, size_t budget, snug_plan **out, snug_error *err) {
    *out = NULL;
    snug_status s = snug_graph_check(g, err);
    if (s != SNUG_OK) return s;
    snug_plan *sp = calloc(1, sizeof *sp);
    if (!sp) return snug_fail(err, SNUG_E_OOM, "out of memory while planning");
    sp->g = g;
    s = plan_build_policy(g, micro_batch, omp_get_max_threads(), &cfg->optim, policy, budget, &sp->p, err);
    if (s != SNUG_OK) {
        free(sp);
        return s;
    }
    *out = sp;
    return SNUG_OK;
}

void snug_plan_free(snug_plan *p) {
    if (!p) return;
    plan_free(&p->p);
    free(p);
}

void snug_plan_summarize(const snug_plan *sp, snug_plan_summary *s) {
    const plan *p = &sp->p;
    memset(s, 0, sizeof *s);
    s->micro_batch = p->m;
    s->policy = p->variant.policy;
    s->selective = p->variant.selective;
    s->segments = (size_t)p->seg.n_segments;
    s->spared_segments = (size_t)__builtin_popcountll(p->variant.spared);
    memcpy(s->bytes, p->bytes, sizeof s->bytes);
    s->pending_bytes = p->pending_bytes;
    s->kept_bytes = p->kept_bytes;
    for (int i = 0; i < sp->g->n_nodes; i++) {
        if (!p->regen[i]) continue;
        s->regenerated_inputs++;
        s->regenerated_bytes += p->bufs[p->value_fwd[graph_base_tensor(sp->g, sp->g->nodes[i].inputs[0])]].bytes;
    }
    s->total = p->total;
    s->activation_peak = p->arena_bytes;
    s->live_peak = p->live_peak;
    const sched_step *st = &p->steps[p->live_peak_step];
    s->peak_op = st->node >= 0 ? sp->g->nodes[st->node].name : "update";
    s->peak_phase = st->phase;
    s->step_flops = p->fwd_flops + p->bwd_flops + p->recompute_flops;
    s->recompute_flops = p->recompute_flops;
}

size_t snug_plan_buffer_count(const snug_plan *p) { return (size_t)p->p.n_bufs; }

void snug_plan_buffer(const snug_plan *sp, size_t i, snug_plan_buffer_info *b) {
    static const char *const what[2][3] = {{"output", "gradient", "saved"},
                                           {"recomputed output", "gradient", "recomputed saved"}};
    const act_buffer *x = &sp->p.bufs[i];
    *b = (snug_plan_buffer_info){
        .layer = sp->g->nodes[x->node].name,
        .what = what[x->recomputed][x->kind],
        .category = SNUG_MEM_ACTIVATIONS,
        .bytes = x->bytes,
        .offset = x->offset,
        .first_step = (size_t)x->first,
        .last_step = (size_t)x->last,
        .in_place = x->shares >= 0,
    };
}

size_t snug_plan_step_count(const snug_plan *p) { return (size_t)p->p.n_steps; }

void snug_plan_step(const snug_plan *sp, size_t i, snug_plan_step_info *s) {
    const plan *p = &sp->p;
    const sched_step *st = &p->steps[i];
    const snug_graph *g = sp->g;
    memset(s, 0, sizeof *s);
    s->layer = st->node >= 0 ? g->nodes[st->node].name : "optimizer";
    s->phase = st->phase;
    s->bytes[SNUG_MEM_PARAMS] = p->params_bytes + p->state_bytes + p->kept_bytes;
    s->bytes[SNUG_MEM_GRADS] = p->params_bytes + p->pending_bytes;
    s->bytes[SNUG_MEM_OPTIM] = p->optim_bytes;
    s->bytes[SNUG_MEM_DATA] = p->input_bytes + p->targets_bytes;
    for (int b = 0; b < p->n_bufs; b++)
        if (p->bufs[b].shares < 0 && p->bufs[b].first <= (int)i && (int)i <= p->bufs[b].last)
            s->bytes[SNUG_MEM_ACTIVATIONS] += p->bufs[b].bytes;
    if (st->node < 0) {
        s->flops = 4.0 * (double)g->param_numel;
        return;
    }
    const graph_node *n = &g->nodes[st->node];
    if (n->op->workspace_bytes) s->bytes[SNUG_MEM_WORKSPACE] = n->op->workspace_bytes(n, p->m, p->threads);
    double f = (n->op->flops ? n->op->flops(n) : 0) * (double)p->m;
    s->flops = st->phase == SNUG_PHASE_BACKWARD ? plan_backward_flops(g, n) * (double)p->m : f;
}

/* Predicted throughput, relative: small micro-batches run GEMMs far below peak (about half at 8 samples), and
 * recompute adds its FLOPs to the step. */
static double predicted_throughput(const plan *p) {
    double m = (double)p->m, work = p->fwd_flops + p->bwd_flops;
    return m / (m + 8.0) / (1.0 + (work > 0 ? p->recompute_flops / work : 0));
}

static snug_status nothing_fits(const snug_graph *g, const snug_train_config *cfg, size_t budget, snug_error *err) {
    plan lean;
    snug_status s = plan_build_auto(g, 1, omp_get_max_threads(), &cfg->optim, 1, &lean, err);
    if (s != SNUG_OK) return s;
    char need[32], have[32], breakdown[256];
    snug_mem_format_breakdown(lean.bytes, breakdown, sizeof breakdown);
    snug_fail(err, SNUG_E_OOM,
              "out of memory: model '%s' does not fit %s even at micro-batch 1 with activations recomputed: the "
              "smallest budget that fits is %s (%s). Raise --mem to at least that.",
              g->name, snug_format_bytes(budget, have, sizeof have), snug_format_bytes(lean.total, need, sizeof need),
              breakdown);
    plan_free(&lean);
    return SNUG_E_OOM;
}

snug_status snug_plan_choose(const snug_graph *g, const snug_train_config *cfg, size_t budget, size_t *micro_batch,
                             snug_checkpoint_policy *policy, snug_error *err) {
    snug_status s = snug_graph_check(g, err);
    if (s != SNUG_OK) return s;
    if (cfg->batch == 0) return snug_fail(err, SNUG_E_ARG, "batch size 0: the global batch must be at least 1");
    double best = -1;
    size_t prev = 0;
    for (size_t k = 1; k <= cfg->batch; k++) {
        size_t m = (cfg->batch + k - 1) / k;
        if (m == prev) continue;
        prev = m;
        static const snug_checkpoint_policy none = {SNUG_CHECKPOINT_NONE, 0}, autop = {SNUG_CHECKPOINT_AUTO, 0};
        bool plain_fits = false;
        for (int pass = 0; pass < 2 && !plain_fits; pass++) {
            plan p;
            if ((s = plan_build_policy(g, m, omp_get_max_threads(), &cfg->optim, pass ? autop : none, budget, &p, err)) != SNUG_OK) return s;
            bool fits = !budget || p.total <= budget;
            double t = predicted_throughput(&p);
            if (fits && t > best) {
                best = t;
                *micro_batch = m;
                *policy = p.seg.n_segments ? autop : none;
            }
            plain_fits = fits && pass == 0;
            plan_free(&p);
        }
        if (plain_fits) break; /* smaller micro-batches without recompute are only slower */
    }
    return best >= 0 ? SNUG_OK : nothing_fits(g, cfg, budget, err);
}
