/* SGD, as torch.optim.SGD (dampening 0), one element at a time in PyTorch's order of operations:
 *   d = g + wd * p                         grad.add(param, alpha=wd)
 *   buf = momentum * buf + d               buf.mul_(momentum).add_(grad)
 *   u = nesterov ? d + momentum * buf : buf
 *   p = p + (-lr) * u                      param.add_(grad, alpha=-lr)
 *
 * PyTorch creates the buffer on the first step as a copy of d. Ours is zero there (the planner's memory is
 * zeroed), and momentum * 0 + d == d exactly in float for every finite momentum and d: the product is a zero
 * and adding a zero to d returns d (only d = -0 turns into +0, which changes no later value). So one formula
 * serves every step, and no first-step flag has to survive a save/resume. tests/test_optim.c checks this
 * against a reference that copies d on the first step as PyTorch does. */
#include "core/parallel.h"
#include "optim/optim_impl.h"

/* momentum == 0: no buffer, no state. */
static void sgd_plain(float *restrict p,        // (n)
                      const float *restrict g,  // (n)
                      size_t n, float lr, float wd) {
    const float nlr = -lr;
#pragma omp parallel for simd if (n >= OPTIM_PARALLEL_MIN && par_pays_floats(5 * n))
    for (size_t i = 0; i < n; i++) {
        const float d = g[i] + wd * p[i];
        p[i] = p[i] + nlr * d;
    }
}

/* Heavy-ball momentum: p moves along the buffer. */
static void sgd_momentum(float *restrict p,        // (n)
                         const float *restrict g,  // (n)
                         float *restrict buf,      // (n) momentum buffer
                         size_t n, float lr, float wd, float mom) {
    const float nlr = -lr;
#pragma omp parallel for simd if (n >= OPTIM_PARALLEL_MIN && par_pays_floats(5 * n))
    for (size_t i = 0; i < n; i++) {
        const float d = g[i] + wd * p[i];
        const float b = buf[i] * mom + d;
        buf[i] = b;
        p[i] = p[i] + nlr * b;
    }
}

/* Nesterov: p moves along d + momentum * buf. A loop of its own rather than a branch in the loop above, which
 * would stop the compiler vectorizing at -O2. */
static void sgd_nesterov(float *restrict p,        // (n)
                         const float *restrict g,  // (n)
                         float *restrict buf,      // (n) momentum buffer
                         size_t n, float lr, float wd, float mom) {
    const float nlr = -lr;
#pragma omp parallel for simd if (n >= OPTIM_PARALLEL_MIN && par_pays_floats(5 * n))
    for (size_t i = 0; i < n; i++) {
        const float d = g[i] + wd * p[i];
        const float b = buf[i] * mom + d;
        buf[i] = b;
        p[i] = p[i] + nlr * (d + mom * b);
    }
}

void sgd_step(optim_state *st, float *params, const float *grads, float lr) {
    const snug_optim_config *c = &st->cfg;
    if (c->momentum == 0.0f)
        sgd_plain(params, grads, st->n, lr, c->weight_decay);
    else if (c->nesterov)
        sgd_nesterov(params, grads, st->state, st->n, lr, c->weight_decay, c->momentum);
    else
        sgd_momentum(params, grads, st->state, st->n, lr, c->weight_decay, c->momentum);
}
