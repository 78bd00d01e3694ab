/* optim_run (optim_impl.h): an optimizer's element-wise kernel over the parameters, block by block, each
 * thread its own share of every tensor. */
#include <omp.h>
#include <string.h>

#include "core/mem.h"
#include "core/parallel.h"
#include "core/stream_store.h"
#include "optim/optim_impl.h"

/* 256 floats: a block's parameters, gradients, state and new parameters stay in L1 from the update through its
 * streaming store to the zeroing of its gradients (1024 and 4096 measure the same within the host's noise). */
#define OPTIM_BLOCK ((size_t)256)

/* The new parameters go through a block on the stack (in L1) and then past the caches into params: a plain
 * store into params would wait for the line to be taken from the other core, which read it in the products
 * (core/stream_store.h). One copy through L1 costs far less than those waits. Tensor s's copy16 (where it has
 * one) is rounded from the same block while it is in L1. */
static void run_blocks(const optim_state *st, const optim_span *s, size_t lo, size_t hi, optim_span_fn span,
                       const void *ctx, const optim_grads *gr, float *params, bool zero) {
    _Alignas(SNUG_MEM_ALIGN) float p_new[OPTIM_BLOCK];
    uint16_t *copy = st->round16 ? s->copy16 : NULL;
    for (size_t b = lo; b < hi; b += OPTIM_BLOCK) {
        const size_t e = hi - b < OPTIM_BLOCK ? hi : b + OPTIM_BLOCK;
        span(ctx, gr, b, e, p_new);
        stream_floats(params + b, p_new, e - b);
        if (copy) st->round16(copy + (b - s->offset), p_new, e - b);
        if (zero) memset(gr->g + b, 0, (e - b) * sizeof(float));
    }
}

/* Whether the update leaves tensor s's gradients zero behind it (a rewritten one is written whole next). */
static bool zeroes(const optim_grads *gr, const optim_span *s) { return gr->consume && !s->rewritten; }

void optim_run(const optim_state *st, size_t streams, optim_span_fn span, const void *ctx, const optim_grads *gr,
               float *params) {
    const size_t n = st->n;
    optim_span whole;
    int n_spans = st->n_spans;
    const optim_span *spans = optim_spans_or_whole(st->spans, &n_spans, n, &whole);
    if (n < OPTIM_PARALLEL_MIN || !par_pays_floats(streams * n)) {
        for (int i = 0; i < n_spans; i++)
            run_blocks(st, &spans[i], spans[i].offset, spans[i].offset + spans[i].numel, span, ctx, gr, params,
                       zeroes(gr, &spans[i]));
        stream_fence();
        return;
    }
    /* Each thread its share of every tensor (optim_share), the same every step and the same as the norm's. Not
     * chunks handed out in turn (which let a faster vCPU take more): with the two vCPUs on cores that share no
     * cache, half of what each thread read would have been written by the other (the weight gradients'
     * products split rows), and the mlp's update after an accumulation window takes about 1.5x as long that way.
     * Element-wise, so the bits do not depend on the shares. */
    #pragma omp parallel
    {
        const int t = omp_get_thread_num(), T = omp_get_num_threads();
        for (int i = 0; i < n_spans; i++) {
            size_t lo, hi;
            optim_share(&spans[i], t, T, &lo, &hi);
            if (lo < hi) run_blocks(st, &spans[i], lo, hi, span, ctx, gr, params, zeroes(gr, &spans[i]));
        }
        stream_fence(); /* before the team's closing barrier publishes the parameters */
    }
}
