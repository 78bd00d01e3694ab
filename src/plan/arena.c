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
 * places on two of them) every such line crosses between the caches, at a fraction of a cache's bandwidth, and
 * a pooling layer that writes partial lines waits out each transfer: reuse placed that way can make a step
 * slower than no reuse at all (docs/performance.md, "Figures behind the code"). Where that pass cannot fit a
 * buffer within the first arena, the first placement stands.
 *
 * Both passes ask, for each buffer, about the placed buffers whose lifetimes meet its own: a deep chain keeps
 * thousands of them live at once, so asking each of them would make planning quadratic, and weighing every placed
 * buffer for every offset the second pass tries, cubic. Only the memory those buffers cover together
 * matters, so a tree over the schedule's steps keeps that memory as merged byte ranges (time_index), and a
 * question reads a few dozen sets of ranges; the second pass finds the placed buffers near an offset through
 * buckets of memory (memory_index), weighs only the start of each free gap (weighed_end), and stops at the first
 * offset that crosses nothing. The offsets are the ones a scan of every placed buffer gives
 * (tests/test_plan_reference.c keeps that scan). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/mem.h"

#include "plan/plan.h"

/* Sort keys travel with the index, so the comparison needs no context. */
typedef struct order_key {
    size_t bytes;
    int first, index, span; /* span: the steps it lives past its first */
} order_key;

static int by_size_desc(const void *a, const void *b) {
    const order_key *x = a, *y = b;
    if (x->bytes != y->bytes) return x->bytes < y->bytes ? 1 : -1;
    if (x->first != y->first) return x->first < y->first ? -1 : 1;
    return x->index - y->index;
}

/* The longest-lived first, then as by_size_desc. */
static int by_span_desc(const void *a, const void *b) {
    const order_key *x = a, *y = b;
    if (x->span != y->span) return x->span < y->span ? 1 : -1;
    return by_size_desc(a, b);
}

/* Grows an array of `size`-byte items with room for *cap to hold `need`. */
static bool reserve(void **items, size_t *cap, size_t need, size_t size) {
    if (need <= *cap) return true;
    size_t ncap = *cap ? *cap : 4;
    while (ncap < need) ncap *= 2;
    void *p = realloc(*items, ncap * size);
    if (!p) return false;
    *items = p;
    *cap = ncap;
    return true;
}

/* ---- byte ranges ----------------------------------------------------------------------------------------------
 * A set of disjoint, non-touching byte ranges in ascending order: the memory some buffers cover together. */
typedef struct range {
    size_t start, end;
} range;

typedef struct range_set {
    range *r;
    size_t n, cap;
} range_set;

/* Where the range sets' arrays come from: a deep schedule's tree holds millions of small sets, and allocating
 * and freeing each one alone costs more than placing. An array that grows is copied to a new piece and the old
 * one is left (at most as much again); everything goes at once with the pool. */
typedef struct range_pool {
    range **chunks;
    size_t n_chunks, cap_chunks;
    range *at;
    size_t left;           /* ranges */
} range_pool;

#define RANGE_POOL_CHUNK ((size_t)1 << 16)  /* ranges */

static range *pool_take(range_pool *pool, size_t n) {
    if (n > pool->left) {
        const size_t size = n > RANGE_POOL_CHUNK ? n : RANGE_POOL_CHUNK;
        range *chunk = malloc(size * sizeof *chunk);
        if (!chunk || !reserve((void **)&pool->chunks, &pool->cap_chunks, pool->n_chunks + 1, sizeof *pool->chunks)) {
            free(chunk);
            return NULL;
        }
        pool->chunks[pool->n_chunks++] = chunk;
        pool->at = chunk;
        pool->left = size;
    }
    range *r = pool->at;
    pool->at += n;
    pool->left -= n;
    return r;
}

static void pool_free(range_pool *pool) {
    for (size_t i = 0; i < pool->n_chunks; i++) free(pool->chunks[i]);
    free(pool->chunks);
}

