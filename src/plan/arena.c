/* Offsets in the activation arena. Buffers whose lifetimes are disjoint may share memory; placing the largest
 * first at the lowest offset that is free for its whole lifetime (greedy by size, as TFLite's and ggml's
 * planners do) packs a forward/backward schedule close to its live peak. Buffers that continue another in place
 * take its offset.
 *
 * With several threads, a second pass places the same buffers in the same order within that arena (never a
 * byte more), each where its threads' parts fall on memory the same threads last used. The ops split a batch
 * by samples in contiguous parts (thread t the t-th), so the bytes of a buffer that thread t touches are its
 * t-th part. Where a smaller buffer reuses a larger one's memory from offset 0, its second thread's part lands
 * on the first thread's part of the larger: those lines sit in the other core's cache, and on a processor whose
 * cores do not share a last-level cache (AMD's chiplets, and a virtual machine whose two vCPUs the host
 * places on two of them) every such line crosses between the caches: 25 against 85 GB/s on this machine's
 * EPYC, and a pooling layer that writes partial lines waits out each transfer (the cnn's full batch 10.4 ms
 * a step against 6.5 ms with the vCPUs on one cache; 8.2 ms with no reuse at all). Where that pass cannot fit a
 * buffer within the first arena, the first placement stands. */
#include <stdint.h>
#include <stdlib.h>

#include "core/checked.h"
#include "core/mem.h"

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

/* Adds b to placed[0, n), which stays in offset order (the fits walk it in that order, no sort per buffer). */
static void insert_by_offset(act_buffer **placed, int n, act_buffer *b) {
    int i = n;
    while (i > 0 && placed[i - 1]->offset > b->offset) {
        placed[i] = placed[i - 1];
        i--;
    }
    placed[i] = b;
}

/* The lowest offset where b fits between the placed buffers (kept in offset order) that live at the same time. */
static size_t lowest_fit(const act_buffer *b, act_buffer **placed, int n_placed, act_buffer **scratch) {
    int n = 0;
    for (int i = 0; i < n_placed; i++)
        if (lifetimes_meet(b, placed[i])) scratch[n++] = placed[i];
    size_t offset = 0;
    for (int i = 0; i < n; i++) {
        if (scratch[i]->offset >= offset + b->bytes) break;
        size_t end = scratch[i]->offset + scratch[i]->bytes;
        if (end > offset) offset = end;
    }
    return offset;
}

/* ---- thread parts ------------------------------------------------------------------------------------------
 * A buffer's thread parts: part t of T spans [start + cut(t), start + cut(t + 1)), cut(t) at the first byte of
 * sample m t / T (rounded down, as the ops' contiguous splits round), or at t / T of the bytes where a batch has
 * fewer samples than threads (the ops then split within samples, mostly by channels). */
typedef struct thread_parts {
    size_t m;
    int T;
} thread_parts;

static size_t part_cut(const thread_parts *tp, size_t start, size_t bytes, int t) {
    const size_t num = tp->m >= (size_t)tp->T ? tp->m * (size_t)t / (size_t)tp->T : (size_t)t;
    const size_t den = tp->m >= (size_t)tp->T ? tp->m : (size_t)tp->T;
    return start + (size_t)((double)bytes * (double)num / (double)den); /* a heuristic: rounding is harmless */
}

/* Bytes that a buffer at x (xb bytes) and one at y (yb bytes) both cover but give to different threads: their
 * overlap less what part t of each shares with part t of the other. */
static size_t crossed_bytes(const thread_parts *tp, size_t x, size_t xb, size_t y, size_t yb) {
    const size_t lo = x > y ? x : y, hi = x + xb < y + yb ? x + xb : y + yb;
    size_t same = 0;
    for (int t = 0; t < tp->T; t++) {
        const size_t xs = part_cut(tp, x, xb, t), ys = part_cut(tp, y, yb, t);
        const size_t xe = t + 1 < tp->T ? part_cut(tp, x, xb, t + 1) : x + xb;
        const size_t ye = t + 1 < tp->T ? part_cut(tp, y, yb, t + 1) : y + yb;
        const size_t s = xs > ys ? xs : ys, e = xe < ye ? xe : ye;
        if (e > s) same += e - s; /* inside [lo, hi): each part lies inside its own buffer */
    }
    return hi > lo ? hi - lo - same : 0;
}

/* What placing b at `offset` crosses with every placed buffer whose memory it would reuse. */
static size_t crossed_with_placed(const thread_parts *tp, const act_buffer *b, size_t offset, act_buffer **placed,
                                  int n_placed) {
    size_t total = 0;
    for (int i = 0; i < n_placed; i++)
        if (placed[i]->offset < offset + b->bytes && offset < placed[i]->offset + placed[i]->bytes)
            total += crossed_bytes(tp, placed[i]->offset, placed[i]->bytes, offset, b->bytes);
    return total;
}

/* The arrays the placement works in, each with room for every buffer (cand: a cut of every buffer per thread
 * boundary, and a gap's two ends). */
typedef struct arena_work {
    act_buffer **placed; /* placed so far, in offset order */
    act_buffer **live;   /* those whose lifetimes meet the buffer being placed */
    act_buffer **near;   /* those whose memory reaches into the gap being tried */
    size_t *cand;        /* the gap's candidate offsets */
} arena_work;

static int by_value(const void *a, const void *b) {
    const size_t x = *(const size_t *)a, y = *(const size_t *)b;
    return (x > y) - (x < y);
}

