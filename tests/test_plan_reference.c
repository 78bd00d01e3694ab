/* The planner against reference versions of its stages: the straightforward algorithms, which scan every node
 * or every placed buffer for each question (quadratic or cubic in the graph's size, so kept here and not in the
 * library). For the built-in models, the test models and deep chains, under every policy, several micro-batches
 * and thread counts, each stage of a plan (segments and recompute, regenerated inputs, the schedule, every
 * buffer's offset and the arena) must be exactly what the reference computes from the same inputs; so every plan,
 * and every choice made by comparing plans (AUTO, spared segments, the micro-batch), is the reference's to the
 * byte. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "core/mem.h"
#include "ops/op.h"
#include "plan/plan.h"
#include "snug.h"
#include "test_util.h"

/* ---- reference: segments (plan/segments.c) and regenerated inputs (plan/regen.c) ---------------------------- */

static bool ref_is_layer(const graph_node *n) { return !(n->op->flags & (OP_IS_INPUT | OP_IS_VIEW)); }

static bool ref_is_cheap(const snug_graph *g, const graph_node *n) {
    if (!ref_is_layer(n) || (n->op->flags & OP_IS_LOSS)) return false;
    double f = n->op->flops ? n->op->flops(n) : 0, out = (double)g->tensors[n->output].numel;
    return f < 16.0 * out && out >= (double)g->tensors[n->inputs[0]].numel;
}

static bool ref_reads(const snug_graph *g, const graph_node *n, snug_tensor t) {
    for (int i = 0; i < n->n_inputs; i++)
        if (graph_base_tensor(g, n->inputs[i]) == t) return true;
    return false;
}

static bool ref_kept_anyway(const snug_graph *g, snug_tensor t) {
    const graph_node *producer = &g->nodes[g->tensors[t].producer];
    if (producer->op->flags & (OP_IS_INPUT | OP_KEEPS_OUTPUT)) return true;
    for (int c = 0; c < g->n_nodes; c++) {
        const graph_node *n = &g->nodes[c];
        if (ref_is_layer(n) && (n->op->flags & OP_KEEPS_INPUT) && ref_reads(g, n, t)) return true;
    }
    return false;
}

static bool ref_sole_reader(const snug_graph *g, snug_tensor base, int reader) {
    for (int i = 0; i < g->n_nodes; i++) {
        const graph_node *n = &g->nodes[i];
        if (i == reader || (n->op->flags & OP_IS_VIEW)) continue;
        for (int k = 0; k < n->n_inputs; k++)
            if (graph_base_tensor(g, n->inputs[k]) == base) return false;
    }
    return true;
}

/* Every plan checked here is float32 with its products left to snug (plan_variant_of's). */
static int ref_regen_producer(const snug_graph *g, int consumer) {
    const graph_node *n = &g->nodes[consumer];
    const plan_variant fp32 = plan_variant_of((snug_checkpoint_policy){SNUG_CHECKPOINT_NONE, 0});
    if (!(n->op->flags & OP_REGEN_INPUT) || n->n_inputs < 1 || plan_op_stage(n, &fp32, 1, 1) == 0) return -1;
    const snug_tensor base = graph_base_tensor(g, n->inputs[0]);
    const int producer = g->tensors[base].producer;
    if (producer < 0 || producer == g->input_node) return -1;
    const graph_node *pn = &g->nodes[producer];
    return pn->op->regen && pn->n_inputs == 1 && ref_sole_reader(g, base, consumer) ? producer : -1;
}

static int ref_regen_source(const snug_graph *g, int producer) {
    return g->tensors[graph_base_tensor(g, g->nodes[producer].inputs[0])].producer;
}

static size_t ref_layer_count(const snug_graph *g) {
    size_t n = 0;
    for (int i = 0; i < g->n_nodes; i++) n += ref_is_layer(&g->nodes[i]);
    return n;
}

