/* Checkpoint policies as segments. Layers (nodes that are neither the input nor a view) are cut into runs of N;
 * in every segment but the last, a layer's output is dropped after forward and recomputed in backward, unless
 * a layer of another segment reads it (a segment boundary, a residual or a skip crossing segments): those are
 * kept, which keeps every policy correct for any graph.
 *
 * Under every policy a layer is dropped only if backward reads its output or another dropped layer replays from
 * it: replaying a normalisation whose only reader is a kept ReLU would cost time and save nothing.
 * `selective` drops only outputs that are cheap to recompute (element-wise ops, normalisations, copies) and
 * whose inputs backward keeps anyway, so the replay costs one pass over memory and no tensor. The `cheap` policy is selective over segments that end at every expensive layer
 * (a convolution, a matrix product): conv -> BatchNorm -> ReLU -> conv then keeps the first convolution's output
 * (BatchNorm reads it in backward) and replays BatchNorm and ReLU from it just before the second convolution's
 * backward, instead of keeping both. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "ops/op.h"
#include "plan/plan.h"

static bool is_layer(const graph_node *n) { return !(n->op->flags & (OP_IS_INPUT | OP_IS_VIEW)); }

/* Cheap to recompute: fewer forward FLOPs per output element than this. Element-wise ops, normalisations (which
 * replay from their saved statistics) and copies cost 1 to 8; a convolution or a matrix product costs 2 per
 * multiply-add of its inner dimension, 16 already for a 1x1 convolution over 8 channels. */
#define CHEAP_FLOPS_PER_ELEMENT 16.0

/* A replay is a pass over memory, so a layer that shrinks its input is not cheap either: re-reading a 2x2
 * max-pool's input to restore its output moves five bytes for every one it saves (measured: +7% on the cnn
 * workload's step for 8% of its activations). */
static bool is_cheap(const snug_graph *g, const graph_node *n) {
    if (!is_layer(n) || (n->op->flags & OP_IS_LOSS)) return false;
    double f = n->op->flops ? n->op->flops(n) : 0, out = (double)g->tensors[n->output].numel;
    return f < CHEAP_FLOPS_PER_ELEMENT * out && out >= (double)g->tensors[n->inputs[0]].numel;
}

/* Whether backward reads tensor t whatever the policy: a reader keeps its input (a convolution, a normalisation),
 * or its producer keeps its output (ReLU), or it is the graph input (always resident). Readers through views
 * (flatten) count. */
static bool kept_anyway(const snug_graph *g, const plan_reads *r, snug_tensor t) {
    const graph_node *producer = &g->nodes[g->tensors[t].producer];
    return (producer->op->flags & (OP_IS_INPUT | OP_KEEPS_OUTPUT)) || r->kept[t];
}

static size_t layer_count(const snug_graph *g) {
    size_t n = 0;
    for (int i = 0; i < g->n_nodes; i++) n += is_layer(&g->nodes[i]);
    return n;
}

/* Segment length for the policy: 0 means one segment (no checkpointing). */
static size_t segment_length(const snug_graph *g, snug_checkpoint_policy policy) {
    switch (policy.kind) {
    case SNUG_CHECKPOINT_SQRT: return (size_t)ceil(sqrt((double)layer_count(g)));
    case SNUG_CHECKPOINT_EVERY: return policy.every;
    default: return 0;
    }
}

/* Marks the layers whose output a layer of another segment reads. */
static void mark_crossing(const snug_graph *g, const int *segment, bool *crossing) {
    for (int c = 0; c < g->n_nodes; c++) {
        const graph_node *n = &g->nodes[c];
        if (!is_layer(n)) continue;
        for (int i = 0; i < n->n_inputs; i++) {
            int producer = g->tensors[graph_base_tensor(g, n->inputs[i])].producer;
            if (segment[producer] != segment[c]) crossing[producer] = true;
        }
    }
}

/* CHEAP: a segment ends at every layer that is not cheap, so it holds the cheap layers between two expensive
 * ones and the second: their outputs replay just before its backward, the first one that needs them. */
static void cut_after_expensive(const snug_graph *g, int *segment) {
    int seg = 0;
    for (int i = 0; i < g->n_nodes; i++) {
        segment[i] = seg;
        if (is_layer(&g->nodes[i]) && !is_cheap(g, &g->nodes[i])) seg++;
    }
}