/* Room in s for `need` ranges. */
static bool range_reserve(range_pool *pool, range_set *s, size_t need) {
    if (need <= s->cap) return true;
    size_t cap = s->cap ? s->cap : 4;
    while (cap < need) cap *= 2;
    range *r = pool_take(pool, cap);
    if (!r) return false;
    if (s->n) memcpy(r, s->r, s->n * sizeof *r);
    s->r = r;
    s->cap = cap;
    return true;
}

/* The first range of s that ends after pos (s->n when none). */
static size_t first_ending_after(const range_set *s, size_t pos) {
    size_t lo = 0, hi = s->n;
    while (lo < hi) {
        const size_t mid = lo + (hi - lo) / 2;
        if (s->r[mid].end > pos) hi = mid;
        else lo = mid + 1;
    }
    return lo;
}

/* Adds [start, end) to s, merged with the ranges it overlaps or touches. */
static bool range_add(range_pool *pool, range_set *s, size_t start, size_t end) {
    const size_t i = start ? first_ending_after(s, start - 1) : 0; /* the first range ending at start or later */
    size_t j = i; /* past the last range starting at end or earlier */
    while (j < s->n && s->r[j].start <= end) j++;
    if (i == j) {
        if (!range_reserve(pool, s, s->n + 1)) return false;
        memmove(&s->r[i + 1], &s->r[i], (s->n - i) * sizeof *s->r);
        s->r[i] = (range){start, end};
        s->n++;
        return true;
    }
    const range merged = {start < s->r[i].start ? start : s->r[i].start, end > s->r[j - 1].end ? end : s->r[j - 1].end};
    s->r[i] = merged;
    memmove(&s->r[i + 1], &s->r[j], (s->n - j) * sizeof *s->r);
    s->n -= j - i - 1;
    return true;
}

/* The lowest offset from pos on where `bytes` fit outside every range of the sets q[0, k). Each range that
 * overlaps the window moves it past that range's end, and every offset it skips was blocked. */
static size_t lowest_free(const range_set *const *q, int k, size_t pos, size_t bytes) {
    for (bool moved = true; moved;) {
        moved = false;
        for (int i = 0; i < k; i++) {
            const size_t at = first_ending_after(q[i], pos);
            if (at < q[i]->n && q[i]->r[at].start < pos + bytes) {
                pos = q[i]->r[at].end;
                moved = true;
            }
        }
    }
    return pos;
}

/* The end of the free gap at pos (free in every set), at most limit. */
static size_t gap_end(const range_set *const *q, int k, size_t pos, size_t limit) {
    for (int i = 0; i < k; i++) {
        const size_t at = first_ending_after(q[i], pos);
        if (at < q[i]->n && q[i]->r[at].start < limit) limit = q[i]->r[at].start;
    }
    return limit;
}

/* ---- the placed buffers by lifetime ---------------------------------------------------------------------------
 * A segment tree over the schedule's steps. A placed buffer meets the lifetime [f, l] when it is live at step f,
 * or starts within (f, l]. `cover` holds each buffer's memory at the O(log steps) nodes that tile its lifetime,
 * so the buffers live at f are those of the nodes from f's leaf up to the root; `starts` holds it at its first
 * step's leaf and every node above, so those starting within (f, l] are those of the nodes that tile it. */
typedef struct time_index {
    size_t leaves;          /* a power of two, at least the steps */
    range_set *cover, *starts;
    const range_set **q;    /* the sets of one question */
    range_pool pool;        /* the sets' arrays */
} time_index;

static bool time_index_init(time_index *t, int steps) {
    t->leaves = 1;
    while (t->leaves < (size_t)steps) t->leaves *= 2;
    t->cover = calloc(2 * t->leaves, sizeof *t->cover);
    t->starts = calloc(2 * t->leaves, sizeof *t->starts);
    t->q = malloc(4 * (size_t)(sizeof(size_t) * 8 + 1) * sizeof *t->q);
    return t->cover && t->starts && t->q;
}