static void ref_assign_segments(const snug_graph *g, snug_checkpoint_policy policy, int *segment) {
    if (policy.kind == SNUG_CHECKPOINT_CHEAP) {
        int seg = 0;
        for (int i = 0; i < g->n_nodes; i++) {
            segment[i] = seg;
            if (ref_is_layer(&g->nodes[i]) && !ref_is_cheap(g, &g->nodes[i])) seg++;
        }
        return;
    }
    size_t len = policy.kind == SNUG_CHECKPOINT_SQRT    ? (size_t)ceil(sqrt((double)ref_layer_count(g)))
                 : policy.kind == SNUG_CHECKPOINT_EVERY ? policy.every
                                                        : 0,
           n = 0;
    int *layers = malloc(((size_t)g->n_nodes + 1) * sizeof *layers);
    int *seg_of_layer = calloc((size_t)g->n_nodes + 1, sizeof *seg_of_layer);
    assert_non_null(layers);
    assert_non_null(seg_of_layer);
    for (int i = 0; i < g->n_nodes; i++)
        if (ref_is_layer(&g->nodes[i])) layers[n++] = i;
    int seg = 0;
    for (size_t i = 0; len && i < n; seg++) {
        size_t cut = i + len - 1 < n ? i + len - 1 : n - 1;
        if (policy.kind == SNUG_CHECKPOINT_SQRT) {
            size_t lo = i + (len > 1 ? len / 2 : 1) - 1, hi = i + len + len / 2 - 1, best = cut;
            if (hi > n - 1) hi = n - 1;
            for (size_t c = lo; c <= hi; c++) {
                size_t a = g->tensors[g->nodes[layers[c]].output].numel,
                       b = g->tensors[g->nodes[layers[best]].output].numel;
                if (a < b || (a == b && (c > cut ? c - cut : cut - c) < (best > cut ? best - cut : cut - best)))
                    best = c;
            }
            cut = best;
        }
        for (size_t c = i; c <= cut; c++) seg_of_layer[c] = seg;
        i = cut + 1;
    }
    for (int i = 0, k = 0; i < g->n_nodes; i++) {
        if (ref_is_layer(&g->nodes[i])) segment[i] = len ? seg_of_layer[k++] : 0;
        else segment[i] = i ? segment[i - 1] : 0;
    }
    free(layers);
    free(seg_of_layer);
}

static void ref_keep_cheap_only(const snug_graph *g, bool *drop) {
    for (int i = 0; i < g->n_nodes; i++) {
        const graph_node *n = &g->nodes[i];
        drop[i] = drop[i] && ref_is_cheap(g, n);
        size_t kept_for_replay = 0;
        for (int k = 0; drop[i] && k < n->n_inputs; k++) {
            snug_tensor t = graph_base_tensor(g, n->inputs[k]);
            bool repeated = false;
            for (int j = 0; j < k; j++) repeated |= graph_base_tensor(g, n->inputs[j]) == t;
            if (!repeated && !drop[g->tensors[t].producer] && !ref_kept_anyway(g, t))
                kept_for_replay += g->tensors[t].numel;
        }
        drop[i] = drop[i] && kept_for_replay < g->tensors[n->output].numel;
    }
}

static void ref_drop_only_useful(const snug_graph *g, bool *drop) {
    int *reader = malloc(((size_t)g->n_nodes + 1) * sizeof *reader);
    assert_non_null(reader);
    for (int i = 0; i < g->n_nodes; i++) reader[i] = -1;
    for (int c = 0; c < g->n_nodes; c++) {
        const int producer = ref_regen_producer(g, c);
        if (producer >= 0) reader[producer] = c;
    }
    for (int i = g->n_nodes - 1; i >= 0; i--) {
        snug_tensor out = g->nodes[i].output;
        bool regenerated = reader[i] >= 0 && !drop[reader[i]] && !drop[ref_regen_source(g, i)];
        bool useful = drop[i] && ref_kept_anyway(g, out) && !regenerated;
        for (int c = i + 1; drop[i] && !useful && c < g->n_nodes; c++) useful = drop[c] && ref_reads(g, &g->nodes[c], out);
        drop[i] = drop[i] && useful;
    }
    free(reader);
}

