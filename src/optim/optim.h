/* Optimizers, clipping and their state. The parameters and their gradients are each one contiguous block
 * (graph order), so an optimizer step, a clip and (later) an all-reduce are loops over one array. */
#ifndef SNUG_OPTIM_OPTIM_H
#define SNUG_OPTIM_OPTIM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "snug.h"

/* Number of float slots of optimizer state per parameter element: SGD 1 with momentum else 0, AdamW 2. */
int optim_state_slots(const snug_optim_config *cfg);

/* A trainable tensor's elements in the parameter (and gradient) block. */
typedef struct optim_span {
    size_t offset, numel;
    bool rewritten; /* the next window's first writer of its gradient writes it whole: a step that consumes the
                       gradients (optim_step_consume) leaves it as it is instead of zeroing it */
    uint16_t *copy16; /* a 16-bit copy of the tensor's values (a bf16 plan's kept weights), or NULL: the update
                         writes it through optim_state.round16 as it writes each new value, while the value is in
                         L1, so that no pass of its own reads the tensor again to round it */
} optim_span;

/* Tensors under this many elements go whole to thread 0 in the passes over the gradients (a bias, a norm's
 * scale): cutting them would put two threads on a few lines for nothing. */
#define OPTIM_SHARE_MIN ((size_t)4096)

/* The elements [*lo, *hi) of tensor s that thread t of T streams in the passes over the gradients (the norm and
 * the update): the t-th of T contiguous parts, cut on 16-float (cache-line) boundaries of the tensor; a tensor
 * under OPTIM_SHARE_MIN goes whole to thread 0. Per tensor, because a weight gradient's product hands each
 * thread a contiguous part of the weight's rows in the same order (sgemm claims rows from the two ends, and the
 * forward claims the weight's rows the same way): each thread then reads back in the norm and writes in the
 * update the lines it wrote itself. On a host whose two vCPUs sit on cores that share no cache, a line the other
 * core wrote moves at a third of the speed of one's own (docs/performance.md). */
void optim_share(const optim_span *s, int t, int T, size_t *lo, size_t *hi);

/* The thread of T whose share (optim_share) holds element i of the block that spans[0..n_spans) tile. */
int optim_owner(const optim_span *spans, int n_spans, size_t i, int T);

/* spans, or where it is NULL the block of n elements as one tensor, stored in *whole; *n_spans set to match.
 * The norm and the update treat a block given without its tensors the same way. */
const optim_span *optim_spans_or_whole(const optim_span *spans, int *n_spans, size_t n, optim_span *whole);

/* Whether spans[0..n_spans) tile [0, n) in order, each non-empty: the update covers exactly the block. */
bool optim_spans_tile(const optim_span *spans, int n_spans, size_t n);

typedef struct optim_state {
    snug_optim_config cfg;
    float *state;   /* optim_state_slots * n floats, zero at start (SNUG_MEM_OPTIM) */
    size_t n;       /* parameter elements */
    long t;         /* optimizer steps taken: AdamW's bias correction counter */
    const optim_span *spans; /* the tensors, tiling [0, n) (optim_spans_tile), or NULL: one tensor */
    int n_spans;
    /* How the spans' copy16 are written: dst[i] from src[i] for i < n, element by element (so any split gives
     * the same bits). The caller's, because the copy must hold the bits its readers would round themselves
     * (bgemm's rounding, in a room this one does not know); NULL when no span has a copy. */
    void (*round16)(uint16_t *dst, const float *src, size_t n);
} optim_state;

/* One step over params[0..n) with gradients grads at learning rate lr. Advances st->t. */
void optim_step(optim_state *st, float *params, const float *grads, float lr);

/* The trainer's step: the same update with every gradient multiplied by grad_scale as it is read (the clip
 * factor from grad_clip_factor: the same bits as grad_clip followed by optim_step), and grads left zero, ready
 * for the next window, in the same pass over memory: all of them, but the tensors whose span is rewritten
 * (their next writer writes them whole, so they keep this window's values). */
void optim_step_consume(optim_state *st, float *params, float *grads, float grad_scale, float lr);

/* The global L2 norm of grads[0..n), computed in double. Not finite when any element is not. spans (NULL: one
 * tensor) say which thread reads which part (optim_share); the bits do not depend on them nor on the threads. */
double grad_global_norm(const float *grads, size_t n, const optim_span *spans, int n_spans);
/* The factor that brings a gradient of global norm `norm` to at most max_norm: max_norm / (norm + 1e-6) when
 * that is below 1, else 1; also 1 when clipping is off (max_norm <= 0 or NaN) or the norm is not finite. */
float grad_clip_factor(double norm, float max_norm);
/* Scales grads so that their global norm is at most max_norm (PyTorch's clip_grad_norm_: factor
 * max_norm / (norm + 1e-6), applied only when < 1). Returns the factor applied. */
float grad_clip(float *grads, size_t n, double norm, float max_norm);

#endif
