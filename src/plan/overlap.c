/* The check that a plan's arena is sound (plan_find_overlap): no two buffers live at one step share a byte.
 * Asking it of every pair is quadratic, too slow for the deep graphs the tests plan; a sweep over the steps keeps
 * the buffers live at the current step ordered by offset (a Fenwick tree over the offsets there are) and compares
 * each buffer that starts with its neighbours there only: while no two overlap, they are disjoint ranges, so a
 * new one overlaps some live buffer exactly when it overlaps the nearest below or above it. */
#include <stdlib.h>

#include "plan/plan.h"

typedef struct sweep {
    const plan *p;
    size_t *offsets;    /* the distinct offsets of the roots, ascending: ranks 1..n */
    int n;
    int *tree;          /* Fenwick tree of live buffers per rank */
    int *at;            /* per rank: the live buffer there, or -1 */
    int high;           /* the highest power of two up to n */
} sweep;

/* Sort keys travel with the index, so the comparison needs no context. */
typedef struct step_key {
    int step, index;
} step_key;

static int by_step(const void *a, const void *b) {
    const step_key *x = a, *y = b;
    return (x->step > y->step) - (x->step < y->step);
}

static int by_offset(const void *a, const void *b) {
    const size_t x = *(const size_t *)a, y = *(const size_t *)b;
    return (x > y) - (x < y);
}

static int rank_of(const sweep *w, size_t offset) {
    int lo = 0, hi = w->n - 1;
    while (lo < hi) {
        const int mid = lo + (hi - lo) / 2;
        if (w->offsets[mid] < offset) lo = mid + 1;
        else hi = mid;
    }
    return lo + 1;
}

static void tree_add(sweep *w, int rank, int delta) {
    for (; rank <= w->n; rank += rank & -rank) w->tree[rank] += delta;
}

static int live_up_to(const sweep *w, int rank) {
    int c = 0;
    for (; rank > 0; rank -= rank & -rank) c += w->tree[rank];
    return c;
}

/* The rank of the k-th live buffer by offset (k >= 1). */
static int kth_live(const sweep *w, int k) {
    int pos = 0;
    for (int step = w->high; step > 0; step /= 2)
        if (pos + step <= w->n && w->tree[pos + step] < k) {
            pos += step;
            k -= w->tree[pos];
        }
    return pos + 1;
}

/* Whether root x overlaps a live buffer; sets *other to it. */
static bool meets_live(const sweep *w, int x, int *other) {
    const act_buffer *b = &w->p->bufs[x];
    const int r = rank_of(w, b->offset), below = live_up_to(w, r);
    if (w->at[r] >= 0) return *other = w->at[r], true;
    if (below > 0) {
        const int y = w->at[kth_live(w, below)];
        if (w->p->bufs[y].offset + w->p->bufs[y].bytes > b->offset) return *other = y, true;
    }
    if (below < live_up_to(w, w->n)) {
        const int y = w->at[kth_live(w, below + 1)];
        if (w->p->bufs[y].offset < b->offset + b->bytes) return *other = y, true;
    }
    return false;
}

/* Inserts the roots by first step, after removing those that ended before it. */
static bool sweep_roots(sweep *w, const step_key *starts, const step_key *ends, int n, int *a, int *b) {
    for (int i = 0, e = 0; i < n; i++) {
        const int x = starts[i].index;
        for (; e < n && ends[e].step < starts[i].step; e++) {
            const int r = rank_of(w, w->p->bufs[ends[e].index].offset);
            w->at[r] = -1;
            tree_add(w, r, -1);
        }
        if (meets_live(w, x, b)) return *a = x, true;
        const int r = rank_of(w, w->p->bufs[x].offset);
        w->at[r] = x;
        tree_add(w, r, 1);
    }
    return false;
}

bool plan_find_overlap(const plan *p, int *a, int *b) {
    const size_t nb = (size_t)p->n_bufs + 1;
    step_key *starts = malloc(nb * sizeof *starts), *ends = malloc(nb * sizeof *ends);
    sweep w = {.p = p, .offsets = malloc(nb * sizeof *w.offsets), .tree = calloc(nb + 1, sizeof *w.tree),
               .at = malloc((nb + 1) * sizeof *w.at)};
    bool found = false;
    int n = 0;
    if (!starts || !ends || !w.offsets || !w.tree || !w.at) abort(); /* a test's check: no way to report */
    for (int i = 0; i < p->n_bufs && !found; i++) {
        if (p->bufs[i].shares >= 0) continue; /* sharers live inside their root's lifetime and memory */
        if (p->bufs[i].offset + p->bufs[i].bytes > p->arena_bytes) *a = *b = i, found = true;
        starts[n] = (step_key){p->bufs[i].first, i};
        ends[n] = (step_key){p->bufs[i].last, i};
        w.offsets[n++] = p->bufs[i].offset;
    }
    if (!found && n > 0) {
        qsort(starts, (size_t)n, sizeof *starts, by_step);
        qsort(ends, (size_t)n, sizeof *ends, by_step);
        qsort(w.offsets, (size_t)n, sizeof *w.offsets, by_offset);
        for (int i = 0; i < n; i++)
            if (w.n == 0 || w.offsets[w.n - 1] != w.offsets[i]) w.offsets[w.n++] = w.offsets[i];
        for (int i = 0; i <= w.n; i++) w.at[i] = -1;
        for (w.high = 1; w.high * 2 <= w.n; w.high *= 2) {}
        found = sweep_roots(&w, starts, ends, n, a, b);
    }
    free(starts);
    free(ends);
    free(w.offsets);
    free(w.tree);
    free(w.at);
    return found;
}