/* The reference segments of variant v: segment per node, recompute per node, counted segments. */
static void ref_segment(const snug_graph *g, const plan_variant *v, int *segment, bool *recompute, int *n_segments) {
    bool *crossing = calloc((size_t)g->n_nodes + 1, sizeof *crossing);
    assert_non_null(crossing);
    ref_assign_segments(g, v->policy, segment);
    int last = 0;
    for (int i = 0; i < g->n_nodes; i++)
        if (segment[i] > last) last = segment[i];
    for (int c = 0; c < g->n_nodes; c++) {
        const graph_node *n = &g->nodes[c];
        if (!ref_is_layer(n)) continue;
        for (int i = 0; i < n->n_inputs; i++) {
            int producer = g->tensors[graph_base_tensor(g, n->inputs[i])].producer;
            if (segment[producer] != segment[c]) crossing[producer] = true;
        }
    }
    for (int i = 0; i < g->n_nodes; i++)
        recompute[i] = ref_is_layer(&g->nodes[i]) && segment[i] < last && !crossing[i] &&
                       (v->recomputed_segments < 0 || segment[i] < v->recomputed_segments) &&
                       !(segment[i] < 64 && (v->spared >> segment[i] & 1));
    if (v->selective) ref_keep_cheap_only(g, recompute);
    ref_drop_only_useful(g, recompute);
    int counted = -1;
    *n_segments = 0;
    for (int i = 0; i < g->n_nodes; i++)
        if (recompute[i] && segment[i] != counted) {
            (*n_segments)++;
            counted = segment[i];
        }
    free(crossing);
}

static bool ref_regenerates(const snug_graph *g, const plan *p, int i) {
    const int producer = ref_regen_producer(g, i);
    return !p->variant.no_regen && producer >= 0 && !p->seg.recompute[i] && !p->seg.recompute[producer] &&
           !p->seg.recompute[ref_regen_source(g, producer)];
}

/* ---- reference: the schedule (plan/schedule.c) --------------------------------------------------------------- */

static bool ref_opens_segment_backward(const snug_graph *g, const plan_segments *s, int i) {
    for (int j = i + 1; j < g->n_nodes; j++)
        if (ref_is_layer(&g->nodes[j]) && s->segment[j] == s->segment[i]) return false;
    for (int j = i; j >= 0 && s->segment[j] == s->segment[i]; j--)
        if (s->recompute[j]) return true;
    return false;
}

static int ref_schedule(const snug_graph *g, const plan_segments *seg, sched_step *steps) {
    int n = 0;
    for (int i = 0; i < g->n_nodes; i++)
        if (ref_is_layer(&g->nodes[i])) steps[n++] = (sched_step){i, SNUG_PHASE_FORWARD};
    for (int i = g->n_nodes - 1; i >= 0; i--) {
        if (!ref_is_layer(&g->nodes[i])) continue;
        if (ref_opens_segment_backward(g, seg, i)) {
            int first = i;
            while (first > 0 && seg->segment[first - 1] == seg->segment[i]) first--;
            for (int j = first; j <= i; j++)
                if (seg->recompute[j]) steps[n++] = (sched_step){j, SNUG_PHASE_RECOMPUTE};
        }
        steps[n++] = (sched_step){i, SNUG_PHASE_BACKWARD};
    }
    steps[n++] = (sched_step){-1, SNUG_PHASE_UPDATE};
    return n;
}

/* ---- reference: arena offsets (plan/arena.c) ----------------------------------------------------------------- */

typedef struct ref_key {
    size_t bytes;
    int first, index, span;
} ref_key;

static int ref_by_size_desc(const void *a, const void *b) {
    const ref_key *x = a, *y = b;
    if (x->bytes != y->bytes) return x->bytes < y->bytes ? 1 : -1;
    if (x->first != y->first) return x->first < y->first ? -1 : 1;
    return x->index - y->index;
}

