/* The public face of plans: build, summarise, list buffers and steps, and choose a micro-batch and policy. */
#define _POSIX_C_SOURCE 200809L
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/checked.h"
#include "core/error.h"
#include "core/mem.h"
#include "ops/op.h"
#include "plan/plan.h"

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
    case SNUG_CHECKPOINT_DEFAULT: snprintf(buf, len, "default"); break;
    default: snprintf(buf, len, "none"); break;
    }
    return buf;
}

void snug_plan_free(snug_plan *p) {
    if (!p) return;
    plan_free(&p->p);
    plan_memo_free(p->memo);
    free(p);
}

/* The float32 bytes of a regenerated input t: its forward instance's, or where forward made only its packed
 * copy (plan.packed_only), what that instance would have taken. */
static size_t regenerated_bytes(const snug_graph *g, const plan *p, snug_tensor t) {
    if (p->value_fwd[t] >= 0) return p->bufs[p->value_fwd[t]].bytes;
    size_t bytes;
    return size_mul(g->tensors[t].numel, p->m, &bytes) && size_mul(bytes, sizeof(float), &bytes) ? bytes : 0;
}


void snug_plan_summarize(const snug_plan *sp, snug_plan_summary *s) {
    const plan *p = &sp->p;
    const snug_plan_request *r = &sp->request;
    memset(s, 0, sizeof *s);
    s->batch = r->batch;
    s->ranks = r->ranks;
    s->share = sp->share;
    s->micro_batch = p->m;
    s->micro_batch_chosen = sp->micro_batch_chosen;
    s->micro_batches = plan_micro_batches(sp->share, p->m);
    s->last_micro_batch = sp->share - (s->micro_batches - 1) * p->m;
    s->budget = r->budget;
    s->threads = p->threads;
    s->requested = sp->requested_policy;
    s->policy = p->variant.policy;
    s->selective = p->variant.selective;
    s->segments = (size_t)p->seg.n_segments;
    s->spared_segments = (size_t)__builtin_popcountll(p->variant.spared);
    memcpy(s->bytes, p->bytes, sizeof s->bytes);
    s->pending_bytes = p->pending_bytes;
    s->kept_bytes = p->kept_bytes;
    s->read_ahead_bytes = p->ring_bytes;
    for (int i = 0; i < sp->g->n_nodes; i++) {
        s->batch_statistics_layers += sp->g->nodes[i].op->saved_batch_bytes != NULL;
        if (!p->regen[i]) continue;
        s->regenerated_inputs++;
        s->regenerated_bytes += regenerated_bytes(sp->g, p, graph_base_tensor(sp->g, sp->g->nodes[i].inputs[0]));
    }
    s->total = p->total;
    s->activation_peak = p->arena_bytes;
    s->live_peak = p->live_peak;
    plan_peak(sp, &s->peak, &s->peak_step);
    const sched_step *st = &p->steps[s->peak_step];
    s->peak_op = st->node >= 0 ? sp->g->nodes[st->node].name : "update";
    s->peak_phase = st->phase;
    s->step_flops = p->fwd_flops + p->bwd_flops + p->recompute_flops;
    s->recompute_flops = p->recompute_flops;
    s->products = plan_product_name(p->variant.product);
}