static void time_index_clear(time_index *t) {
    for (size_t i = 0; i < 2 * t->leaves; i++) t->cover[i].n = t->starts[i].n = 0;
}

static void time_index_free(time_index *t) {
    pool_free(&t->pool);
    free(t->cover);
    free(t->starts);
    free(t->q);
}

static bool time_index_add(time_index *t, const act_buffer *b) {
    const size_t start = b->offset, end = b->offset + b->bytes;
    bool ok = true;
    for (size_t lo = (size_t)b->first + t->leaves, hi = (size_t)b->last + 1 + t->leaves; lo < hi; lo /= 2, hi /= 2) {
        if (lo & 1) ok &= range_add(&t->pool, &t->cover[lo++], start, end);
        if (hi & 1) ok &= range_add(&t->pool, &t->cover[--hi], start, end);
    }
    for (size_t v = (size_t)b->first + t->leaves; v >= 1; v /= 2) ok &= range_add(&t->pool, &t->starts[v], start, end);
    return ok;
}

/* Gathers in t->q the non-empty sets that hold the placed buffers meeting b's lifetime; returns their count. */
static int time_index_meeting(time_index *t, const act_buffer *b) {
    int k = 0;
    for (size_t v = (size_t)b->first + t->leaves; v >= 1; v /= 2)
        if (t->cover[v].n) t->q[k++] = &t->cover[v];
    for (size_t lo = (size_t)b->first + 1 + t->leaves, hi = (size_t)b->last + 1 + t->leaves; lo < hi; lo /= 2, hi /= 2) {
        if ((lo & 1) && t->starts[lo++].n) t->q[k++] = &t->starts[lo - 1];
        if ((hi & 1) && t->starts[--hi].n) t->q[k++] = &t->starts[hi];
    }
    return k;
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

/* ---- the placed buffers by memory -------------------------------------------------------------------------------
 * Every placed buffer, whatever its lifetime, as a slot (offset, bytes) with the number of buffers placed there,
 * in buckets of `width` bytes by offset. Buffers are placed largest first, so none is wider than the first,
 * and those reaching into [x, y) start in the buckets from x - width to y. */
typedef struct slot {
    size_t offset, bytes, count;
} slot;

typedef struct slot_bucket {
    slot *s;
    size_t n, cap;
} slot_bucket;

typedef struct memory_index {
    size_t width, n_buckets;
    slot_bucket *b;
} memory_index;

static bool memory_index_init(memory_index *mi, size_t width, size_t arena) {
    mi->width = width ? width : 1;
    mi->n_buckets = arena / mi->width + 1;
    mi->b = calloc(mi->n_buckets, sizeof *mi->b);
    return mi->b != NULL;
}

static void memory_index_free(memory_index *mi) {
    for (size_t i = 0; mi->b && i < mi->n_buckets; i++) free(mi->b[i].s);
    free(mi->b);
    mi->b = NULL;
}

static bool memory_index_add(memory_index *mi, const act_buffer *b) {
    slot_bucket *k = &mi->b[b->offset / mi->width];
    for (size_t i = 0; i < k->n; i++)
        if (k->s[i].offset == b->offset && k->s[i].bytes == b->bytes) return k->s[i].count++, true;
    if (!reserve((void **)&k->s, &k->cap, k->n + 1, sizeof *k->s)) return false;
    k->s[k->n++] = (slot){b->offset, b->bytes, 1};
    return true;
}

/* The buckets that may hold slots reaching into [x, y). */
static void buckets_near(const memory_index *mi, size_t x, size_t y, size_t *first, size_t *last) {
    *first = x > mi->width ? (x - mi->width) / mi->width : 0;
    *last = (y - 1) / mi->width;
    if (*last >= mi->n_buckets) *last = mi->n_buckets - 1;
}

/* What placing `bytes` at `offset` crosses with every placed buffer whose memory it would reuse. */
static size_t crossed_at(const thread_parts *tp, const memory_index *mi, size_t offset, size_t bytes) {
    size_t total = 0, first, last;
    buckets_near(mi, offset, offset + bytes, &first, &last);
    for (size_t k = first; k <= last; k++)
        for (size_t i = 0; i < mi->b[k].n; i++) {
            const slot *s = &mi->b[k].s[i];
            if (s->offset < offset + bytes && offset < s->offset + s->bytes)
                total += s->count * crossed_bytes(tp, s->offset, s->bytes, offset, bytes);
        }
    return total;
}

static int by_value(const void *a, const void *b) {
    const size_t x = *(const size_t *)a, y = *(const size_t *)b;
    return (x > y) - (x < y);
}

/* The best offset so far for the buffer being placed: the fewest crossed bytes, then the lowest offset. */
typedef struct fit {
    size_t offset, crossed;
    size_t *cand;
    size_t n_cand, cap_cand;
} fit;

static void consider(fit *f, size_t offset, size_t crossed) {
    if (crossed < f->crossed || (crossed == f->crossed && offset < f->offset)) {
        f->offset = offset;
        f->crossed = crossed;
    }
}

/* Candidates in the free gap [lo, hi), ascending: its ends, and each offset that puts a cut of b on the same cut
 * of a placed buffer reaching into the gap (the crossing is piecewise linear in the offset, least at such
 * alignments), each tried once (many buffers share offsets). The gap's start comes first: where it crosses
 * nothing, no later candidate can do better. */
static bool try_gap(const thread_parts *tp, const memory_index *mi, size_t bytes, size_t lo, size_t hi, fit *f) {
    const size_t at_lo = crossed_at(tp, mi, lo, bytes);
    consider(f, lo, at_lo);
    if (at_lo == 0) return true;
    f->n_cand = 0;
    if (!reserve((void **)&f->cand, &f->cap_cand, 2, sizeof *f->cand)) return false;
    f->cand[f->n_cand++] = lo;
    f->cand[f->n_cand++] = hi - bytes;
    size_t first, last;
    buckets_near(mi, lo, hi, &first, &last);
    for (size_t k = first; k <= last; k++)
        for (size_t i = 0; i < mi->b[k].n; i++) {
            const slot *s = &mi->b[k].s[i];
            if (!(s->offset < hi && s->offset + s->bytes > lo)) continue;
            if (!reserve((void **)&f->cand, &f->cap_cand, f->n_cand + (size_t)tp->T, sizeof *f->cand)) return false;
            for (int t = 1; t < tp->T; t++) {
                const size_t at = part_cut(tp, s->offset, s->bytes, t), rel = part_cut(tp, 0, bytes, t);
                if (at < rel) continue;
                const size_t o = (at - rel) / SNUG_MEM_ALIGN * SNUG_MEM_ALIGN;
                if (o >= lo && o + bytes <= hi) f->cand[f->n_cand++] = o;
            }
        }
    qsort(f->cand, f->n_cand, sizeof *f->cand, by_value);
    for (size_t i = 0; i < f->n_cand && f->crossed > 0; i++) {
        if (i > 0 && f->cand[i] == f->cand[i - 1]) continue;
        consider(f, f->cand[i], f->cand[i] == lo ? at_lo : crossed_at(tp, mi, f->cand[i], bytes));
    }
    return true;
}

/* The end of the part of a free gap [lo, hi) that the second pass weighs for a buffer of `bytes`: twice its
 * size and twice the largest buffer's. A gap may reach over most of the arena (above everything live in a deep
 * chain of many sizes), and weighing an offset for every buffer ever placed there makes the pass quadratic in
 * the buffers; within the window, the placed buffers weighed are those whose memory lies a few largest
 * buffers from the gap's start, a number the depth does not change. The built-in models' offsets are the same
 * as with every gap weighed whole (snug plan --json --layers, every model). */
static size_t weighed_end(size_t lo, size_t hi, size_t bytes, size_t largest) {
    const size_t window = 2 * bytes + 2 * largest;
    return hi - lo > window ? lo + window : hi;
}

/* ---- placement ---------------------------------------------------------------------------------------------- */

typedef struct arena_work {
    time_index time;
    memory_index memory;
    fit fit;
} arena_work;

/* First pass: each root in `order` at the lowest offset free over its lifetime. */
static bool place_lowest(plan *p, const order_key *order, int n, arena_work *w) {
    p->arena_bytes = 0;
    time_index_clear(&w->time);
    for (int i = 0; i < n; i++) {
        act_buffer *b = &p->bufs[order[i].index];
        const int k = time_index_meeting(&w->time, b);
        b->offset = lowest_free(w->time.q, k, 0, b->bytes);
        if (!time_index_add(&w->time, b)) return false;
        if (b->offset + b->bytes > p->arena_bytes) p->arena_bytes = b->offset + b->bytes;
    }
    return true;
}

/* Places root order[i] at `offset` in both indexes. */
static bool place_at(plan *p, const order_key *order, int i, size_t offset, arena_work *w) {
    act_buffer *b = &p->bufs[order[i].index];
    b->offset = offset;
    if (!time_index_add(&w->time, b) || !memory_index_add(&w->memory, b)) return false;
    if (b->offset + b->bytes > p->arena_bytes) p->arena_bytes = b->offset + b->bytes;
    return true;
}

/* Second pass: the pinned roots at their first pass's offsets (those fit together), then each other root in
 * `order` within [0, arena), in the gaps free over its lifetime, at the offset whose thread parts cross the
 * fewest bytes of the placed buffers' parts. *failed is the first root no gap holds, or -1 where all fit. */
static bool place_affine(plan *p, const order_key *order, int n, const thread_parts *tp, size_t arena,
                         const size_t *first_pass, const bool *pinned, arena_work *w, int *failed) {
    *failed = -1;
    p->arena_bytes = 0;
    time_index_clear(&w->time);
    memory_index_free(&w->memory); /* a previous try's */
    size_t largest = 1;
    for (int i = 0; i < n; i++) largest = order[i].bytes > largest ? order[i].bytes : largest;
    if (!memory_index_init(&w->memory, largest, arena)) return false;
    for (int i = 0; i < n; i++)
        if (pinned[i] && !place_at(p, order, i, first_pass[i], w)) return false;
    for (int i = 0; i < n; i++) {
        if (pinned[i]) continue;
        act_buffer *b = &p->bufs[order[i].index];
        const int k = time_index_meeting(&w->time, b);
        w->fit.offset = w->fit.crossed = SIZE_MAX;
        for (size_t pos = 0; w->fit.crossed > 0;) {
            const size_t lo = lowest_free(w->time.q, k, pos, b->bytes);
            if (lo >= arena || arena - lo < b->bytes) break;
            const size_t hi = gap_end(w->time.q, k, lo, arena);
            if (!try_gap(tp, &w->memory, b->bytes, lo, weighed_end(lo, hi, b->bytes, w->memory.width), &w->fit))
                return false;
            pos = hi;
        }
        if (w->fit.offset == SIZE_MAX) {
            *failed = i;
            return true;
        }
        if (!place_at(p, order, i, w->fit.offset, w)) return false;
    }
    return true;
}

/* The roots in placing order: largest first, then the earliest. */
static int roots_by_size(const plan *p, order_key *order) {
    int n = 0;
    for (int b = 0; b < p->n_bufs; b++)
        if (p->bufs[b].shares < 0) order[n++] = (order_key){p->bufs[b].bytes, p->bufs[b].first, b, p->bufs[b].last - p->bufs[b].first};
    qsort(order, (size_t)n, sizeof *order, by_size_desc);
    return n;
}

/* Tries of the second pass: each pins one more buffer that found no room to its first offset. */
#define AFFINE_TRIES 8

/* Both passes. Where the second finds no room for a buffer (the offsets it chose for larger ones left only gaps
 * too small for it, in an arena at the live peak), it tries again with that buffer where the first pass put it,
 * a few times; the first placement stands where it still finds none. Sizing only, the second pass is left
 * out where the first reaches the live peak: the second never takes more than the first's arena, nor can any
 * placement take less than the live peak, so the arena is known, and only the offsets would change. */
/* Greedy by size leaves gaps where small buffers that live long (a transformer's packed outputs, kept from
 * forward to backward) land above short-lived large ones whose memory they could have shared, each in its
 * turn. Where the first pass's arena is above the live peak, placing the longest-lived first (stacked at the
 * bottom, the short-lived above them) is tried too; its order stands where its arena is smaller. */
static bool place_longest_lived_first(plan *p, order_key *order, int n, arena_work *w, order_key *alt) {
    const size_t by_size = p->arena_bytes;
    memcpy(alt, order, (size_t)n * sizeof *alt);
    qsort(alt, (size_t)n, sizeof *alt, by_span_desc);
    if (!place_lowest(p, alt, n, w)) return false;
    if (p->arena_bytes < by_size) {
        memcpy(order, alt, (size_t)n * sizeof *order);
        return true;
    }
    return place_lowest(p, order, n, w);
}

static bool place(plan *p, order_key *order, int n, arena_work *w, size_t *first_pass, bool *pinned, bool sizing,
                  order_key *alt) {
    if (!place_lowest(p, order, n, w)) return false;
    if (p->arena_bytes > p->live_peak && !place_longest_lived_first(p, order, n, w, alt)) return false;
    if (p->threads <= 1) return true;
    if (sizing && p->arena_bytes == p->live_peak) return p->unplaced = true;
    const size_t arena = p->arena_bytes;
    for (int i = 0; i < n; i++) first_pass[i] = p->bufs[order[i].index].offset;
    const thread_parts tp = {.m = p->m, .T = p->threads};
    int failed = 0;
    memset(pinned, 0, (size_t)n * sizeof *pinned);
    for (int t = 0; t < AFFINE_TRIES && failed >= 0; t++) {
        if (!place_affine(p, order, n, &tp, arena, first_pass, pinned, w, &failed)) return false;
        if (failed >= 0) pinned[failed] = true;
    }
    if (failed >= 0) {
        for (int i = 0; i < n; i++) p->bufs[order[i].index].offset = first_pass[i];
        p->arena_bytes = arena;
    }
    return true;
}

bool plan_assign_offsets(plan *p, bool sizing) {
    const size_t nb = (size_t)p->n_bufs + 1;
    order_key *order = malloc(nb * sizeof *order), *alt = malloc(nb * sizeof *alt);
    size_t *first_pass = malloc(nb * sizeof *first_pass);
    bool *pinned = malloc(nb * sizeof *pinned);
    arena_work w = {0};
    bool ok = order && alt && first_pass && pinned && time_index_init(&w.time, p->n_steps);
    p->arena_bytes = 0;
    if (ok) ok = place(p, order, roots_by_size(p, order), &w, first_pass, pinned, sizing, alt);
    if (ok)
        for (int b = 0; b < p->n_bufs; b++) {
            int root = b;
            while (p->bufs[root].shares >= 0) root = p->bufs[root].shares;
            p->bufs[b].offset = p->bufs[root].offset;
        }
    time_index_free(&w.time);
    memory_index_free(&w.memory);
    free(w.fit.cand);
    free(order);
    free(alt);
    free(first_pass);
    free(pinned);
    return ok;
}