static int ref_by_span_desc(const void *a, const void *b) {
    const ref_key *x = a, *y = b;
    if (x->span != y->span) return x->span < y->span ? 1 : -1;
    return ref_by_size_desc(a, b);
}

static bool ref_meet(const act_buffer *a, const act_buffer *b) { return a->first <= b->last && b->first <= a->last; }

static void ref_insert_by_offset(act_buffer **placed, int n, act_buffer *b) {
    int i = n;
    while (i > 0 && placed[i - 1]->offset > b->offset) {
        placed[i] = placed[i - 1];
        i--;
    }
    placed[i] = b;
}

static size_t ref_lowest_fit(const act_buffer *b, act_buffer **placed, int n_placed, act_buffer **scratch) {
    int n = 0;
    for (int i = 0; i < n_placed; i++)
        if (ref_meet(b, placed[i])) scratch[n++] = placed[i];
    size_t offset = 0;
    for (int i = 0; i < n; i++) {
        if (scratch[i]->offset >= offset + b->bytes) break;
        size_t end = scratch[i]->offset + scratch[i]->bytes;
        if (end > offset) offset = end;
    }
    return offset;
}

typedef struct ref_parts {
    size_t m;
    int T;
} ref_parts;

static size_t ref_part_cut(const ref_parts *tp, size_t start, size_t bytes, int t) {
    const size_t num = tp->m >= (size_t)tp->T ? tp->m * (size_t)t / (size_t)tp->T : (size_t)t;
    const size_t den = tp->m >= (size_t)tp->T ? tp->m : (size_t)tp->T;
    return start + (size_t)((double)bytes * (double)num / (double)den);
}

static size_t ref_crossed_bytes(const ref_parts *tp, size_t x, size_t xb, size_t y, size_t yb) {
    const size_t lo = x > y ? x : y, hi = x + xb < y + yb ? x + xb : y + yb;
    size_t same = 0;
    for (int t = 0; t < tp->T; t++) {
        const size_t xs = ref_part_cut(tp, x, xb, t), ys = ref_part_cut(tp, y, yb, t);
        const size_t xe = t + 1 < tp->T ? ref_part_cut(tp, x, xb, t + 1) : x + xb;
        const size_t ye = t + 1 < tp->T ? ref_part_cut(tp, y, yb, t + 1) : y + yb;
        const size_t s = xs > ys ? xs : ys, e = xe < ye ? xe : ye;
        if (e > s) same += e - s;
    }
    return hi > lo ? hi - lo - same : 0;
}

static size_t ref_crossed_with_placed(const ref_parts *tp, const act_buffer *b, size_t offset, act_buffer **placed,
                                      int n_placed) {
    size_t total = 0;
    for (int i = 0; i < n_placed; i++)
        if (placed[i]->offset < offset + b->bytes && offset < placed[i]->offset + placed[i]->bytes)
            total += ref_crossed_bytes(tp, placed[i]->offset, placed[i]->bytes, offset, b->bytes);
    return total;
}

typedef struct ref_work {
    act_buffer **placed, **live, **near;
    size_t *cand;
    size_t largest;     /* the largest buffer's bytes */
} ref_work;

static int ref_by_value(const void *a, const void *b) {
    const size_t x = *(const size_t *)a, y = *(const size_t *)b;
    return (x > y) - (x < y);
}