/* Cuts layers into segments of `len`. For sqrt, each cut snaps to the layer with the smallest output within
 * half a segment of the nominal cut: a segment boundary is a tensor kept for the whole step, so it should be a
 * narrow one (a residual stream, not an MLP's 4x hidden layer). */
static void assign_segments(const snug_graph *g, snug_checkpoint_policy policy, int *segment) {
    if (policy.kind == SNUG_CHECKPOINT_CHEAP) {
        cut_after_expensive(g, segment);
        return;
    }
    size_t len = segment_length(g, policy), n = 0;
    int *layers = malloc(((size_t)g->n_nodes + 1) * sizeof *layers);
    int *seg_of_layer = calloc((size_t)g->n_nodes + 1, sizeof *seg_of_layer);
    if (!layers || !seg_of_layer) len = 0; /* degrade to no checkpointing rather than fail */
    for (int i = 0; layers && i < g->n_nodes; i++)
        if (is_layer(&g->nodes[i])) layers[n++] = i;
    int seg = 0;
    for (size_t i = 0; len && i < n; seg++) {
        size_t cut = i + len - 1 < n ? i + len - 1 : n - 1;
        if (policy.kind == SNUG_CHECKPOINT_SQRT) {
            size_t lo = i + (len > 1 ? len / 2 : 1) - 1, hi = i + len + len / 2 - 1, best = cut;
            if (hi > n - 1) hi = n - 1;
            for (size_t c = lo; c <= hi; c++) {
                size_t a = g->tensors[g->nodes[layers[c]].output].numel, b = g->tensors[g->nodes[layers[best]].output].numel;
                if (a < b || (a == b && (c > cut ? c - cut : cut - c) < (best > cut ? best - cut : cut - best))) best = c;
            }
            cut = best;
        }
        for (size_t c = i; c <= cut; c++) seg_of_layer[c] = seg;
        i = cut + 1;
    }
    for (int i = 0, k = 0; i < g->n_nodes; i++) {
        if (is_layer(&g->nodes[i])) segment[i] = len ? seg_of_layer[k++] : 0;
        else segment[i] = i ? segment[i - 1] : 0;
    }
    free(layers);
    free(seg_of_layer);
}

/* Selective: of the droppable layers, keeps droppable only the cheap ones that replay from what backward keeps
 * anyway (or from other droppable layers), or from inputs smaller than their output: a UNet's concatenation of
 * an upsampled tensor and a skip (kept anyway) is replayed from the upsampled half, which is then kept instead
 * of the whole. */
static void keep_cheap_only(const snug_graph *g, const plan_reads *r, bool *drop) {
    for (int i = 0; i < g->n_nodes; i++) {
        const graph_node *n = &g->nodes[i];
        drop[i] = drop[i] && is_cheap(g, n);
        size_t kept_for_replay = 0; /* elements per sample kept only so that this layer can replay */
        for (int k = 0; drop[i] && k < n->n_inputs; k++) {
            snug_tensor t = graph_base_tensor(g, n->inputs[k]);
            bool repeated = false;
            for (int j = 0; j < k; j++) repeated |= graph_base_tensor(g, n->inputs[j]) == t;
            if (!repeated && !drop[g->tensors[t].producer] && !kept_anyway(g, r, t)) kept_for_replay += g->tensors[t].numel;
        }
        drop[i] = drop[i] && kept_for_replay < g->tensors[n->output].numel;
    }
}

/* Whether layer i's only reader (reader[i], or -1: the layer that would regenerate i's output, plan/regen.c)
 * will regenerate it if i stays: that reader and the layer i replays from are kept (decided already for the
 * reader, which comes later; a kept source stays kept, since this pass only keeps more). Then dropping i would
 * replay a tensor that need not exist at all. */
static bool regenerated_if_kept(const snug_graph *g, const bool *drop, const int *reader, int i) {
    return reader[i] >= 0 && !drop[reader[i]] && !drop[plan_regen_source(g, i)];
}

