/* Private to src/optim: the per-optimizer steps behind optim_step, and the size below which a loop over the
 * parameters stays on one thread. */
#ifndef SNUG_OPTIM_OPTIM_IMPL_H
#define SNUG_OPTIM_OPTIM_IMPL_H

#include <stddef.h>

#include "optim/optim.h"

/* Below this many elements, starting an OpenMP team costs more than the loop itself (a bias vector). */
#define OPTIM_PARALLEL_MIN ((size_t)32768)

/* torch.optim.SGD with dampening 0. State: the momentum buffer (n floats) when momentum != 0, else none. */
void sgd_step(optim_state *st,
              float *params,       // (n)
              const float *grads,  // (n)
              float lr);

/* torch.optim.AdamW with amsgrad off. State: m (n floats), then v (n floats). Expects st->t already advanced
 * to the number of this step (1 on the first). */
void adamw_step(optim_state *st,
                float *params,       // (n)
                const float *grads,  // (n)
                float lr);

#endif