static void ref_try_gap(const ref_parts *tp, const act_buffer *b, size_t lo, size_t hi, int n_placed, ref_work *w,
                        size_t *best, size_t *best_crossed) {
    if (hi < lo + b->bytes) return;
    int n = 0, nc = 0;
    for (int i = 0; i < n_placed; i++)
        if (w->placed[i]->offset < hi && w->placed[i]->offset + w->placed[i]->bytes > lo) w->near[n++] = w->placed[i];
    w->cand[nc++] = lo;
    w->cand[nc++] = hi - b->bytes;
    for (int i = 0; i < n; i++)
        for (int t = 1; t < tp->T; t++) {
            const size_t at = ref_part_cut(tp, w->near[i]->offset, w->near[i]->bytes, t),
                         rel = ref_part_cut(tp, 0, b->bytes, t);
            if (at < rel) continue;
            const size_t o = (at - rel) / SNUG_MEM_ALIGN * SNUG_MEM_ALIGN;
            if (o >= lo && o + b->bytes <= hi) w->cand[nc++] = o;
        }
    qsort(w->cand, (size_t)nc, sizeof *w->cand, ref_by_value);
    for (int i = 0; i < nc; i++) {
        if (i > 0 && w->cand[i] == w->cand[i - 1]) continue;
        const size_t c = ref_crossed_with_placed(tp, b, w->cand[i], w->near, n);
        if (c < *best_crossed || (c == *best_crossed && w->cand[i] < *best)) {
            *best = w->cand[i];
            *best_crossed = c;
        }
    }
}

static bool ref_affine_fit(const ref_parts *tp, const act_buffer *b, size_t arena, int n_placed, ref_work *w,
                           size_t *offset) {
    int n = 0;
    for (int i = 0; i < n_placed; i++)
        if (ref_meet(b, w->placed[i])) w->live[n++] = w->placed[i];
    size_t best = SIZE_MAX, best_crossed = SIZE_MAX, lo = 0;
    for (int i = 0; i <= n; i++) {
        const size_t hi = i < n ? w->live[i]->offset : arena;
        const size_t window = 2 * b->bytes + 2 * w->largest; /* what plan/arena.c weighs of a gap */
        if (hi > lo) ref_try_gap(tp, b, lo, hi - lo > window ? lo + window : hi, n_placed, w, &best, &best_crossed);
        if (i < n && w->live[i]->offset + w->live[i]->bytes > lo) lo = w->live[i]->offset + w->live[i]->bytes;
    }
    *offset = best;
    return best != SIZE_MAX;
}

/* The first pass (tp NULL), or the second with the pinned roots at their first offsets placed first: -1, or
 * the first root the second finds no room for. */
static int ref_place(act_buffer *bufs, size_t *arena_bytes, const ref_key *order, int n, const ref_parts *tp,
                     size_t arena, const size_t *first, const bool *pinned, ref_work *w) {
    int n_placed = 0;
    *arena_bytes = 0;
    for (int pass = tp ? 0 : 1; pass < 2; pass++)
        for (int i = 0; i < n; i++) {
            act_buffer *b = &bufs[order[i].index];
            if (tp && pinned[i] != (pass == 0)) continue;
            if (!tp) b->offset = ref_lowest_fit(b, w->placed, n_placed, w->live);
            else if (pinned[i]) b->offset = first[i];
            else if (!ref_affine_fit(tp, b, arena, n_placed, w, &b->offset)) return i;
            ref_insert_by_offset(w->placed, n_placed++, b);
            if (b->offset + b->bytes > *arena_bytes) *arena_bytes = b->offset + b->bytes;
        }
    return -1;
}