/* Candidates in the free gap [lo, hi): its ends, and each offset that puts a cut of b on the same cut of a
 * placed buffer reaching into the gap (the crossing is piecewise linear in the offset, least at such
 * alignments), each tried once (many buffers share offsets). Only those buffers can share memory with b
 * there. Keeps the best as *best, *best_crossed (the lower offset of a tie). */
static void try_gap(const thread_parts *tp, const act_buffer *b, size_t lo, size_t hi, int n_placed,
                    arena_work *w, size_t *best, size_t *best_crossed) {
    if (hi < lo + b->bytes) return;
    int n = 0, nc = 0;
    for (int i = 0; i < n_placed; i++)
        if (w->placed[i]->offset < hi && w->placed[i]->offset + w->placed[i]->bytes > lo) w->near[n++] = w->placed[i];
    w->cand[nc++] = lo;
    w->cand[nc++] = hi - b->bytes;
    for (int i = 0; i < n; i++)
        for (int t = 1; t < tp->T; t++) {
            const size_t at = part_cut(tp, w->near[i]->offset, w->near[i]->bytes, t), rel = part_cut(tp, 0, b->bytes, t);
            if (at < rel) continue;
            const size_t o = (at - rel) / SNUG_MEM_ALIGN * SNUG_MEM_ALIGN;
            if (o >= lo && o + b->bytes <= hi) w->cand[nc++] = o;
        }
    qsort(w->cand, (size_t)nc, sizeof *w->cand, by_value);
    for (int i = 0; i < nc; i++) {
        if (i > 0 && w->cand[i] == w->cand[i - 1]) continue;
        const size_t c = crossed_with_placed(tp, b, w->cand[i], w->near, n);
        if (c < *best_crossed || (c == *best_crossed && w->cand[i] < *best)) {
            *best = w->cand[i];
            *best_crossed = c;
        }
    }
}

/* The offset within [0, arena) where b's thread parts cross the fewest bytes of the placed buffers' parts;
 * false where no gap between the buffers live at the same time holds it. */
static bool affine_fit(const thread_parts *tp, const act_buffer *b, size_t arena, int n_placed, arena_work *w,
                       size_t *offset) {
    int n = 0;
    for (int i = 0; i < n_placed; i++)
        if (lifetimes_meet(b, w->placed[i])) w->live[n++] = w->placed[i];
    size_t best = SIZE_MAX, best_crossed = SIZE_MAX, lo = 0;
    for (int i = 0; i <= n; i++) {
        const size_t hi = i < n ? w->live[i]->offset : arena;
        if (hi > lo) try_gap(tp, b, lo, hi, n_placed, w, &best, &best_crossed);
        if (i < n && w->live[i]->offset + w->live[i]->bytes > lo) lo = w->live[i]->offset + w->live[i]->bytes;
    }
    *offset = best;
    return best != SIZE_MAX;
}

/* ---- placement ---------------------------------------------------------------------------------------------- */

/* Places the roots in `order`: lowest fit, or (tp not NULL) affine_fit within `arena`. False where an affine
 * pass finds no room for a buffer. */
static bool place(plan *p, const order_key *order, int n, const thread_parts *tp, size_t arena, arena_work *w) {
    int n_placed = 0;
    p->arena_bytes = 0;
    for (int i = 0; i < n; i++) {
        act_buffer *b = &p->bufs[order[i].index];
        if (!tp) b->offset = lowest_fit(b, w->placed, n_placed, w->live);
        else if (!affine_fit(tp, b, arena, n_placed, w, &b->offset)) return false;
        insert_by_offset(w->placed, n_placed++, b);
        if (b->offset + b->bytes > p->arena_bytes) p->arena_bytes = b->offset + b->bytes;
    }
    return true;
}

/* The roots in placing order: largest first, then the earliest. */
static int roots_by_size(const plan *p, order_key *order) {
    int n = 0;
    for (int b = 0; b < p->n_bufs; b++)
        if (p->bufs[b].shares < 0) order[n++] = (order_key){p->bufs[b].bytes, p->bufs[b].first, b};
    qsort(order, (size_t)n, sizeof *order, by_size_desc);
    return n;
}

bool plan_assign_offsets(plan *p) {
    const size_t nb = (size_t)p->n_bufs + 1, cuts = p->threads > 1 ? (size_t)p->threads - 1 : 1;
    size_t cand_bytes;
    const bool cand_fits = size_mul(nb, cuts, &cand_bytes) && size_add(cand_bytes, 2, &cand_bytes) &&
                           size_mul(cand_bytes, sizeof(size_t), &cand_bytes);
    order_key *order = malloc(nb * sizeof *order);
    arena_work w = {.placed = malloc(nb * sizeof *w.placed), .live = malloc(nb * sizeof *w.live),
                    .near = malloc(nb * sizeof *w.near), .cand = cand_fits ? malloc(cand_bytes) : NULL};
    const bool ok = order && w.placed && w.live && w.near && w.cand;
    p->arena_bytes = 0;
    if (ok) {
        const int n = roots_by_size(p, order);
        place(p, order, n, NULL, 0, &w);
        const thread_parts tp = {.m = p->m, .T = p->threads};
        if (p->threads > 1 && !place(p, order, n, &tp, p->arena_bytes, &w))
            place(p, order, n, NULL, 0, &w); /* no room: the first placement, again */
        for (int b = 0; b < p->n_bufs; b++) {
            int root = b;
            while (p->bufs[root].shares >= 0) root = p->bufs[root].shares;
            p->bufs[b].offset = p->bufs[root].offset;
        }
    }
    free(order);
    free(w.placed);
    free(w.live);
    free(w.near);
    free(w.cand);
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