/* Of the droppable layers, drops only those whose output backward reads or another dropped layer replays from:
 * replaying the rest would cost time and save nothing (a normalisation whose only reader is a kept ReLU), and
 * none whose reader regenerates its output instead. Layers are decided last first, so every reader of a layer's
 * output (a later layer) is decided before it: replayed_from marks the tensors the dropped ones read. */
static void drop_only_useful(const snug_graph *g, const plan_reads *r, const plan_variant *v, bool *drop, int *reader,
                             bool *replayed_from) {
    for (int i = 0; i < g->n_nodes; i++) reader[i] = -1;
    for (int c = 0; c < g->n_nodes; c++) {
        const int producer = plan_regen_producer(g, r, v, c);
        if (producer >= 0) reader[producer] = c;
    }
    for (int i = g->n_nodes - 1; i >= 0; i--) {
        const graph_node *n = &g->nodes[i];
        drop[i] = drop[i] && ((kept_anyway(g, r, n->output) && !regenerated_if_kept(g, drop, reader, i)) ||
                              replayed_from[n->output]);
        for (int k = 0; drop[i] && k < n->n_inputs; k++) replayed_from[graph_base_tensor(g, n->inputs[k])] = true;
    }
}

snug_status plan_segment(const snug_graph *g, const plan_reads *r, const plan_variant *v, plan_segments *s) {
    memset(s, 0, sizeof *s);
    size_t nn = (size_t)g->n_nodes;
    s->segment = calloc(nn, sizeof *s->segment);
    s->recompute = calloc(nn, sizeof *s->recompute);
    bool *crossing = calloc(nn, sizeof *crossing);
    int *reader = calloc(nn ? nn : 1, sizeof *reader);
    bool *replayed_from = calloc(g->n_tensors ? (size_t)g->n_tensors : 1, sizeof *replayed_from);
    if (!s->segment || !s->recompute || !crossing || !reader || !replayed_from) {
        free(crossing);
        free(reader);
        free(replayed_from);
        plan_segments_free(s);
        return SNUG_E_OOM;
    }
    assign_segments(g, v->policy, s->segment);
    int last = 0;
    for (int i = 0; i < g->n_nodes; i++)
        if (s->segment[i] > last) last = s->segment[i];
    mark_crossing(g, s->segment, crossing);
    for (int i = 0; i < g->n_nodes; i++) {
        const graph_node *n = &g->nodes[i];
        /* The last segment is never dropped: its backward comes right after its forward. */
        s->recompute[i] = is_layer(n) && s->segment[i] < last && !crossing[i] &&
                          (v->recomputed_segments < 0 || s->segment[i] < v->recomputed_segments) &&
                          !(s->segment[i] < 64 && (v->spared >> s->segment[i] & 1));
    }
    if (v->selective) keep_cheap_only(g, r, s->recompute);
    drop_only_useful(g, r, v, s->recompute, reader, replayed_from);
    int counted = -1;
    for (int i = 0; i < g->n_nodes; i++)
        if (s->recompute[i] && s->segment[i] != counted) {
            s->n_segments++;
            counted = s->segment[i];
        }
    free(crossing);
    free(reader);
    free(replayed_from);
    return SNUG_OK;
}

void plan_segments_free(plan_segments *s) {
    free(s->segment);
    free(s->recompute);
    memset(s, 0, sizeof *s);
}

double plan_segments_recompute_flops(const snug_graph *g, const plan_segments *s) {
    double f = 0;
    for (int i = 0; i < g->n_nodes; i++)
        if (s->recompute[i] && g->nodes[i].op->flops) f += g->nodes[i].op->flops(&g->nodes[i]);
    return f;
}

double plan_recompute_flops(const snug_graph *g, const plan_segments *s, size_t m) {
    double f = 0;
    for (int i = 0; i < g->n_nodes; i++) {
        const graph_node *nd = &g->nodes[i];
        if (s->recompute[i]) f += (nd->op->flops ? nd->op->flops(nd) : 0) * (double)m;
    }
    return f;
}

plan_variant plan_variant_of(snug_checkpoint_policy policy) {
    return (plan_variant){.policy = policy, .selective = policy.kind == SNUG_CHECKPOINT_CHEAP,
                          .recomputed_segments = -1,
                          .product = plan_compute_of(SNUG_PRECISION_FP32, SNUG_PRODUCTS_AUTO).product};
}