/* The reference offsets of p's buffers (as planned: sizes, lifetimes, sharing) into bufs, and the arena. */
static size_t ref_assign_offsets(const plan *p, act_buffer *bufs) {
    const size_t nb = (size_t)p->n_bufs + 1, cuts = p->threads > 1 ? (size_t)p->threads - 1 : 1;
    ref_key *order = malloc(nb * sizeof *order);
    ref_work w = {.placed = malloc(nb * sizeof *w.placed), .live = malloc(nb * sizeof *w.live),
                  .near = malloc(nb * sizeof *w.near), .cand = malloc((nb * cuts + 2) * sizeof *w.cand)};
    assert_true(order && w.placed && w.live && w.near && w.cand);
    int n = 0;
    for (int b = 0; b < p->n_bufs; b++) {
        bufs[b].offset = 0;
        if (bufs[b].shares < 0) order[n++] = (ref_key){bufs[b].bytes, bufs[b].first, b, bufs[b].last - bufs[b].first};
    }
    qsort(order, (size_t)n, sizeof *order, ref_by_size_desc);
    w.largest = n ? order[0].bytes : 1;
    size_t arena = 0, *first = malloc(nb * sizeof *first);
    bool *pinned = calloc(nb, sizeof *pinned);
    assert_true(first && pinned);
    ref_place(bufs, &arena, order, n, NULL, 0, NULL, NULL, &w);
    if (arena > p->live_peak) { /* plan/arena.c's second order: the longest-lived first, where it takes less */
        ref_key *alt = malloc(nb * sizeof *alt);
        assert_true(alt);
        memcpy(alt, order, (size_t)n * sizeof *alt);
        qsort(alt, (size_t)n, sizeof *alt, ref_by_span_desc);
        size_t alt_arena = 0;
        ref_place(bufs, &alt_arena, alt, n, NULL, 0, NULL, NULL, &w);
        if (alt_arena < arena) memcpy(order, alt, (size_t)n * sizeof *order), arena = alt_arena;
        else ref_place(bufs, &arena, order, n, NULL, 0, NULL, NULL, &w);
        free(alt);
    }
    for (int i = 0; i < n; i++) first[i] = bufs[order[i].index].offset;
    const ref_parts tp = {.m = p->m, .T = p->threads};
    int failed = p->threads > 1 ? 0 : -1;
    /* plan/arena.c's tries: each pins one more root that found no room to its first offset */
    for (int t = 0; t < 8 && failed >= 0; t++) {
        const size_t first_arena = arena;
        failed = ref_place(bufs, &arena, order, n, &tp, first_arena, first, pinned, &w);
        if (failed >= 0) pinned[failed] = true, arena = first_arena;
    }
    if (failed >= 0) ref_place(bufs, &arena, order, n, NULL, 0, NULL, NULL, &w);
    free(first);
    free(pinned);
    for (int b = 0; b < p->n_bufs; b++) {
        int root = b;
        while (bufs[root].shares >= 0) root = bufs[root].shares;
        bufs[b].offset = bufs[root].offset;
    }
    free(order);
    free(w.placed);
    free(w.live);
    free(w.near);
    free(w.cand);
    return arena;
}

/* ---- the comparison ------------------------------------------------------------------------------------------ */

/* Every stage of p against the reference computed from the same inputs. */
static void check_plan(const snug_graph *g, const plan *p, const char *what) {
    const size_t nn = (size_t)g->n_nodes + 1;
    int *segment = malloc(nn * sizeof *segment), n_segments;
    bool *recompute = calloc(nn, sizeof *recompute);
    sched_step *steps = malloc((3 * nn + 1) * sizeof *steps);
    act_buffer *bufs = malloc(((size_t)p->n_bufs + 1) * sizeof *bufs);
    assert_true(segment && recompute && steps && bufs);

    ref_segment(g, &p->variant, segment, recompute, &n_segments);
    for (int i = 0; i < g->n_nodes; i++) {
        if (segment[i] != p->seg.segment[i] || recompute[i] != p->seg.recompute[i])
            fail_msg("%s: node %d (%s): segment %d recompute %d, reference %d %d", what, i, g->nodes[i].name,
                     p->seg.segment[i], p->seg.recompute[i], segment[i], recompute[i]);
        if (ref_regenerates(g, p, i) != p->regen[i])
            fail_msg("%s: node %d (%s): regen %d, reference %d", what, i, g->nodes[i].name, p->regen[i], !p->regen[i]);
    }
    assert_int_equal(n_segments, p->seg.n_segments);

    const int n_steps = ref_schedule(g, &p->seg, steps);
    assert_int_equal(n_steps, p->n_steps);
    for (int s = 0; s < n_steps; s++)
        if (steps[s].node != p->steps[s].node || steps[s].phase != p->steps[s].phase)
            fail_msg("%s: step %d: node %d phase %d, reference %d %d", what, s, p->steps[s].node, p->steps[s].phase,
                     steps[s].node, steps[s].phase);

    memcpy(bufs, p->bufs, (size_t)p->n_bufs * sizeof *bufs);
    const size_t arena = ref_assign_offsets(p, bufs);
    for (int b = 0; b < p->n_bufs; b++)
        if (bufs[b].offset != p->bufs[b].offset)
            fail_msg("%s: buffer %d (node %d, %zu bytes, steps %d-%d): offset %zu, reference %zu", what, b,
                     p->bufs[b].node, p->bufs[b].bytes, p->bufs[b].first, p->bufs[b].last, p->bufs[b].offset,
                     bufs[b].offset);
    assert_int_equal(arena, p->arena_bytes);
    free(segment);
    free(recompute);
    free(steps);
    free(bufs);
}

