/* Offsets in the activation arena. Buffers whose lifetimes are disjoint may share memory; placing the largest
 * first at the lowest offset that is free for its whole lifetime (greedy by size, as TFLite's and ggml's
 * planners do) packs a forward/backward schedule close to its live peak. Buffers that continue another in place
 * take its offset. */
#include <stdlib.h>

#include "plan/plan.h"

/* Sort keys travel with the index, so the comparison needs no context. */
typedef struct order_key {
    size_t bytes;
    int first, index;
} order_key;

static int by_size_desc(const void *a, const void *b) {
    const order_key *x = a, *y = b;
    if (x->bytes != y->bytes) return x->bytes < y->bytes ? 1 : -1;
    if (x->first != y->first) return x->first < y->first ? -1 : 1;
    return x->index - y->index;
}

static bool lifetimes_meet(const act_buffer *a, const act_buffer *b) {
    return a->first <= b->last && b->first <= a->last;
}

static int by_offset(const void *a, const void *b) {
    const act_buffer *x = *(act_buffer *const *)a, *y = *(act_buffer *const *)b;
    return x->offset < y->offset ? -1 : x->offset > y->offset;
}

/* The lowest offset where b fits between the placed buffers that live at the same time. */
static size_t lowest_fit(const act_buffer *b, act_buffer **placed, int n_placed, act_buffer **scratch) {
    int n = 0;
    for (int i = 0; i < n_placed; i++)
        if (lifetimes_meet(b, placed[i])) scratch[n++] = placed[i];
    qsort(scratch, (size_t)n, sizeof *scratch, by_offset);
    size_t offset = 0;
    for (int i = 0; i < n; i++) {
        if (scratch[i]->offset >= offset + b->bytes) break;
        size_t end = scratch[i]->offset + scratch[i]->bytes;
        if (end > offset) offset = end;
    }
    return offset;
}

bool plan_assign_offsets(plan *p) {
    order_key *order = malloc((size_t)(p->n_bufs + 1) * sizeof *order);
    act_buffer **placed = malloc((size_t)(p->n_bufs + 1) * sizeof *placed);
    act_buffer **scratch = malloc((size_t)(p->n_bufs + 1) * sizeof *scratch);
    int n = 0, n_placed = 0;
    bool ok = order && placed && scratch;
    p->arena_bytes = 0;
    if (ok) {
        for (int b = 0; b < p->n_bufs; b++)
            if (p->bufs[b].shares < 0) order[n++] = (order_key){p->bufs[b].bytes, p->bufs[b].first, b};
        qsort(order, (size_t)n, sizeof *order, by_size_desc);
        for (int i = 0; i < n; i++) {
            act_buffer *b = &p->bufs[order[i].index];
            b->offset = lowest_fit(b, placed, n_placed, scratch);
            placed[n_placed++] = b;
            if (b->offset + b->bytes > p->arena_bytes) p->arena_bytes = b->offset + b->bytes;
        }
        for (int b = 0; b < p->n_bufs; b++) {
            int root = b;
            while (p->bufs[root].shares >= 0) root = p->bufs[root].shares;
            p->bufs[b].offset = p->bufs[root].offset;
        }
    }
    free(order);
    free(placed);
    free(scratch);
    return ok;
}

/* Sharers live inside their root's lifetime and memory by construction; only roots need checking. */
bool plan_find_overlap(const plan *p, int *a, int *b) {
    for (int i = 0; i < p->n_bufs; i++) {
        const act_buffer *x = &p->bufs[i];
        if (x->shares >= 0) continue;
        if (x->offset + x->bytes > p->arena_bytes) { *a = *b = i; return true; }
        for (int j = i + 1; j < p->n_bufs; j++) {
            const act_buffer *y = &p->bufs[j];
            if (y->shares >= 0 || !lifetimes_meet(x, y)) continue;
            if (x->offset < y->offset + y->bytes && y->offset < x->offset + x->bytes) {
                *a = i;
                *b = j;
                return true;
            }
        }
    }
    return false;
}
