/* Private to src/optim: the per-optimizer steps behind optim_step, and the driver that runs their element-wise
 * kernels over the parameters. */
#ifndef SNUG_OPTIM_OPTIM_IMPL_H
#define SNUG_OPTIM_OPTIM_IMPL_H

#include <stdbool.h>
#include <stddef.h>

#include "optim/optim.h"

/* Below this many elements, starting an OpenMP team costs more than the loop itself (a bias vector). */
#define OPTIM_PARALLEL_MIN ((size_t)32768)

/* How a step reads the gradients: each element is multiplied by scale as it is read (the clip factor, or 1,
 * which is exact), so that clipping needs no pass of its own; with consume set every gradient but the rewritten
 * tensors' (optim_span) is left zero behind the update, so that the next window starts from zero without a
 * memset pass of its own either. */
typedef struct optim_grads {
    float *g;     // (n)
    float scale;
    bool consume;
} optim_grads;

/* One optimizer's update of the elements [lo, hi): reads the parameters and updates the state bound in ctx, and
 * writes the new parameters to p_new[0, hi - lo) (optim_run stores them). */
typedef void (*optim_span_fn)(const void *ctx, const optim_grads *gr, size_t lo, size_t hi, float *p_new);

/* Runs span over [0, st->n) in blocks small enough to stay in L1, each block's new parameters stored into
 * params past the caches (core/stream_store.h) and its gradients zeroed right after when gr->consume (but in
 * rewritten tensors); each
 * thread its share of every tensor (optim_share) when `streams` floats per element make the pass worth a team
 * (core/parallel.h). Every element is updated the same way whoever updates it, so the bits do not depend on
 * the thread count. */
void optim_run(const optim_state *st, size_t streams, optim_span_fn span, const void *ctx, const optim_grads *gr,
               float *params);

/* torch.optim.SGD with dampening 0. State: the momentum buffer (n floats) when momentum != 0, else none. */
void sgd_step(optim_state *st,
              float *params,  // (n)
              const optim_grads *gr,
              float lr);

/* torch.optim.AdamW with amsgrad off. State: m (n floats), then v (n floats). Expects st->t already advanced
 * to the number of this step (1 on the first). */
void adamw_step(optim_state *st,
                float *params,  // (n)
                const optim_grads *gr,
                float lr);

#endif