/* ---- the models ---------------------------------------------------------------------------------------------- */

/* input -> flatten -> n layers -> loss: ReLUs, or linear + ReLU pairs (blocks). */
static snug_graph *chain(int n, bool blocks) {
    snug_graph *g = snug_graph_new(blocks ? "linear-relu-chain" : "relu-chain");
    snug_tensor x = snug_flatten(g, "flat", snug_input(g, "input", 12, 1, 1));
    char name[32];
    for (int i = 0; i < n; i++) {
        snprintf(name, sizeof name, "l%d", i);
        x = blocks && i % 2 == 0 ? snug_linear(g, name, x, 12 + 4 * (i % 5)) : snug_relu(g, name, x);
    }
    snug_softmax_cross_entropy(g, "loss", snug_linear(g, "out", x, 5));
    assert_int_equal(snug_graph_check(g, NULL), SNUG_OK);
    return g;
}

/* Fan-out, residuals and concatenations of different widths: buffers of many sizes and crossing lifetimes. */
static snug_graph *branchy(void) {
    snug_graph *g = snug_graph_new("branchy");
    snug_tensor x = snug_relu(g, "r0", snug_conv2d(g, "c0", snug_input(g, "input", 2, 8, 8), 4, 3, 1, 1));
    snug_tensor skip = x;
    char name[5][32];
    for (int b = 0; b < 6; b++) {
        for (int i = 0; i < 5; i++) snprintf(name[i], sizeof name[i], "b%d.%d", b, i);
        snug_tensor h = snug_relu(g, name[1], snug_conv2d(g, name[0], x, 4, 3, 1, 1));
        if (b % 2) {
            x = snug_add(g, name[2], x, h);
        } else {
            x = snug_concat(g, name[2], snug_conv2d(g, name[3], h, 2, 1, 1, 0), skip);
            x = snug_conv2d(g, name[4], x, 4, 1, 1, 0);
        }
        if (b == 2) skip = x;
    }
    x = snug_maxpool2d(g, "pool", snug_relu(g, "rl", x), 2, 2);
    snug_softmax_cross_entropy(g, "loss", snug_linear(g, "out", snug_flatten(g, "flat", x), 3));
    assert_int_equal(snug_graph_check(g, NULL), SNUG_OK);
    return g;
}

static snug_graph *test_model(int i) {
    switch (i) {
    case 0: return chain(60, false);
    case 1: return chain(60, true);
    case 2: return branchy();
    default: return NULL;
    }
}

/* Every built-in model (and the test models) through plan_build, over the variants AUTO searches, micro-batches
 * and thread counts. */
