/* Which part of each parameter tensor each thread streams in the passes over the gradients (optim.h). The
 * shares depend on the tensors and the thread count only, so a thread meets the same elements step after step,
 * and the element-wise update's bits do not depend on them. */
#include "optim/optim.h"

/* 16 floats: one cache line of the block (whose start is line-aligned: the planner aligns every block). */
#define SHARE_ALIGN ((size_t)16)

/* Where part t of T of tensor s starts in the block: on a line boundary, so that no line has two writers. */
static size_t cut(const optim_span *s, int t, int T) {
    if (t <= 0) return s->offset;
    if (t >= T || s->numel < OPTIM_SHARE_MIN) return s->offset + s->numel;
    const size_t at = (s->offset + s->numel / (size_t)T * (size_t)t) / SHARE_ALIGN * SHARE_ALIGN;
    return at > s->offset ? at : s->offset;
}

void optim_share(const optim_span *s, int t, int T, size_t *lo, size_t *hi) {
    *lo = cut(s, t, T);
    *hi = cut(s, t + 1, T);
}

int optim_owner(const optim_span *spans, int n_spans, size_t i, int T) {
    if (!spans || n_spans <= 0) return 0;
    /* the last tensor starting at or before i (binary search: a model has thousands of tensors) */
    int a = 0, b = n_spans - 1;
    while (a < b) {
        const int mid = a + (b - a + 1) / 2;
        if (spans[mid].offset <= i) a = mid;
        else b = mid - 1;
    }
    int t = T - 1;
    while (t > 0 && cut(&spans[a], t, T) > i) t--;
    return t;
}

const optim_span *optim_spans_or_whole(const optim_span *spans, int *n_spans, size_t n, optim_span *whole) {
    if (spans) return spans;
    *whole = (optim_span){.offset = 0, .numel = n};
    *n_spans = 1;
    return whole;
}

bool optim_spans_tile(const optim_span *spans, int n_spans, size_t n) {
    size_t next = 0;
    for (int i = 0; i < n_spans; i++) {
        if (spans[i].offset != next || spans[i].numel == 0) return false;
        next += spans[i].numel;
    }
    return next == n;
}