static void variants_match_reference(void **state) {
    (void)state;
    const char *const *names = snug_model_names();
    snug_optim_config optim = snug_train_config_default().optim;
    int n_names = 0;
    while (names[n_names]) n_names++;
    for (int k = 0;; k++) {
        snug_graph *g = k < n_names ? model_named(names[k], NULL) : test_model(k - n_names);
        if (k >= n_names && !g) break;
        assert_non_null(g);
        const bool big = g->n_nodes > 150 || strstr(snug_graph_name(g), "hires") || strstr(snug_graph_name(g), "vgg");
        static const size_t ms[] = {1, 5, 8};
        static const int threads[] = {1, 2, 3, 4};
        for (int mi = 0; mi < 3; mi++)
            for (int ti = 0; ti < 4; ti++) {
                if (big && (mi != 1 || ti == 2)) continue;
                const op_product own = plan_compute_of(SNUG_PRECISION_FP32, SNUG_PRODUCTS_AUTO).product;
                plan_variant vs[] = {
                    plan_variant_of((snug_checkpoint_policy){SNUG_CHECKPOINT_NONE, 0}),
                    plan_variant_of((snug_checkpoint_policy){SNUG_CHECKPOINT_SQRT, 0}),
                    plan_variant_of((snug_checkpoint_policy){SNUG_CHECKPOINT_CHEAP, 0}),
                    {{SNUG_CHECKPOINT_EVERY, 2}, true, -1, 0, false, false, false, false, own, false, false},
                    {{SNUG_CHECKPOINT_EVERY, 3}, false, 2, 0x5, false, false, false, false, own, false, false},
                    {{SNUG_CHECKPOINT_EVERY, 1}, false, -1, 0, true, true, false, false, own, false, false},
                };
                for (size_t v = 0; v < sizeof vs / sizeof vs[0]; v++) {
                    plan p;
                    assert_int_equal(plan_build(g, ms[mi], threads[ti], &optim, &vs[v], &p, NULL), SNUG_OK);
                    char what[128];
                    snprintf(what, sizeof what, "%s m=%zu threads=%d variant %zu", snug_graph_name(g), ms[mi],
                             threads[ti], v);
                    check_plan(g, &p, what);
                    plan_free(&p);
                }
            }
        snug_graph_free(g);
    }
}

/* Whole requests: each policy as a user gives it (sqrt and every:N with their spared segments), AUTO under a
 * budget between the leanest plan and the plain one, and the micro-batch chosen for a budget. */
static void requests_match_reference(void **state) {
    (void)state;
    const char *const *names = snug_model_names();
    for (int k = 0; names[k]; k++) {
        snug_graph *g = model_named(names[k], NULL);
        assert_non_null(g);
        const bool big = g->n_nodes > 150 || strstr(names[k], "hires") || strstr(names[k], "vgg");
        const size_t batch = big ? 2 : 8;
        snug_plan_request req = snug_plan_request_default(batch);
        req.threads = 2;
        snug_plan *plain;
        assert_int_equal(snug_plan_new(g, &req, &plain, NULL, NULL), SNUG_OK);
        snug_plan_summary s;
        snug_plan_summarize(plain, &s);
        snug_plan_free(plain);
        const snug_checkpoint_policy policies[] = {{SNUG_CHECKPOINT_NONE, 0}, {SNUG_CHECKPOINT_SQRT, 0},
                                                   {SNUG_CHECKPOINT_CHEAP, 0}, {SNUG_CHECKPOINT_EVERY, 2},
                                                   {SNUG_CHECKPOINT_AUTO, 0}, {SNUG_CHECKPOINT_AUTO, 0}};
        for (size_t i = 0; i < sizeof policies / sizeof policies[0]; i++) {
            snug_plan_request r = req;
            r.checkpoint = policies[i];
            if (policies[i].kind == SNUG_CHECKPOINT_AUTO) {
                r.budget = s.total - s.bytes[SNUG_MEM_ACTIVATIONS] / 2;
                r.may_exceed_budget = true;
                if (i == 5) r.micro_batch = SNUG_MICRO_BATCH_AUTO, r.budget = s.total - s.bytes[SNUG_MEM_ACTIVATIONS] / 3;
            }
            snug_plan *sp;
            snug_error err;
            const snug_status st = snug_plan_new(g, &r, &sp, NULL, &err);
            if (st == SNUG_E_OOM && i == 5) continue; /* no micro-batch fits: nothing to compare */
            if (st != SNUG_OK) fail_msg("%s: %s", names[k], err.message);
            char what[128];
            snprintf(what, sizeof what, "%s request %zu", names[k], i);
            check_plan(g, &sp->p, what);
            snug_plan_free(sp);
        }
        snug_graph_free(g);
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(variants_match_reference),
        cmocka_unit_test(requests_match_reference),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
